"""A NaN that never leaves the OpenTelemetry SDK: Megatron records its grad norm and loss
once per --log-interval with its step histogram, and the SDK drops a non-finite gauge
value and exports the last finite one again (tests/e2e/test_otlp.py shows it on the real
SDK). With the megatron-otel preset Train_GradientNonFinite also fires for a signal that
has not changed within windows.frozen_signal while the step histogram took
thresholds.frozen_observations observations: cases keyed by their sentence, on series as
the collector serves them (tests/megatron_writer.py), with promtool."""
from __future__ import annotations

import copy

import pytest
import yaml

from obsgen import config, pipeline, promtool

from .megatron_writer import MegatronJob
from .promtool.support import _minutes, encode, render_template

pytestmark = pytest.mark.promtool
ALERT = "Train_GradientNonFinite"
MIN = 60.0
NAN = 20  # minute the signal turns NaN
# log interval 100 at 1.5 s a step: a log every 2.5 minutes, six in the 15m window
EVERY_LOG = 100 * 1.5 / MIN

# sentence -> (job, minutes of series, [(minute, signal firing or None)])
CASES = {
    "a NaN grad norm the SDK drops fires for grad_norm once the window holds no change, "
    "within the window, its for and two evaluations":
        (MegatronJob(nan_at=("grad_norm", NAN * MIN)), 45,
         # the last change is the log before the NaN; the window forgets it 15m after
         [(NAN - EVERY_LOG + 14, None), (NAN + 15 + 1 + 1, "grad_norm"), (44, "grad_norm")]),
    "a NaN loss the same, for loss":
        (MegatronJob(nan_at=("loss", NAN * MIN)), 45,
         [(NAN - EVERY_LOG + 14, None), (NAN + 15 + 1 + 1, "loss")]),
    "a healthy job, whose grad norm and loss move at every log, fires nothing":
        (MegatronJob(), 60, [(m, None) for m in (10, 20, 30, 40, 50, 60)]),
    "a job that hangs (no step ends, the collector still serves the last values) fires "
    "nothing: it is Train_RankFailed's":
        (MegatronJob(stops_at=NAN * MIN), 45, [(m, None) for m in (30, 38, 45)]),
    "a log interval of 1000 steps (25 minutes between logs) is not judged, even frozen":
        (MegatronJob(log_interval=1000, nan_at=("grad_norm", NAN * MIN)), 90,
         [(m, None) for m in (40, 60, 90)]),
}


def cfg_for(log_interval: int, **extra) -> config.Config:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data.update({"presets": ["megatron-otel"], "megatron_log_interval": log_interval,
                     "families": ["gradients"], **extra})
    cfg.data["dashboards"] = {**cfg.data["dashboards"], "enabled": False}
    return cfg


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_frozen_signal_fires_non_finite_on_the_otel_path(case, tmp_path):
    job, minutes, checks = CASES[case]
    text = pipeline.render_all(cfg_for(job.log_interval))["rules/gradients.yaml"]
    (tmp_path / "gradients.yaml").write_text(text)
    rule = next(r for g in yaml.safe_load(text)["groups"] for r in g["rules"]
                if r.get("alert") == ALERT)
    tests = []
    for minute, signal in checks:
        exp = []
        if signal:
            labels = {"nemo_run_id": job.run_id, "signal": signal, **rule["labels"]}
            exp = [{"exp_labels": labels, "exp_annotations": {
                k: render_template(v, labels, 0) for k, v in rule["annotations"].items()}}]
        tests.append({"eval_time": _minutes(minute), "alertname": ALERT, "exp_alerts": exp})
    doc = {"rule_files": ["gradients.yaml"], "evaluation_interval": "30s",
           "tests": [{"name": case, "interval": "30s",
                      "input_series": [{"series": k, "values": encode(v)}
                                       for k, v in job.series(minutes).items()],
                      "alert_rule_test": tests}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(doc, width=10_000))
    result = promtool.test_rules([tmp_path / "test.yaml"])
    assert result.ok, result.output[:6000]


def test_only_a_source_that_logs_its_signals_with_its_steps_gets_the_frozen_check():
    """obsgen.instrument exports a NaN as NaN and its gauges move every step: the default
    render reads no changes(); neither does the preset once the step histogram is read
    from obsgen.instrument (metrics: {train_step_seconds: train_step_seconds})."""
    def alert(cfg):
        text = pipeline.render_all(cfg)["rules/gradients.yaml"]
        return next(r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]
                    if r.get("alert") == ALERT)

    plain = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    assert "changes(" not in alert(plain)
    assert alert(cfg_for(100)).count("changes(") == 4
    assert alert(cfg_for(1)).count("changes(") == 4  # a log every step is still a log
    mixed = cfg_for(100, metrics={"train_step_seconds": "train_step_seconds"})
    assert "changes(" not in alert(mixed)
