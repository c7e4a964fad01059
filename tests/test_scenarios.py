"""The promtool tests obsgen renders for a user's config (obsgen.scenarios): they pass on
the rules rendered from the same config in every format, fail on a broken rule with the
scenario's sentence, say what they cannot state, and live beside the user's own tests."""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from obsgen import config, scenarios

ROOT = Path(__file__).resolve().parent.parent
# the config of the user, tried in an empty repository
USER = ("metrics: {train_compute_seconds: megatron_compute_seconds}\n"
        "labels: {job_id: run}\nthresholds: {straggler_ratio: 1.15}\n")
SMALL = "families: [stragglers, ranks]\ndashboards: {enabled: false}\n"


def obsgen(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obsgen", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def repo(tmp_path: Path, text: str) -> Path:
    (tmp_path / "obsgen.yaml").write_text(text)
    done = obsgen(tmp_path, "render")
    assert done.returncode == 0, done.stderr
    return tmp_path


@pytest.mark.promtool
def test_the_users_config_renders_scenarios_that_pass_on_its_rules(tmp_path):
    root = repo(tmp_path, USER)
    files = sorted(p.name for p in (root / "tests" / "promtool").glob("*.yaml"))
    assert files == sorted(f"obsgen-{f}.yaml" for f in scenarios.FAMILIES)
    doc = yaml.safe_load((root / "tests/promtool/obsgen-stragglers.yaml").read_text())
    assert doc["rule_files"] == ["../../rules/stragglers.yaml"]
    series = " ".join(s["series"] for t in doc["tests"] for s in t["input_series"])
    assert "megatron_compute_seconds_sum{" in series and 'run="scenario-stragglers"' in series
    assert "train_compute_seconds_sum" not in series and "job_id=" not in series
    done = obsgen(root, "test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "one GPU 45% slower in an 8-rank data-parallel job fires Train_Straggler_Persistent" in done.stdout
    assert " 0 failed" in done.stdout


@pytest.mark.promtool
@pytest.mark.parametrize("fmt", ["prometheus-operator", "mimir", "thanos"])
def test_the_scenarios_read_the_rendered_rule_files_in_every_format(tmp_path, fmt):
    root = repo(tmp_path, SMALL + f"format: {fmt}\n")
    doc = yaml.safe_load((root / "tests/promtool/obsgen-ranks.yaml").read_text())
    assert doc["rule_files"] == ["../../rules/ranks.yaml"]
    done = obsgen(root, "test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all ranks gone fires Train_RankFailed" in done.stdout


@pytest.mark.promtool
def test_a_broken_rule_fails_its_scenarios_by_their_sentences(tmp_path):
    root = repo(tmp_path, USER + "families: [stragglers]\ndashboards: {enabled: false}\n")
    rules = root / "rules" / "stragglers.yaml"
    rules.write_text(rules.read_text().replace("> 1.15", "> 1.9"))
    done = obsgen(root, "test")
    assert done.returncode == 1
    assert ("FAILED: one GPU 45% slower in TP=2 x PP=2 x DP=2 (its TP peer waits for it inside "
            "compute) fires Train_Straggler_Persistent") in done.stderr
    assert 'exp: {rank="5", run="scenario-stragglers"' in done.stderr


@pytest.mark.promtool
def test_a_users_own_test_file_is_run_and_never_touched_or_removed(tmp_path):
    root = repo(tmp_path, SMALL)
    own = root / "tests" / "promtool" / "ours.yaml"
    own.write_text(yaml.safe_dump({
        "rule_files": ["../../rules/ranks.yaml"], "evaluation_interval": "30s",
        # wrong on purpose (8 ranks, 9 expected): the failure shows the file is run
        "tests": [{"name": "a user's test that fails", "interval": "30s",
                   "input_series": [{"series": 'train_world_size{job_id="a"}', "values": "8x10"}],
                   "promql_expr_test": [{"expr": "job:train_world_size:max", "eval_time": "2m",
                                         "exp_samples": [{"labels": '{job_id="a"}', "value": 9}]}]}]}))
    before = (own.read_bytes(), own.stat().st_mtime_ns)
    done = obsgen(root, "test")
    assert done.returncode == 1 and "FAIL tests/promtool/ours.yaml" in done.stdout, done.stdout
    assert "ok   all ranks gone fires Train_RankFailed" in done.stdout
    # a render with one family fewer removes that family's scenarios and keeps the user's file
    (root / "obsgen.yaml").write_text("families: [stragglers]\ndashboards: {enabled: false}\n")
    done = obsgen(root, "render")
    assert done.returncode == 0, done.stderr
    assert "removed tests/promtool/obsgen-ranks.yaml" in done.stdout
    assert (own.read_bytes(), own.stat().st_mtime_ns) == before


def test_check_reports_stale_scenarios(tmp_path):
    root = repo(tmp_path, SMALL)
    (root / "obsgen.yaml").write_text(SMALL + "windows: {progress: 3m}\n")
    done = obsgen(root, "check")
    assert done.returncode == 1
    assert "tests/promtool/obsgen-ranks.yaml: stale" in done.stderr


def test_scenarios_turned_off_render_none_and_test_says_so(tmp_path):
    root = repo(tmp_path, SMALL + "scenario_tests: {enabled: false}\n")
    assert not (root / "tests").exists()
    done = obsgen(root, "test")
    assert done.returncode == 1 and "no promtool test files" in done.stderr


def test_the_folder_is_configurable_and_the_rule_paths_follow(tmp_path):
    root = repo(tmp_path, SMALL + "scenario_tests: {path: ci/promtool/obsgen}\n")
    doc = yaml.safe_load((root / "ci/promtool/obsgen/obsgen-ranks.yaml").read_text())
    assert doc["rule_files"] == ["../../../rules/ranks.yaml"]


def _config(text: str) -> config.Config:
    data = copy.deepcopy(config.DEFAULTS)
    data.update({k: ({**data[k], **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v)
                 for k, v in yaml.safe_load(text).items()})
    return config.Config(data, "(test)")


# config -> a line ``obsgen test`` must print as not stated
NOT_STATED = {
    "a family turned off is said": (
        "families: [stragglers]\ndashboards: {enabled: false}\n",
        "the gradients scenarios: the family is not rendered"),
    "an explosion factor no gradient spike is sized to is said": (
        "thresholds: {grad_explosion_factor: 300}\n",
        "a gradient spike fires Train_GradientExplosion: grad_explosion_factor 300"),
    "a straggler ratio only a failing GPU crosses is said": (
        "thresholds: {straggler_ratio: 1.9}\n", "straggler_ratio 1.9: a GPU 3.7x slower"),
    "a cadence that stretches the progress window past the checkpoint age is said": (
        "presets: [default, megatron-otel]\nmegatron_log_interval: 100\n",
        "the step histogram is read over 3h20m (the progress window times a preset's cadence)"),
    "a regex selector no literal value matches is said": (
        "selector: {cluster: {'=~': '[0-9]+'}}\n", "no literal value found that =~'[0-9]+' matches"),
    "a vanishing for as long as half its baseline is said": (
        "alerts: {Train_GradientVanishing: {for: 2h59m}}\n",
        "its for (2h59m) and two evaluations reach half of windows.grad_long_baseline (6h)"),
}


@pytest.mark.parametrize("case", NOT_STATED, ids=list(NOT_STATED))
def test_what_cannot_be_stated_is_said(case):
    text, line = NOT_STATED[case]
    lines = scenarios.unstated(_config(text))
    assert any(line in x for x in lines), lines


def test_the_defaults_state_every_scenario():
    assert scenarios.unstated(_config("{}\n")) == []


def test_megatrons_cadence_is_stated_where_its_windows_allow():
    """At a log interval of 10 every scenario holds; at Megatron's default of 100 the step
    histogram is read over 3h20m, and only what that window rules out is said."""
    assert scenarios.unstated(_config("presets: [megatron-otel]\nmegatron_log_interval: 10\n")) == []
    said = scenarios.unstated(_config("presets: [megatron-otel]\nmegatron_log_interval: 100\n"))
    assert [line.split(":")[0] for line in said] == [
        "a hung job (no rank progressing) is not reported as missing checkpoints",
        "slower steps fire Train_StepTime_Regression"], said


@pytest.mark.promtool
@pytest.mark.parametrize("log_interval", [10, pytest.param(100, marks=pytest.mark.long)])
def test_the_megatron_otel_presets_scenarios_pass_at_its_cadence(tmp_path, log_interval):
    """Published as Megatron records them (one observation per log interval, at the
    interval's mean, in milliseconds), under the preset's names: every stated scenario
    passes. Before the windows were sized for the cadence, at 100 a job whose ranks all
    died never fired RankFailed (the world size was forgotten first), and a healthy job's
    checkpoint overhead was overstated for hours after its start."""
    root = repo(tmp_path, f"presets: [megatron-otel]\nmegatron_log_interval: {log_interval}\n")
    doc = yaml.safe_load((root / "tests/promtool/obsgen-ranks.yaml").read_text())
    series = " ".join(s["series"] for t in doc["tests"] for s in t["input_series"])
    assert "megatron_training_step_duration_ms_milliseconds_count{" in series
    assert 'dl_rank="0"' in series and "train_step_seconds" not in series
    done = obsgen(root, "test")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    assert "all ranks gone fires Train_RankFailed" in done.stdout
    assert " 0 failed" in done.stdout


def test_obsgens_own_scenario_files_are_current():
    """make render writes them into this repository, where `make test` runs them."""
    files = {k: v for k, v in scenarios.files(*_families_and_config()).items()}
    stale = [p for p, text in files.items() if (ROOT / p).read_text() != text]
    assert not stale, f"{stale}: run make render"


def _families_and_config():
    from obsgen import pipeline
    cfg = _config("{}\n")
    return pipeline.families(cfg), cfg


@pytest.mark.promtool
@pytest.mark.parametrize("line", ["2", "3"])
@pytest.mark.parametrize("family", list(scenarios.FAMILIES))
def test_obsgens_own_scenarios_pass(family, line):
    """The rendered scenarios pass on Debian 12's promtool (2.42) and on the Prometheus 3
    line's (make tools3)."""
    from obsgen import promtool
    from tests.test_promtool import LINES, missing, promtools
    binary = promtools()[line]
    if not binary:
        missing(LINES[line])
    result = promtool.test_rules([ROOT / "tests" / "promtool" / f"obsgen-{family}.yaml"],
                                 cwd=ROOT / "tests" / "promtool", binary=binary)
    assert result.ok, result.output


def test_a_renamed_alert_renders_and_its_scenarios_name_it_so():
    from obsgen import pipeline
    cfg = _config("alerts: {Train_Straggler_Persistent: {name: GPUStraggler}}\n")
    files = pipeline.render_all(cfg)
    text = files["tests/promtool/obsgen-stragglers.yaml"]
    assert 'ALERTS{alertname=\\"GPUStraggler\\"' in text or 'alertname="GPUStraggler"' in text
    assert "fires GPUStraggler for it alone" in files["docs/scenarios.md"]
    assert "Train_Straggler_Persistent" not in files["docs/scenarios.md"]
