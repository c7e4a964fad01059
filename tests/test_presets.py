"""Metric-name presets: renames only, scaled sums, promtool on Megatron's names."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from obsgen import config, pipeline, promtool, registry
from obsgen.presets import PRESETS

from .golden import assert_golden
from .promtool.support import render_template

GOLDEN = Path(__file__).resolve().parent / "golden" / "presets"
NAMES = registry.alert_names()


def with_presets(*names: str) -> config.Config:
    """The defaults with ``names``; Megatron at log interval 1 (one observation per step:
    tests/test_megatron_cadence.py reads the others)."""
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["presets"] = list(names)
    cfg.data["megatron_log_interval"] = 1
    return cfg


def rules_of(files: dict[str, str]) -> dict[str, dict]:
    return {r.get("alert") or r["record"]: r for p, t in files.items() if p.startswith("rules/")
            for g in yaml.safe_load(t)["groups"] for r in g["rules"]}


def strip_names(text: str, preset: str) -> str:
    """A render with the preset's names put back to the contract's."""
    p = PRESETS[preset]
    for key, name in sorted({**p.metrics, **p.labels}.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(name, key)
    return text


@pytest.mark.parametrize("preset", ["megatron-otel"])
@pytest.mark.parametrize("family", ["gradients", "ranks"])
def test_preset_render_matches_golden(preset, family):
    assert_golden(GOLDEN / preset / f"{family}.yaml",
                  pipeline.render_all(with_presets(preset))[f"rules/{family}.yaml"])


# Train_GradientNonFinite's frozen branches, which a source that records once per log
# interval (the preset's cadence) adds (tests/test_megatron_frozen.py)
FROZEN = re.compile(r'\n\s*or\n\s*label_replace\(max by \(job_id\) \(changes\(.*"(grad_norm|loss)", "", ""\)')


def test_a_preset_only_renames_and_scales():
    """Undo a preset's renames and its scale, and leave out what its cadence adds (the
    frozen-signal check): the rules are the default rules."""
    default = pipeline.render_all(with_presets("default"))
    for path, text in pipeline.render_all(with_presets("megatron-otel")).items():
        if path.startswith("rules/"):
            unscaled = re.sub(r"\((rate\(train_step_seconds_sum\[\w+\]\)) \* 0\.001\)", r"\1",
                              strip_names(text, "megatron-otel"))
            if path == "rules/gradients.yaml":
                doc = yaml.safe_load(unscaled)
                alert = next(r for g in doc["groups"] for r in g["rules"]
                             if r.get("alert") == "Train_GradientNonFinite")
                assert len(FROZEN.findall(alert["expr"])) == 2
                alert["expr"] = FROZEN.sub("", alert["expr"])
                text = alert["annotations"]["description"]
                alert["annotations"]["description"] = re.sub(
                    r"; or, recorded once per log interval, .*? again\)", ")", text)
                assert alert["annotations"]["description"] != text
                assert doc == yaml.safe_load(default[path]), path
                continue
            assert unscaled == default[path], path


def test_dcgm_names_are_the_contracts_gpu_names():
    assert pipeline.render_all(with_presets("dcgm")) == pipeline.render_all(with_presets("default"))


def test_config_renames_win_over_presets(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("presets: [megatron-otel]\nmegatron_log_interval: 100\nlabels: {job_id: run}\n")
    cfg = config.load(f, alert_names=NAMES)
    assert cfg.label("job_id") == "run" and cfg.label("rank") == "dl_rank"
    assert cfg.steps_per_observation("train_step_seconds") == 100
    assert cfg.metric("train_grad_norm") == "megatron_training_grad_norm"


BAD = {
    "an unknown preset": ("presets: [nemo]\n", "c.yaml: presets.0: must be one of default, megatron-otel, dcgm, nccl-inspector, got 'nemo'"),
    "a rename onto a preset's name": (
        "presets: [megatron-otel]\nmegatron_log_interval: 100\n"
        "metrics: {train_loss: megatron_training_grad_norm}\n",
        "c.yaml: metrics.train_grad_norm: 'megatron_training_grad_norm' is also the name of metrics.train_loss"),
    "no preset at all": ("presets: []\n", "c.yaml: presets: must list at least 1 item, got []"),
    "Megatron's step histogram without its log interval": (
        "presets: [megatron-otel]\n",
        "c.yaml: megatron_log_interval: required with presets: [megatron-otel]"),
    "a log interval of 0": (
        "presets: [megatron-otel]\nmegatron_log_interval: 0\n",
        "c.yaml: megatron_log_interval: must be"),
}


def test_the_instruments_step_histogram_needs_no_log_interval(tmp_path):
    """Megatron's loss and grad norm with obsgen.instrument's per-step histogram."""
    f = tmp_path / "c.yaml"
    f.write_text("presets: [megatron-otel]\nmetrics: {train_step_seconds: train_step_seconds}\n")
    assert config.load(f, alert_names=NAMES).steps_per_observation("train_step_seconds") == 1


def test_the_instruments_step_histogram_is_read_in_seconds(tmp_path):
    """presets.md's advice: keep obsgen.instrument's seconds histogram beside Megatron's
    names. The preset's milliseconds factor goes with its metric, not with the key."""
    f = tmp_path / "c.yaml"
    f.write_text("presets: [megatron-otel]\nmetrics: {train_step_seconds: train_step_seconds}\n")
    cfg = config.load(f, alert_names=NAMES)
    assert cfg.scale("train_step_seconds") == 1.0
    rules = "\n".join(t for p, t in pipeline.render_all(cfg).items() if p.startswith("rules/"))
    assert "train_step_seconds_sum" in rules and "0.001" not in rules
    assert with_presets("megatron-otel").scale("train_step_seconds") == 0.001


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_presets_are_refused(case, tmp_path):
    text, line = BAD[case]
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(config.ConfigError) as err:
        config.load(tmp_path / "c.yaml", alert_names=NAMES)
    assert err.value.problems[0].startswith(line.replace("c.yaml", str(tmp_path / "c.yaml"))), err.value.problems


