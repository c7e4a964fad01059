"""obsgen's rendered scenarios on VictoriaMetrics' own evaluator: `obsgen test
--vmalert-tool` runs them with vmalert-tool unittest (VictoriaMetrics 1.145 from Debian's
unstable suite, `make e2e-tools`), which reads records back from its storage as vmalert
does; a rule that no longer fires its scenario fails there too."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _obsgen_test(where: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obsgen", "test", "--vmalert-tool",
                           "--out", str(where)], capture_output=True, text=True, cwd=where,
                          timeout=900)


@pytest.fixture(scope="module")
def vmalert_tool() -> str:
    path = shutil.which("vmalert-tool")
    if not path:
        message = "vmalert-tool missing: make e2e-tools unpacks it into .tools/unstable/bin"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_obsgens_scenarios_pass_on_vmalert_tool(vmalert_tool):
    done = _obsgen_test(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    families = len(list((ROOT / "tests" / "promtool").glob("obsgen-*.yaml")))
    assert f"{families} passed, 0 failed" in done.stdout
    assert "[vmalert-tool]" in done.stdout


def test_a_rule_that_stops_firing_fails_on_vmalert_tool(vmalert_tool, tmp_path):
    for folder in ("rules", "tests/promtool"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    rules = tmp_path / "rules" / "gradients.yaml"
    text = rules.read_text()
    assert "> 10 * (job:train_grad_norm:median1h > 0)" in text
    rules.write_text(text.replace("> 10 * (job:train_grad_norm:median1h > 0)",
                                  "> 1000 * (job:train_grad_norm:median1h > 0)"))
    done = _obsgen_test(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    fixtures = tmp_path / "tests" / "promtool"
    assert f"FAIL {fixtures / 'obsgen-gradients.yaml'} [vmalert-tool]" in done.stdout
    assert f"ok   {fixtures / 'obsgen-ranks.yaml'} [vmalert-tool]" in done.stdout
    assert "9 passed, 1 failed" in done.stdout
