"""Megatron records its step time once per --log-interval, the interval's mean: the rules
that count steps or sum training seconds read it right at log intervals 1, 10 and 100,
on series shaped as the OTel collector serves them (tests/megatron_writer.py), beside
obsgen.instrument's world size with its labels copied to Megatron's at the scrape."""
from __future__ import annotations

import copy

import pytest
import yaml

from obsgen import config, pipeline, promtool
from obsgen.contract import R
from obsgen.synth import STALE

from .megatron_writer import MegatronJob
from .promtool.support import _minutes, encode, render_template

pytestmark = pytest.mark.long  # minutes of promtool: make long (CI)

MIN = 60.0


def cfg_for(log_interval: int) -> config.Config:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["presets"] = ["megatron-otel"]
    cfg.data["megatron_log_interval"] = log_interval
    return cfg


def instrument(job: MegatronJob, minutes: float) -> dict[str, list]:
    """obsgen.instrument's world size per rank, its job_id and rank copied into
    nemo_run_id and dl_rank by examples/prometheus/megatron-otel-mixed.yaml."""
    n = int(minutes * 2) + 1
    out = {}
    for r in range(job.ranks):
        dead = job.dies is not None and job.dies[0] == r
        values = [float(job.ranks) if not dead or i * 30 < job.dies[1] else STALE
                  for i in range(n)]
        out[(f'train_world_size{{job="obsgen", instance="10.0.0.{r + 1}:9400", '
             f'job_id="{job.run_id}", rank="{r}", node="gpu-node-000", '
             f'nemo_run_id="{job.run_id}", dl_rank="{r}"}}')] = values
    return out


def run(tmp_path, log_interval: int, job: MegatronJob, minutes: float, alerts: list,
        values: list) -> None:
    files = pipeline.render_all(cfg_for(log_interval))
    names = ["ranks", "checkpoints"]  # the step mean and RankFailed; the training seconds
    for n in names:
        (tmp_path / f"{n}.yaml").write_text(files[f"rules/{n}.yaml"])
    rules = {r.get("alert"): r for n in names
             for g in yaml.safe_load(files[f"rules/{n}.yaml"])["groups"] for r in g["rules"]}
    series = {**job.series(minutes), **instrument(job, minutes)}
    inputs = [{"series": k, "values": encode(vals)} for k, vals in series.items()]
    alert_tests = []
    for minute, fired in alerts:
        exp = []
        if fired:
            rule = rules["Train_RankFailed"]
            labels = {"nemo_run_id": job.run_id, **rule["labels"]}
            exp = [{"exp_labels": labels, "exp_annotations": {
                k: render_template(v, labels, fired) for k, v in rule["annotations"].items()}}]
        alert_tests.append({"eval_time": _minutes(minute), "alertname": "Train_RankFailed",
                            "exp_alerts": exp})
    doc = {"rule_files": [str(tmp_path / f"{n}.yaml") for n in names],
           "evaluation_interval": "30s",
           "tests": [{"interval": "30s", "input_series": inputs, "alert_rule_test": alert_tests,
                      "promql_expr_test": [
                          {"expr": expr, "eval_time": _minutes(m),
                           "exp_samples": [{"labels": f'{{nemo_run_id="{job.run_id}"}}', "value": 1}]}
                          for m, expr in values]}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(doc, width=10_000))
    result = promtool.test_rules([tmp_path / "test.yaml"])
    assert result.ok, result.output[:6000]


def mean() -> str:
    """The job's mean step time: exactly the 1.5 s the ranks take."""
    return f"abs({R.step_mean.name.format(rate='5m')} - 1.5) < bool 1e-9"


def training_seconds() -> str:
    """Training seconds per second of the job's busiest rank: 1 while it trains."""
    return f"abs({R.train_seconds_rate.name.format(rate='5m')} - 1) < bool 0.02"


# minutes each case runs: two progress windows of observations past the warm-up
LENGTH = {1: 40, 10: 60, 100: 260}


@pytest.mark.promtool
@pytest.mark.parametrize("log_interval", [1, 10, 100])
def test_a_healthy_job_reads_its_step_time_and_training_seconds(tmp_path, log_interval):
    """One observation per log interval: the mean step time is exact, the training
    seconds per second are the wall time, and no rank reads as stopped."""
    minutes = LENGTH[log_interval]
    window = max(5, 2 * log_interval)  # minutes the rules read the histogram over
    checks = [m for m in range(window + 5, minutes + 1, max(window // 4, 5))]
    run(tmp_path, log_interval, MegatronJob(log_interval=log_interval), minutes,
        [(m, None) for m in range(5, minutes + 1, 5)],
        [(m, mean()) for m in checks] + [(m, training_seconds()) for m in checks])


@pytest.mark.promtool
@pytest.mark.parametrize("log_interval", [1, 10, 100])
def test_a_rank_that_dies_fires_rank_failed_one_progress_window_later(tmp_path, log_interval):
    """Its last observations leave the window log_interval progress windows after it died,
    then RankFailed holds for 2m30s."""
    window = 2 * log_interval  # minutes
    died = window + 10
    fires = died + window + 2.5 + 1
    job = MegatronJob(log_interval=log_interval, dies=(1, died * MIN))
    run(tmp_path, log_interval, job, fires + 2,
        [(m, None) for m in (5, died, died + window - 1)] + [(fires, 1), (fires + 2, 1)], [])
