"""Every panel query of every dashboard against the live Prometheus fed by all simulator
scenarios: none errors, none reads a recorded series no rule records, and none returns no
data for every scenario job while the series it reads exist.

The dashboards evaluated are those rendered from the e2e profile, the same config the
rules come from, so the recorded series they read carry the profile's window suffix
(``:mean5s``); they are the committed ``dashboards/*.json`` in every other respect."""
from __future__ import annotations

from pathlib import Path

import pytest

from obsgen.simulate.scenarios import SCENARIOS

from . import dashboards, harness

DASHBOARDS = harness.ROOT / "dashboards"
JOBS = [f"sim-{s}" for s in SCENARIOS]


def test_the_check_finds_a_broken_and_an_empty_panel(stack, run):
    report = dashboards.check(stack.prom, [Path(__file__).parent / "fixtures" / "selftest-dashboard.json"],
                              JOBS, stack.speed)
    assert [p.split(":")[1].strip() for p in report.problems] == [
        "$.panels[1 'a row'].panels[0 'broken'].targets[0].expr (A)",
        "$.panels[1 'a row'].panels[1 'empty'].targets[0].expr (A)"], report.problems
    assert "error" in report.problems[0] and "no data" in report.problems[1]
    assert len(report.not_emitted) == 1 and "DCGM_FI_PROF_SM_ACTIVE" in report.not_emitted[0]


def test_every_dashboard_query_evaluates_with_data(stack, run):
    committed = sorted(p.relative_to(DASHBOARDS) for p in DASHBOARDS.rglob("*.json")) \
        if DASHBOARDS.is_dir() else []
    if not committed:
        pytest.skip(f"{DASHBOARDS.relative_to(harness.ROOT)}/ has no *.json: no dashboard to "
                    "evaluate (the dashboards of issue 3 are not merged into this branch)")
    rendered = stack.rendered / "dashboards"
    paths = sorted(rendered.rglob("*.json"))
    assert sorted(p.relative_to(rendered) for p in paths) == committed
    report = dashboards.check(stack.prom, paths, JOBS, stack.speed, stack.rendered / "rules")
    for line in report.not_emitted:
        print("no exporter here:", line)
    assert report.evaluated > 0
    assert not report.problems, "\n".join(report.problems)
