"""Config loading and validation: one line per problem, naming the path and the reason."""
from __future__ import annotations

import copy

import pytest

from obsgen import config, registry
from obsgen.cli import main

NAMES = registry.alert_names()

# A config text -> the one line it must produce (file name "obsgen.yaml").
BAD = {
    "a straggler ratio at or below 1 is refused": (
        "thresholds:\n  straggler_ratio: 0.9\n",
        "obsgen.yaml: thresholds.straggler_ratio: must be > 1, got 0.9"),
    "an unknown top-level key is refused with the known keys": (
        "threshold:\n  straggler_ratio: 2\n",
        "obsgen.yaml: (top level): unknown key 'threshold'"),
    "an unknown threshold is refused": (
        "thresholds:\n  straggler: 2\n",
        "obsgen.yaml: thresholds: unknown key 'straggler'"),
    "a number where a duration belongs is refused": (
        "windows:\n  rate: 5\n",
        "obsgen.yaml: windows.rate: must be of type string, got int 5"),
    "a duration with words is refused": (
        "windows:\n  rate: 5 minutes\n",
        "obsgen.yaml: windows.rate: must be a Prometheus duration such as 30s, 5m or 1h30m, got '5 minutes'"),
    "an unknown metric to rename is refused": (
        "metrics:\n  train_steps: x\n",
        "obsgen.yaml: metrics: unknown key 'train_steps'"),
    "an invalid metric name is refused": (
        "metrics:\n  train_step_seconds: step-seconds\n",
        "obsgen.yaml: metrics.train_step_seconds: must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), got 'step-seconds'"),
    "an override for an alert that does not exist is refused": (
        "alerts:\n  Train_Nope:\n    for: 5m\n",
        "obsgen.yaml: alerts: unknown key 'Train_Nope'"),
    "an unknown severity is refused": (
        "alerts:\n  Train_RankFailed:\n    severity: page\n",
        "obsgen.yaml: alerts.Train_RankFailed.severity: must be one of critical, warning, info, got 'page'"),
    "a fraction of 1 or more is refused": (
        "thresholds:\n  checkpoint_overhead_ratio: 1.5\n",
        "obsgen.yaml: thresholds.checkpoint_overhead_ratio: must be < 1, got 1.5"),
    "a runbook URL without {alert} is refused": (
        "runbook_url: https://runbooks.example/x\n",
        "obsgen.yaml: runbook_url: must be an http(s) URL containing {alert} and no spaces, got 'https://runbooks.example/x'"),
    "duplicate YAML keys are refused": (
        "thresholds:\n  straggler_ratio: 1.2\n  straggler_ratio: 1.3\n",
        "obsgen.yaml: line 3: invalid YAML: duplicate key 'straggler_ratio'"),
    "a config that is not a mapping is refused": (
        "- a\n- b\n", "obsgen.yaml: (top level): must be a mapping, got list"),
    "an unknown dashboard format is refused": (
        "dashboards:\n  format: v3\n",
        "obsgen.yaml: dashboards.format: must be one of classic, v2, got 'v3'"),
    "a trace data source of another kind is refused": (
        "dashboards:\n  trace_datasource_type: zipkin\n",
        "obsgen.yaml: dashboards.trace_datasource_type: must be one of tempo, jaeger, got 'zipkin'"),
    "a uid prefix that would not fit a Grafana uid is refused": (
        "dashboards:\n  uid_prefix: this-prefix-is-far-too-long-for-a-uid\n",
        "obsgen.yaml: dashboards.uid_prefix: must be 1 to 24 letters, digits, - or _ (a Grafana uid holds at most 40), got 'this-prefix-is-far-too-long-for-a-uid'"),
    "a ruler other than any or prometheus is refused": (
        "ruler: vmalert\n",
        "obsgen.yaml: ruler: must be one of any, prometheus, got 'vmalert'"),
    "rules for a Prometheus that reads its records at once are refused for a Mimir ruler": (
        "format: mimir\nruler: prometheus\n",
        "obsgen.yaml: ruler: must be 'any' with format 'mimir': 'prometheus' is for a "
        "Prometheus server that evaluates its own TSDB"),
    "a facts interval of zero is refused": (
        "facts_interval: 0s\n",
        "obsgen.yaml: facts_interval: must be a duration above zero, got '0s'"),
    "a facts interval longer than half the lookback is refused: on vmalert its facts lapse": (
        "facts_intervals:\n  stragglers: 4m\n",
        "obsgen.yaml: facts_intervals.stragglers: must be at most 2m30s, half the 5m lookback, "
        "got '4m': vmalert stamps a record at the start of its interval, so a fact would lapse "
        "before the next evaluation"),
    "on a Prometheus that stamps its records at the evaluation, a fact may wait 4m30s, no more": (
        "ruler: prometheus\nfacts_intervals:\n  stragglers: 5m\n",
        "obsgen.yaml: facts_intervals.stragglers: must be at most 4m30s, 30s under the 5m "
        "lookback, got '5m': a fact would lapse before the next evaluation"),
    "the same for every family's facts": (
        "facts_interval: 3m\n",
        "obsgen.yaml: facts_interval: must be at most 2m30s, half the 5m lookback"),
    "a facts interval that is no duration says what a duration is": (
        "facts_interval: soon\n",
        "obsgen.yaml: facts_interval: must be a Prometheus duration"),
    "a family interval that is no duration says what a duration is": (
        "family_intervals:\n  nccl: soon\n",
        "obsgen.yaml: family_intervals.nccl: must be a Prometheus duration"),
    "a family interval of zero is refused": (
        "family_intervals:\n  nccl: 0s\n",
        "obsgen.yaml: family_intervals.nccl: must be a duration above zero, got '0s'"),
    "the inspector family without the preset that brings its source is refused": (
        "families: [ranks, inspector]\n",
        "obsgen.yaml: families: inspector reads a source only the nccl-inspector preset brings: "
        "add nccl-inspector to presets"),
    "an interval for a family that does not exist is refused": (
        "family_intervals:\n  bubbles: 1m\n",
        "obsgen.yaml: family_intervals: must be one of stragglers, gradients, pipeline, checkpoints, ranks, gpus, fabric, recovery, progress, nccl, inspector, panels, got 'bubbles'"),
    "renaming the scrape job label is refused, not a crash (found adopting it)": (
        "labels:\n  job: training_job\n",
        "obsgen.yaml: labels.job: job is the label Prometheus adds for the scrape job"),
    "a label renamed to a scrape label is refused": (
        "labels:\n  job_id: instance\n",
        "obsgen.yaml: labels.job_id: 'instance' is the label Prometheus adds for the scrape target"),
    "a Python object tag is refused (safe loading only)": (
        "thresholds: !!python/object/apply:os.system ['true']\n",
        "obsgen.yaml: line 1: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is refused"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_config_gives_one_clear_line(case, tmp_path, monkeypatch):
    text, line = BAD[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "obsgen.yaml").write_text(text)
    with pytest.raises(config.ConfigError) as err:
        config.load("obsgen.yaml", alert_names=NAMES)
    assert len(err.value.problems) == 1, err.value.problems
    assert err.value.problems[0].startswith(line), err.value.problems[0]


def test_every_problem_is_reported_sorted_by_path(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("thresholds:\n  straggler_ratio: 0.5\n  bubble_excess_factor: -1\nwindows:\n  rate: x\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(p, alert_names=NAMES)
    assert [l.split(": ")[1] for l in err.value.problems] == [
        "thresholds.bubble_excess_factor", "thresholds.straggler_ratio", "windows.rate"]


def test_bad_config_exits_2_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("thresholds:\n  straggler_ratio: 0.9\n")
    out = tmp_path / "out"
    code = main(["render", "--config", str(tmp_path / "bad.yaml"), "--out", str(out)])
    assert code == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{tmp_path / 'bad.yaml'}: thresholds.straggler_ratio: must be > 1, got 0.9"]


def test_the_sizing_guides_config_for_one_prometheus_is_valid_and_needs_its_ruler():
    """config.ONE_PROMETHEUS (4m facts with ruler: prometheus) validates; the same facts
    interval for any ruler does not."""
    data = copy.deepcopy(config.DEFAULTS)
    data.update(copy.deepcopy(config.ONE_PROMETHEUS))
    assert config.validate(data, "(test)", NAMES) == []
    data["ruler"] = "any"
    assert [p.split(": ")[1] for p in config.validate(data, "(test)", NAMES)] == [
        "facts_intervals.stragglers"]


def test_defaults_are_valid_and_every_key_is_in_the_schema():
    assert config.validate(copy.deepcopy(config.DEFAULTS), "(defaults)", NAMES) == []
    schema = config.schema(NAMES)["properties"]
    assert set(schema) == set(config.DEFAULTS)
    for section in ("thresholds", "windows", "teams", "dashboards"):
        assert set(schema[section]["properties"]) == set(config.DEFAULTS[section]), section


def test_every_default_has_exactly_one_comment():
    """config.py documents each tunable with one comment line right above it."""
    import inspect

    src = inspect.getsource(config).split("DEFAULTS: dict[str, Any] = {", 1)[1].split("\n}\n", 1)[0]
    lines = src.splitlines()
    inline = 0  # open brackets of a value that continues over several lines
    for i, line in enumerate(lines):
        stripped = line.strip()
        opened = stripped.count("{") + stripped.count("[") - stripped.count("}") - stripped.count("]")
        if inline:
            inline += opened
            continue
        if stripped.startswith('"') and ":" in stripped and not stripped.endswith("{"):
            assert lines[i - 1].strip().startswith("#"), f"no comment above: {stripped}"
            inline = max(opened, 0)


def test_missing_config_file_uses_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config.load(None, alert_names=NAMES)
    assert cfg.source == "(defaults)"
    assert cfg["thresholds"]["straggler_ratio"] == 1.07


def test_user_values_merge_over_defaults(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("thresholds:\n  straggler_ratio: 1.2\nteams:\n  platform: infra\n")
    cfg = config.load(p, alert_names=NAMES)
    assert cfg["thresholds"]["straggler_ratio"] == 1.2
    assert cfg["thresholds"]["grad_explosion_factor"] == 10  # untouched default kept
    assert cfg["teams"] == {"platform": "infra", "workload": "workload"}


@pytest.mark.parametrize("duration,seconds", [("30s", 30), ("5m", 300), ("1h30m", 5400),
                                              ("2m30s", 150), ("1d", 86400), ("500ms", 0.5)])
def test_durations(duration, seconds):
    assert config.DURATION_RE.match(duration)
    assert config.seconds(duration) == seconds


def test_equal_gradient_baseline_windows_record_one_series(tmp_path):
    """Both baselines are the same expression when their windows are equal: one rule
    records it (a second one would write the same series twice)."""
    from obsgen import pipeline
    p = tmp_path / "c.yaml"
    p.write_text("windows:\n  grad_baseline: 2h\n  grad_long_baseline: 2h\n")
    cfg = config.load(p, alert_names=NAMES)
    records = [r.name for f in pipeline.families(cfg) for r in f.records]
    assert records.count("job:train_grad_norm:median2h") == 1
