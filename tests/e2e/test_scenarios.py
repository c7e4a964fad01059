"""Every simulator scenario in one real Prometheus and Alertmanager: exactly the expected
alerts fire, none before its fault, and Alertmanager routes them by team and severity to
the test's webhook, with Train_RankFailed inhibiting the stragglers of its job.

All scenarios run at once, each as its own job of 8 ranks, in a world 60 times faster
than the wall clock (e2e/obsgen-e2e.yaml, see obsgen/timescale.py): one model minute is
one wall second, so the 95 model minutes the slowest alert needs take under 2 minutes.
"""
from __future__ import annotations

import pytest

from obsgen.simulate.scenarios import SCENARIOS

from .expected import EXPECTED, MIN, P, job_id

def test_every_scenario_has_an_expectation():
    assert sorted(s for s, _ in EXPECTED.values()) == sorted(SCENARIOS)


@pytest.mark.parametrize("scenario,alerts", list(EXPECTED.values()), ids=list(EXPECTED))
def test_exactly_the_expected_alerts_fire(run, scenario, alerts):
    assert run["fired"].get(job_id(scenario), set()) == alerts


def test_no_alert_fires_for_a_job_the_scenarios_do_not_know(run):
    assert set(run["fired"]) <= {job_id(s) for s in SCENARIOS}


@pytest.mark.parametrize("scenario,alerts", [v for v in EXPECTED.values() if v[1]],
                         ids=[k for k, v in EXPECTED.items() if v[1]])
def test_no_alert_fires_before_its_fault(run, scenario, alerts):
    onset = SCENARIOS[scenario].onset
    for a in alerts:
        first = run["first"][(job_id(scenario), a)]
        assert first >= onset, f"{a} first fired at model minute {first / MIN:.1f}, fault at {onset / MIN:g}"
        print(f"{scenario}: {a[0]} fired {(first - onset) / MIN:.1f} model minutes after the fault")


def test_alertmanager_routes_every_alert_to_its_team_and_severity_receiver(run):
    received = run["received"]
    assert received, "the webhook received nothing"
    for receiver, status, labels in received:
        assert receiver == f"obsgen-{labels['team']}-{labels['severity']}", (receiver, labels)
    got = {(labels["job_id"], labels["alertname"]) for _, status, labels in received
           if status == "firing"}
    for scenario, alerts in EXPECTED.values():
        for name, _ in alerts:
            if (scenario, name) in (("rank-loss-straggler", P),
                                    ("pipeline-straggler", "Train_Bubble_Excess")):
                continue  # inhibited, see below
            assert (job_id(scenario), name) in got, f"{name} of {scenario} never notified"
    teams = {labels["team"] for _, _, labels in received}
    assert teams == {"platform", "workload"}


def test_rank_failure_inhibits_the_straggler_of_its_job_only(run):
    job = job_id("rank-loss-straggler")
    notified = {(labels["job_id"], labels["alertname"]) for _, _, labels in run["received"]}
    assert (job, "Train_RankFailed") in notified
    assert (job, P) not in notified
    assert (job_id("straggler"), P) in notified  # another job's straggler is not inhibited
    persistent = [a for a in run["am"] if a["labels"]["alertname"] == P
                  and a["labels"]["job_id"] == job]
    assert persistent and all(a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"]
                              for a in persistent), persistent


def test_a_straggler_inhibits_the_bubble_it_causes_in_its_job_only(run):
    """The other stage's idle time is the straggler's effect: Prometheus fires
    Train_Bubble_Excess, Alertmanager suppresses it while Train_Straggler_Persistent fires
    for the job, and notifies only the straggler."""
    job = job_id("pipeline-straggler")
    notified = {(labels["job_id"], labels["alertname"]) for _, _, labels in run["received"]}
    assert (job, P) in notified
    assert (job, "Train_Bubble_Excess") not in notified
    assert (job_id("bubble"), "Train_Bubble_Excess") in notified  # no straggler there
    bubble = [a for a in run["am"] if a["labels"]["alertname"] == "Train_Bubble_Excess"
              and a["labels"]["job_id"] == job]
    assert bubble and all(a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"]
                          for a in bubble), bubble
