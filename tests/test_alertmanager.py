"""alertmanager/obsgen-routes.yaml: valid for amtool, routes by team and severity, and
Train_RankFailed inhibits the straggler and checkpoint alerts of the same job (the
straggler alerts' inhibitions, proven on a live Alertmanager: test_inhibitions.py)."""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from obsgen import alertmanager, config, pipeline, registry

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"


def rendered(cfg=None) -> dict:
    cfg = cfg or config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")
    return yaml.safe_load(pipeline.render_all(cfg)[alertmanager.PATH])


def custom() -> config.Config:
    return config.load(GOLDEN / "custom.yaml", alert_names=registry.alert_names())


def route(path: Path, labels: dict[str, str]) -> str:
    args = ["amtool", "config", "routes", "test", f"--config.file={path}"]
    out = subprocess.run(args + [f"{k}={v}" for k, v in labels.items()],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


ROUTES = {
    "a persistent straggler goes to the platform team's warning receiver": (
        {"alertname": "Train_Straggler_Persistent", "team": "platform", "severity": "warning",
         "job_id": "a"}, "obsgen-platform-warning"),
    "a transient straggler goes to the workload team": (
        {"alertname": "Train_Straggler_Transient", "team": "workload", "severity": "warning"},
        "obsgen-workload-warning"),
    "a NaN gradient is critical for the workload team": (
        {"alertname": "Train_GradientNonFinite", "team": "workload", "severity": "critical"},
        "obsgen-workload-critical"),
    "a failed rank is critical for the platform team": (
        {"alertname": "Train_RankFailed", "team": "platform", "severity": "critical"},
        "obsgen-platform-critical"),
    "an obsgen alert re-labelled to an unknown severity stays with its team": (
        {"alertname": "Train_RankFailed", "team": "platform", "severity": "page"},
        "obsgen-platform"),
    "an alert that is not obsgen's never enters obsgen's subtree": (
        {"alertname": "NodeDown", "team": "platform", "severity": "critical"}, "obsgen-default"),
}


@pytest.mark.amtool
def test_committed_routing_passes_amtool_check_config():
    out = subprocess.run(["amtool", "check-config", str(ROOT / alertmanager.PATH)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@pytest.mark.amtool
@pytest.mark.parametrize("labels,receiver", list(ROUTES.values()), ids=list(ROUTES))
def test_amtool_routes_each_alert_to_its_team_and_severity(labels, receiver):
    assert route(ROOT / alertmanager.PATH, labels) == receiver


@pytest.mark.amtool
def test_custom_teams_and_selector_route_and_inhibit_per_cluster(tmp_path):
    doc = rendered(custom())
    path = tmp_path / "am.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert route(path, {"alertname": "Train_RankFailed", "team": "ml-infra",
                        "severity": "critical"}) == "obsgen-ml-infra-critical"
    assert doc["inhibit_rules"][0]["equal"] == ["cluster", "env", "run"]


def test_rank_failure_inhibits_exactly_the_straggler_and_checkpoint_alerts():
    (rule,) = [r for r in rendered()["inhibit_rules"]
               if r["source_matchers"] == ['alertname="Train_RankFailed"']]
    assert rule["source_matchers"] == ['alertname="Train_RankFailed"']
    assert rule["target_matchers"] == [
        'alertname=~"Train_Straggler_Persistent|Train_Straggler_TPGroup|Train_Straggler_Mapping|Train_Straggler_Transient|'
        'Train_NoCheckpoints|Train_CheckpointOverhead"']
    assert rule["equal"] == ["job_id"]


def test_every_alert_enters_the_subtree_and_every_receiver_is_declared():
    doc = rendered()
    subtree = doc["route"]["routes"][0]
    for name in registry.alert_names():
        assert f"|{name}|" in "|" + subtree["matchers"][0].split('"')[1] + "|"
    declared = {r["name"] for r in doc["receivers"]}

    def walk(node):
        yield node["receiver"]
        for child in node.get("routes", []):
            yield from walk(child)
    assert set(walk(doc["route"])) == declared
