"""Golden-file assertions: on mismatch, a unified diff and the command that refreshes."""
from __future__ import annotations

import difflib
import os
from pathlib import Path

REFRESH = "make golden   (or: UPDATE_GOLDEN=1 .venv/bin/pytest tests)"


def assert_golden(path: Path, text: str) -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"golden file {path} is missing; create it with: {REFRESH}")
    want = path.read_text()
    if want != text:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            f"{path} (golden)", f"{path} (rendered)"))
        raise AssertionError(f"render differs from golden file {path}:\n{diff}\n"
                             f"If the change is intended, refresh with: {REFRESH}")
