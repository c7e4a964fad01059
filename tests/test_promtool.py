"""The rendered rules against Debian's promtool: syntax, lint, and the scenario fixtures."""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from obsgen import promtool, registry

from .promtool import build

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "promtool"

pytestmark = pytest.mark.promtool


def test_fixtures_are_generated_from_the_case_tables():
    stale = [f for f in build.families()
             if (FIXTURES / f"{f}.yaml").read_text() != build.render_family(f)
             or ((rules := build.extra_rules(f)) is not None
                 and (FIXTURES / build.rule_file(f)).read_text() != rules)]
    assert not stale, f"stale fixtures {stale}; run: .venv/bin/python -m tests.promtool.build"


def test_every_family_has_fixtures():
    assert build.families() == [f.NAME for f in registry.FAMILIES]


def test_rendered_rules_pass_promtool_check_and_lint():
    result = promtool.check_rules(sorted((ROOT / "rules").glob("*.yaml"))
                                  + sorted((FIXTURES / "rules").glob("*.yaml")), lint=True)
    assert result.ok, result.output
    assert "SUCCESS" in result.output


@functools.lru_cache(maxsize=None)
def _fixture_runs() -> dict[str, promtool.Result]:
    """promtool on every family's fixture file, one process per core at a time, the
    largest files first (the first test waits for all; each family's test reads its own)."""
    files = sorted(((f.NAME, FIXTURES / f"{f.NAME}.yaml") for f in registry.FAMILIES),
                   key=lambda item: -item[1].stat().st_size)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = {name: pool.submit(promtool.test_rules, [path]) for name, path in files}
    return {name: run.result() for name, run in runs.items()}


@pytest.mark.parametrize("family", [f.NAME for f in registry.FAMILIES])
def test_family_fixtures(family):
    result = _fixture_runs()[family]
    assert result.ok, result.output


def test_promtool_missing_is_one_line_with_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(promtool.ToolMissing) as err:
        promtool.check_rules([ROOT / "rules" / "ranks.yaml"])
    assert str(err.value) == ("promtool not found: install Debian's prometheus package "
                              "(sudo apt-get install prometheus) or put promtool on PATH")