@pytest.mark.promtool
def test_megatron_series_drive_the_same_rules(tmp_path):
    """Megatron's step durations in milliseconds give the mean step time in seconds, and a
    NaN grad norm under Megatron's labels fires NonFinite for its run id."""
    files = pipeline.render_all(with_presets("megatron-otel"))
    for fam in ("gradients", "ranks"):
        (tmp_path / f"{fam}.yaml").write_text(files[f"rules/{fam}.yaml"])
    alert = rules_of(files)["Train_GradientNonFinite"]
    labels = {"nemo_run_id": "run-7", "signal": "grad_norm", **alert["labels"]}
    step = "megatron_training_step_duration_ms_milliseconds"
    doc = {"rule_files": [str(tmp_path / "gradients.yaml"), str(tmp_path / "ranks.yaml")],
           "evaluation_interval": "30s", "tests": [{
               "interval": "30s",
               "input_series": [
                   {"series": f'{step}_sum{{nemo_run_id="run-7", dl_rank="31"}}', "values": "0+30000x20"},
                   {"series": f'{step}_count{{nemo_run_id="run-7", dl_rank="31"}}', "values": "0+20x20"},
                   {"series": 'megatron_training_grad_norm{nemo_run_id="run-7", dl_rank="31"}',
                    "values": "1 1 NaN NaN NaN NaN"}],
               # 1500 ms per step, read as 1.5 s (to float precision)
               "promql_expr_test": [{"expr": "abs(job:train_step_seconds:mean5m - 1.5) < bool 1e-9",
                                     "eval_time": "8m",
                                     "exp_samples": [{"labels": '{nemo_run_id="run-7"}', "value": 1}]}],
               "alert_rule_test": [{"eval_time": "2m", "alertname": "Train_GradientNonFinite", "exp_alerts": [{
                   "exp_labels": labels,
                   "exp_annotations": {k: render_template(v, labels, 1) for k, v in alert["annotations"].items()}}]}],
           }]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(doc))
    result = promtool.test_rules([tmp_path / "test.yaml"])
    assert result.ok, result.output
