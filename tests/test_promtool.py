"""The rendered rules against Debian's promtool: syntax, lint, and the scenario fixtures."""
from __future__ import annotations

import functools
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from obsgen import promtool, registry

from .promtool import build

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "promtool"

pytestmark = pytest.mark.promtool
UNSTABLE = ROOT / ".tools" / "unstable" / "bin" / "promtool"
LINES = {"2": "Debian 12's promtool (make tools)",
         "3": f"{UNSTABLE.relative_to(ROOT)} (make tools3: scripts/unstable-tools.py)"}


def promtools() -> dict[str, str | None]:
    """The promtool of each Prometheus line, or None where it is not installed."""
    system = shutil.which("promtool", path="/usr/bin:/usr/local/bin") or shutil.which("promtool")
    return {"2": system if system and os.path.realpath(system) != os.path.realpath(UNSTABLE) else None,
            "3": str(UNSTABLE) if UNSTABLE.exists() else None}


def missing(what: str) -> None:
    """Skip locally; fail under CI, which must run on both lines."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing")
    pytest.skip(f"{what} is missing")


@pytest.mark.long  # simulates every case's scrapes (about 35 s of one core): make long, CI
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
def _fixture_runs() -> dict[tuple[str, str], promtool.Result]:
    """promtool of both lines on every family's fixture file, one process per core at a
    time, the largest files first (the first test waits for all; each test reads its own)."""
    files = sorted(((f.NAME, FIXTURES / f"{f.NAME}.yaml") for f in registry.FAMILIES),
                   key=lambda item: -item[1].stat().st_size)
    lines = {line: path for line, path in promtools().items() if path}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = {(name, line): pool.submit(promtool.test_rules, [path], binary=binary)
                for name, path in files for line, binary in lines.items()}
    return {key: run.result() for key, run in runs.items()}


@pytest.mark.parametrize("line", sorted(LINES))
@pytest.mark.parametrize("family", [f.NAME for f in registry.FAMILIES])
def test_family_fixtures(family, line):
    """Every family's fixtures pass on Debian 12's promtool (2.42: windows closed at both
    ends) and on the Prometheus 3 line's (left-open windows), which `make tools3` unpacks."""
    if not promtools()[line]:
        missing(LINES[line])
    result = _fixture_runs()[(family, line)]
    assert result.ok, result.output


def test_both_promtool_lines_are_what_they_claim():
    for line, path in promtools().items():
        if not path:
            missing(LINES[line])
            continue
        print(f"{line}: {promtool._run([path, '--version']).output.splitlines()[0]}")
        assert promtool._run([path, "--version"]).output.startswith(f"promtool, version {line}")


def test_promtool_missing_is_one_line_with_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(promtool.ToolMissing) as err:
        promtool.check_rules([ROOT / "rules" / "ranks.yaml"])
    assert str(err.value) == ("promtool not found: install Debian's prometheus package "
                              "(sudo apt-get install prometheus) or put promtool on PATH")


def test_obsgen_promtool_chooses_the_promtool(monkeypatch):
    """OBSGEN_PROMTOOL picks the promtool obsgen runs, and says which line's windows it
    evaluates; one that is not there is one line naming the variable."""
    three = promtools()["3"]
    if not three:
        missing(LINES["3"])
    monkeypatch.setenv(promtool.ENV, three)
    assert promtool.find() == three
    assert promtool.windows().startswith(f"{three} 3.")
    assert "open on the left" in promtool.windows()
    monkeypatch.setenv(promtool.ENV, "/nonexistent/promtool")
    with pytest.raises(promtool.ToolMissing) as err:
        promtool.find()
    assert str(err.value) == "OBSGEN_PROMTOOL=/nonexistent/promtool: no executable promtool there"
    monkeypatch.delenv(promtool.ENV)
    assert promtool.windows().startswith(f"{shutil.which('promtool')} ")


def test_the_straggler_fixtures_pass_on_the_rules_rendered_for_prometheus(tmp_path):
    """ruler: prometheus renders two straggler rules for a ruler that reads its records at
    once (the flag divides by its baseline's record; the mean has no liveness read), and
    allows the mesh facts every 4m, as docs/guides/sizing.md sets them for large jobs.
    Every case of the family's fixtures, firing and not firing, passes on them too, on
    both promtool lines."""
    import copy

    from obsgen import config, pipeline

    data = copy.deepcopy(config.DEFAULTS)
    data.update({**copy.deepcopy(config.ONE_PROMETHEUS), "families": ["stragglers"],
                 "dashboards": {**data["dashboards"], "enabled": False}})
    text = pipeline.render_all(config.Config(data, "(test)"))["rules/stragglers.yaml"]
    assert text != (ROOT / "rules" / "stragglers.yaml").read_text()
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "stragglers.yaml").write_text(text)
    fixtures = tmp_path / "tests" / "promtool"
    fixtures.mkdir(parents=True)
    shutil.copy(FIXTURES / "stragglers.yaml", fixtures / "stragglers.yaml")
    lines = {line: path for line, path in promtools().items() if path}
    if len(lines) < len(LINES):
        missing(", ".join(LINES[line] for line in LINES if line not in lines))
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {line: pool.submit(promtool.test_rules, [fixtures / "stragglers.yaml"],
                                  binary=binary) for line, binary in lines.items()}
    for line, run in runs.items():
        assert run.result().ok, f"promtool {line}: {run.result().output}"
