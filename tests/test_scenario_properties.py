"""Property: for a random valid config (renamed metrics and labels, a selector, thresholds,
windows, ``for``s, intervals, a rule format, Megatron's preset at a log interval), the scenarios obsgen renders pass promtool
against the rules rendered from the same config. Each example simulates and tests every
family's scenarios (about a minute), so `make long` (CI) runs a few fixed examples and
`make fuzz` (OBSGEN_FUZZ=1) explores; `make test` leaves it out."""
from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from obsgen import config, pipeline, registry, scenarios
from obsgen.scenarios import run as scenario_run

pytestmark = [pytest.mark.promtool, pytest.mark.long]
FUZZ = bool(os.environ.get("OBSGEN_FUZZ"))
# no shrinking: an example takes a minute, and the failure prints its config and scenarios
SETTINGS = settings(max_examples=40 if FUZZ else 3, deadline=None, derandomize=not FUZZ,
                    suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.reuse, Phase.generate))

ident = st.from_regex(r"[a-z][a-z0-9_]{2,10}", fullmatch=True)


def minutes(lo: int, hi: int):
    return st.integers(lo, hi).map(lambda m: f"{m}m")


@st.composite
def configs(draw) -> dict:
    cfg: dict = {"dashboards": {"enabled": False}}
    cfg["metrics"] = {k: draw(ident) + "_" + k for k in draw(st.sets(st.sampled_from(
        ["train_compute_seconds", "train_step_seconds", "train_grad_norm", "train_world_size",
         "DCGM_FI_PROF_SM_ACTIVE", "nccl_link_recovery_total"]), max_size=3))}
    cfg["labels"] = {k: v for k, v in zip(
        draw(st.sets(st.sampled_from(["job_id", "rank", "node", "stage"]), max_size=2)),
        ("run_id", "global_rank"))}
    if draw(st.booleans()):
        cfg["selector"] = {"cluster": draw(st.sampled_from(["a", "prod-1"]))}
    cfg["thresholds"] = draw(st.fixed_dictionaries({}, optional={
        "straggler_ratio": st.sampled_from([1.05, 1.1, 1.2, 1.3]),
        "grad_explosion_factor": st.sampled_from([3, 5, 20, 50]),
        "bubble_excess_factor": st.sampled_from([1.3, 2.0, 3.0]),
        "tp_sm_active_stddev": st.sampled_from([0.03, 0.08, 0.15]),
        "ib_asymmetry_ratio": st.sampled_from([0.5, 0.8]),
        "nccl_link_recoveries": st.integers(1, 4),
        "checkpoint_overhead_ratio": st.sampled_from([0.02, 0.1, 0.2]),
        "step_regression_ratio": st.sampled_from([1.1, 1.3, 1.5]),
        "restart_loop_restarts": st.integers(2, 5),
    }))
    cfg["windows"] = draw(st.fixed_dictionaries({}, optional={
        "rate": minutes(2, 8), "progress": minutes(1, 5), "late_arrival": minutes(2, 6),
        "straggler": minutes(1, 2), "straggler_spell": minutes(2, 5),
        "straggler_warmup": minutes(3, 8), "straggler_recurrence": minutes(30, 45),
        "straggler_hold": minutes(8, 14), "restart_loop": minutes(40, 90)}))
    cfg["alerts"] = draw(st.dictionaries(st.sampled_from(
        ["Train_Straggler_Persistent", "Train_RankFailed", "Train_GradientNonFinite",
         "Train_Bubble_Excess"]), st.fixed_dictionaries({"for": minutes(1, 5)}), max_size=2))
    if draw(st.booleans()):  # Megatron's own series, recorded once per --log-interval
        cfg["presets"] = ["default", "megatron-otel"]
        cfg["megatron_log_interval"] = draw(st.sampled_from([1, 10, 25, 100]))
    cfg["rule_interval"] = draw(st.sampled_from([None, "30s", "1m"]))
    cfg["format"] = draw(st.sampled_from(["prometheus", "prometheus-operator", "thanos"]))
    return cfg


def _load(tmp: Path, data: dict) -> config.Config:
    path = tmp / "obsgen.yaml"
    path.write_text(yaml.safe_dump(data))
    return config.load(path, alert_names=registry.alert_names())


@SETTINGS
@given(configs())
def test_random_configs_render_scenarios_that_pass_on_their_rules(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("scenario-config")
    cfg = _load(tmp, copy.deepcopy(data))
    files = pipeline.render_all(cfg)
    for rel, text in files.items():
        if rel.startswith(("rules/", cfg["scenario_tests"]["path"])):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text)
    tests = sorted((tmp / cfg["scenario_tests"]["path"]).glob("*.yaml"))
    assert len(tests) == len(scenarios.FAMILIES)
    outcomes = scenario_run.run(sorted((tmp / "rules").glob("*.yaml")), tests, cfg)
    failed = [f"{o.label}\n{o.output[-1500:]}" for o in outcomes if not o.ok]
    assert not failed, f"config {data}:\n" + "\n".join(failed)
    assert len(outcomes) >= 30, [o.label for o in outcomes]
