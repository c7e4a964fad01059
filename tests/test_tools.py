"""promtool and vmalert: missing or too old gives one line that says how to install."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from obsgen import promtool
from obsgen.cli import main


def fake(tmp_path: Path, name: str, script: str) -> None:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def only(tmp_path, monkeypatch):
    """PATH holds only the fake tools of the test (they run with an absolute /bin/sh)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    promtool._too_old.cache_clear()
    yield tmp_path
    promtool._too_old.cache_clear()


CASES = {
    "promtool missing": ("promtool", None,
                         "promtool not found: install Debian's prometheus package (sudo apt-get install prometheus) or put promtool on PATH"),
    "promtool too old": ("promtool", 'echo "promtool, version 2.31.1 (branch: HEAD)"',
                         "promtool is version 2.31.1, older than the 2.42.0 obsgen needs: install Debian's prometheus package"),
    "promtool without a version": ("promtool", "echo hello",
                                   "promtool does not report a version ('hello'): install Debian's prometheus package"),
    "vmalert missing": ("vmalert", None,
                        "vmalert not found: install Debian's victoria-metrics package (sudo apt-get install victoria-metrics) or put vmalert on PATH"),
    "vmalert that cannot parse obsgen's PromQL": ("vmalert", "exit 1",
                                                  "vmalert cannot parse the PromQL obsgen renders (it needs vmalert >= 1.79): install Debian's victoria-metrics package"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_missing_or_old_tool_is_one_line_with_the_fix(case, only):
    tool, script, message = CASES[case]
    if script:
        fake(only, tool, script)
    with pytest.raises(promtool.ToolMissing) as err:
        promtool.find(tool)
    text = str(err.value).replace(f"{only}/", "")
    assert "\n" not in text and text.startswith(message), text


def test_render_without_promtool_exits_2_with_the_hint_and_writes_nothing(only, capsys):
    out = only / "out"
    assert main(["render", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["obsgen: promtool not found: install Debian's prometheus package "
                   "(sudo apt-get install prometheus) or put promtool on PATH"]
    assert not out.exists()


@pytest.mark.promtool
@pytest.mark.vmalert
def test_the_installed_tools_pass_the_checks():
    promtool._too_old.cache_clear()
    assert promtool.find("promtool") and promtool.find("vmalert")
