"""The Makefile as a user reads it: `make help` lists every documented target."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_help_lists_every_target_with_a_description():
    text = (ROOT / "Makefile").read_text()
    documented = re.findall(r"^([A-Za-z0-9_.-]+):[^\n]*## ", text, re.M)
    assert {"render", "test", "e2e", "e2e-tools", "bench", "detect"} <= set(documented)
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=30).stdout
    listed = re.findall(r"^\s+make (\S+)", out, re.M)
    assert listed == documented
