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


def test_nothing_make_test_leaves_out_is_dropped_from_ci():
    """make test's promtool stage lists files that exist (the unit stage runs every other
    file), the tests marked long run in make long, and .ci/run calls make test, make long
    and make e2e."""
    text = (ROOT / "Makefile").read_text()
    listed = re.search(r"^PROMTOOL_TESTS := (.*?)(?<!\\)\n", text, re.M | re.S).group(1)
    files = listed.replace("\\\n", " ").split()
    assert files and all((ROOT / f).is_file() for f in files), files
    long_recipe = re.search(r"^long:.*?\n((?:\t.*\n)+)", text, re.M).group(1)
    assert "-m long" in long_recipe and "OBSGEN_EXAMPLES=200" in long_recipe
    ci = (ROOT / ".ci" / "run").read_text()
    assert "'make test' 'make long' 'make e2e'" in ci
