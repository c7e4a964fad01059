"""Boundary sensitivity (obsgen.scenarios.boundaries, ``obsgen test --boundaries``): the
rewrites by case, and promtool on tests that pass on 2.42's closed windows and at exact
interval multiples only, which the mode must fail, beside ones it must pass.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from obsgen.config import defaults
from obsgen.output import MARKER
from obsgen.scenarios import boundaries, run

ROOT = Path(__file__).resolve().parent.parent

# sentence -> (expression, left-open)
WINDOWS = {
    "a range selector is one millisecond shorter": (
        "rate(x[5m])", "rate(x[4m59s999ms])"),
    "a subquery keeps its step": (
        "max_over_time(x[30m:5m])", "max_over_time(x[29m59s999ms:5m])"),
    "an offset is left alone": (
        "increase(x[1h] offset 10m)", "increase(x[59m59s999ms] offset 10m)"),
    "a regex's character class is not a window": (
        'count_over_time(x{a=~"[0-9]+"}[90s])', 'count_over_time(x{a=~"[0-9]+"}[1m29s999ms])'),
    "an expression without windows is unchanged": ("x > 1", "x > 1"),
}


@pytest.mark.parametrize("expr,want", list(WINDOWS.values()), ids=list(WINDOWS))
def test_left_open(expr, want):
    assert boundaries.left_open(expr) == want


# sentence -> (promtool values, one entry per interval)
VALUES = {
    "a counter's run has n+1 values": ("0+14x2", ["0", "14", "28"]),
    "a falling run too": ("10-2.5x2", ["10", "7.5", "5"]),
    "a repeated value has n+1 copies": ("1.5x2", ["1.5", "1.5", "1.5"]),
    "_xn is n missing samples": ("_x3", ["_", "_", "_"]),
    "stale, NaN and single values stay": ("stale NaN 4", ["stale", "NaN", "4"]),
    "large counters keep every digit": ("123456789012+1x1", ["123456789012", "123456789013"]),
}


@pytest.mark.parametrize("values,want", list(VALUES.values()), ids=list(VALUES))
def test_expand(values, want):
    assert boundaries.expand(values) == want


def test_a_users_test_shifted_checks_the_same_outcome_one_interval_later():
    test = {"interval": "30s", "input_series": [{"series": "x", "values": "1"}],
            "alert_rule_test": [{"eval_time": "10m", "alertname": "A", "exp_alerts": [
                {"exp_labels": {"job_id": "j"}, "exp_annotations": {"summary": "x is 3"}}]},
                {"eval_time": "20m", "alertname": "A", "exp_alerts": []}],
            "promql_expr_test": [{"expr": "x", "eval_time": "5m", "exp_samples": [
                {"labels": 'x{job_id="j", rank="0"}', "value": 2}, {"labels": "{}", "value": "NaN"}]}]}
    got = boundaries.shifted_outcome(test, 30)
    assert "alert_rule_test" not in got and got["interval"] == "15s"
    firing = 'ALERTS{alertname="A", alertstate="firing"}'
    assert got["promql_expr_test"] == [
        {"expr": firing, "eval_time": "10m30s", "exp_samples": [
            {"labels": 'ALERTS{alertname="A", alertstate="firing", job_id="j"}', "value": 1}]},
        {"expr": firing, "eval_time": "20m30s", "exp_samples": []},
        {"expr": "0 * ((x) == bool (x)) + 1", "eval_time": "5m30s", "exp_samples": [
            {"labels": '{job_id="j", rank="0"}', "value": 1}, {"labels": "{}", "value": 1}]},
        {"expr": 'abs((x) - (label_replace(label_replace(vector(2), "job_id", "j", "", ""), '
                 '"rank", "0", "", ""))) <= bool (abs(label_replace(label_replace(vector(2), '
                 '"job_id", "j", "", ""), "rank", "0", "", "")) * 0.12 + 1e-9)',
         "eval_time": "5m30s", "exp_samples": [{"labels": '{job_id="j", rank="0"}', "value": 1}]}]


def _mine(tmp: Path, values: str, alert_checks: list[dict], value_checks: list[dict]) -> Path:
    path = _test(tmp, "mine.yaml", values, value_checks, generated=False)
    doc = yaml.safe_load(path.read_text())
    doc["tests"][0]["alert_rule_test"] = alert_checks
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.promtool
def test_a_users_alert_whose_description_prints_a_time_passes_shifted(tmp_path):
    """The description prints seconds since the last sample, which the shift moves: the
    outcome (the alert, its labels) is the same."""
    rules = tmp_path / "rules" / "x.yaml"
    rules.parent.mkdir()
    rules.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{
        "alert": "A", "expr": "time() - timestamp(x) >= 0 and x > 0", "for": "1m",
        "annotations": {"summary": "{{ $value }}"}}]}]}))
    mine = _mine(tmp_path, "0x4 1x20", [
        {"eval_time": "4m", "alertname": "A", "exp_alerts": [
            {"exp_labels": {"job_id": "j"}, "exp_annotations": {"summary": "0"}}]},
        {"eval_time": "2m", "alertname": "A", "exp_alerts": []}],
        [{"expr": "x", "eval_time": "5m", "exp_samples": [{"labels": 'x{job_id="j"}', "value": 1}]}])
    assert subprocess.run(["promtool", "test", "rules", str(mine)],
                          capture_output=True).returncode == 0
    assert all(_outcomes(tmp_path, rules, [mine]).values())


@pytest.mark.promtool
def test_a_users_value_that_needs_the_left_edge_sample_fails_shifted(tmp_path):
    """3 samples in [1m] at aligned times, 2 when they sit between evaluations: 33% off."""
    rules = _rules(tmp_path, "x > 1")
    mine = _mine(tmp_path, "1x20", [], [{"expr": "count_over_time(x[1m])", "eval_time": "5m",
                                         "exp_samples": [{"labels": '{job_id="j"}', "value": 3}]}])
    assert subprocess.run(["promtool", "test", "rules", str(mine)],
                          capture_output=True).returncode == 0
    assert not _outcomes(tmp_path, rules, [mine])["/mine.yaml [inputs half an interval late]"]


def test_shifted_inputs_sit_half_an_interval_later():
    test = {"interval": "30s", "input_series": [{"series": "x", "values": "1+1x2 _"}]}
    assert boundaries.shifted(test, 30) == {
        "interval": "15s", "input_series": [{"series": "x", "values": "_ 1 _ 2 _ 3 _ _"}]}


def _rules(tmp: Path, expr: str) -> Path:
    path = tmp / "rules" / "x.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"alert": "A", "expr": expr}]}]}))
    return path


def _test(tmp: Path, name: str, values: str, checks: list[dict], generated: bool) -> Path:
    doc = {"rule_files": ["rules/x.yaml"], "evaluation_interval": "30s", "tests": [{
        "name": "the case", "interval": "30s",
        "input_series": [{"series": 'x{job_id="j"}', "values": values}],
        "promql_expr_test": checks}]}
    path = tmp / name
    path.write_text((f"# {MARKER}\n" if generated else "") + yaml.safe_dump(doc, sort_keys=False))
    return path


def _fires(at: str, n: int = 1) -> dict:
    return {"expr": 'count by (alertname) (ALERTS{alertname="A", alertstate="firing"})',
            "eval_time": at, "exp_samples": [{"labels": '{alertname="A"}', "value": n}] if n else []}


def _outcomes(tmp: Path, rules: Path, fixtures: list[Path]) -> dict[str, bool]:
    return {o.label.replace(str(tmp), ""): o.ok
            for o in run.run([rules], fixtures, defaults(), boundaries=True)}


@pytest.mark.promtool
def test_a_count_that_needs_the_left_edge_sample_fails_left_open(tmp_path):
    """11 samples in [5m] at aligned times on 2.42, 10 on Prometheus 3."""
    rules = _rules(tmp_path, "count_over_time(x[5m]) >= 11")
    mine = _test(tmp_path, "mine.yaml", "1x20", [_fires("10m")], generated=False)
    assert subprocess.run(["promtool", "test", "rules", str(mine)],
                          capture_output=True).returncode == 0
    assert _outcomes(tmp_path, rules, [mine]) == {f"/mine.yaml [{v}]": False
                                                  for v in boundaries.VARIANTS}


@pytest.mark.promtool
def test_a_count_with_a_sample_to_spare_passes_every_variant(tmp_path):
    rules = _rules(tmp_path, "count_over_time(x[5m]) >= 10")
    ours = _test(tmp_path, "obsgen-x.yaml", "1x20", [_fires("10m")], generated=True)
    outcomes = _outcomes(tmp_path, rules, [ours])
    assert sorted(outcomes) == sorted(f"the case (obsgen-x.yaml) [{v}]" for v in boundaries.VARIANTS)
    assert all(outcomes.values())


@pytest.mark.promtool
def test_a_quiet_check_at_the_very_evaluation_the_input_recovers_fails_shifted(tmp_path):
    """Quiet exactly when the last bad sample is replaced holds only while samples fall on
    the evaluation times."""
    rules = _rules(tmp_path, "x > 0")
    ours = _test(tmp_path, "obsgen-x.yaml", "1 1 1 0 0 0", [_fires("1m"), _fires("1m30s", 0)],
                 generated=True)
    outcomes = _outcomes(tmp_path, rules, [ours])
    assert outcomes["the case (obsgen-x.yaml) [left-open windows]"]
    assert not outcomes["the case (obsgen-x.yaml) [inputs half an interval late]"]


@pytest.mark.promtool
@pytest.mark.long  # every scenario of every family, four times over: make long
def test_obsgens_tests_hold_on_both_range_semantics_and_offset_inputs():
    done = subprocess.run([sys.executable, "-m", "obsgen", "test", "--boundaries"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " 0 failed" in done.stdout


BUCKET_MATCHER = r'\b(le|quantile)\s*(=~|!~|!=|=)\s*"'


def _queries(files: dict[str, str]) -> list[tuple[str, str]]:
    from obsgen.dashboards import queries_of
    rules = [(p, str(r["expr"])) for p, t in files.items() if p.startswith("rules/")
             for g in yaml.safe_load(t)["groups"] for r in g["rules"]]
    return rules + [(q.uid, q.expr) for q in queries_of(files)]


def test_no_rule_or_panel_matches_a_literal_bucket_bound_or_quantile():
    """Prometheus 3 normalises le and quantile values at the scrape ("1" is "1.0")."""
    import re
    from obsgen import pipeline
    assert re.search(BUCKET_MATCHER, 'sum(rate(x_bucket{le="1"}[5m]))')
    queries = _queries(pipeline.render_all(defaults()))
    assert len(queries) > 100
    assert [(p, e) for p, e in queries if re.search(BUCKET_MATCHER, e)] == []
