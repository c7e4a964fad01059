"""Label values from the config mean exactly what the config says, in PromQL (selectors),
in YAML, and in the Go templates Prometheus and vmalert expand in alert labels; values
no engine can carry exactly are refused with one clear line. promtool proves the first."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from obsgen import config, pipeline, promtool, registry
from obsgen.promql import quote

from .promtool.support import render_template

NAMES = registry.alert_names()
NASTY = {
    "a double quote": 'team "a"',
    "a backslash": "C:\\jobs\\a",
    "a newline": "line one\nline two",
    "braces": "{cluster=~\".*\"}",
    "template syntax": "{{ $value }}",
    # a description's query is a Go string: a backtick would end a raw one, which also
    # drops a carriage return
    "a backtick and a carriage return": "a`b\rc",
    "all of them with unicode": 'é "q" \\ {x}\n{{ .Labels }} ✓',
    # YAML 1.1 parsers (promtool's) read NEL and the Unicode separators as line breaks
    "a next-line character (U+0085)": "a\x85b",
    "line and paragraph separators": "a\u2028b\u2029c",
}


def cfg_with(tmp_path: Path, text: str) -> config.Config:
    f = tmp_path / "obsgen.yaml"
    f.write_text(text)
    return config.load(f, alert_names=NAMES)


def run_promtool(tmp_path: Path, cfg: config.Config, series: list[dict], expected: list[dict]) -> promtool.Result:
    """Render the gradients family with ``cfg`` and check Train_GradientNonFinite at 2m."""
    files = pipeline.render_all(cfg)
    rules = tmp_path / "gradients.yaml"
    rules.write_text(files["rules/gradients.yaml"])
    alert = next(r for g in yaml.safe_load(files["rules/gradients.yaml"])["groups"]
                 for r in g["rules"] if r.get("alert") == "Train_GradientNonFinite")
    exp = []
    for labels in expected:
        full = {**labels, **yaml.safe_load(yaml.safe_dump(alert["labels"]))}
        # Prometheus expands templates in labels: the expectation is the expanded text.
        full = {k: (yaml.safe_load(v[3:-3]) if v.startswith("{{ \"") else v) for k, v in full.items()}
        exp.append({"exp_labels": full, "exp_annotations": {
            k: render_template(v, full, 1) if "{{ \"" not in v else v for k, v in alert["annotations"].items()}})
    doc = {"rule_files": [str(rules)], "evaluation_interval": "30s", "tests": [{
        "interval": "30s", "input_series": series,
        "alert_rule_test": [{"eval_time": "2m", "alertname": "Train_GradientNonFinite", "exp_alerts": exp}]}]}
    test = tmp_path / "test.yaml"
    test.write_text(yaml.safe_dump(doc))  # escaped: a raw NEL in YAML is a line break
    return promtool.test_rules([test])


def nan_series(**labels: str) -> dict:
    inner = ", ".join(f"{k}={quote(v)}" for k, v in labels.items())
    return {"series": f"train_grad_norm{{{inner}}}", "values": "NaN NaN NaN NaN NaN"}


@pytest.mark.promtool
@pytest.mark.parametrize("case", NASTY, ids=list(NASTY))
def test_a_selector_value_matches_exactly_that_value(case, tmp_path):
    value = NASTY[case]
    cfg = cfg_with(tmp_path, yaml.safe_dump({"selector": {"cluster": value}}))
    series = [nan_series(cluster=value, job_id="j1", rank="7"),
              nan_series(cluster=value[:-1], job_id="j2", rank="7"),  # a near miss: no alert
              nan_series(cluster=value + " ", job_id="j3", rank="7")]
    result = run_promtool(tmp_path, cfg, series,
                          [{"cluster": value, "job_id": "j1", "signal": "grad_norm"}])
    assert result.ok, result.output


@pytest.mark.promtool
@pytest.mark.parametrize("case", NASTY, ids=list(NASTY))
def test_every_rule_file_with_a_nasty_selector_passes_promtool_check(case, tmp_path):
    """Every family, its annotation templates included: the TP-group alert's description
    carries a query with the selector in it, as a Go string."""
    cfg = cfg_with(tmp_path, yaml.safe_dump({"selector": {"cluster": NASTY[case]}}))
    paths = []
    for rel, text in pipeline.render_all(cfg).items():
        if rel.startswith("rules/"):
            paths.append(tmp_path / rel.replace("/", "_"))
            paths[-1].write_text(text)
    result = promtool.check_rules(paths)
    assert result.ok, result.output[-2000:]


@pytest.mark.promtool
def test_a_regex_selector_is_anchored_and_exact(tmp_path):
    cfg = cfg_with(tmp_path, 'selector: {cluster: {"=~": "a\\\\.b|c"}}\n')
    series = [nan_series(cluster="a.b", job_id="j1", rank="0"), nan_series(cluster="aXb", job_id="j2", rank="0"),
              nan_series(cluster="cc", job_id="j3", rank="0"), nan_series(cluster="c", job_id="j4", rank="0")]
    result = run_promtool(tmp_path, cfg, series, [
        {"cluster": "a.b", "job_id": "j1", "signal": "grad_norm"},
        {"cluster": "c", "job_id": "j4", "signal": "grad_norm"}])
    assert result.ok, result.output


@pytest.mark.promtool
@pytest.mark.parametrize("case", NASTY, ids=list(NASTY))
def test_config_label_values_reach_the_alert_unchanged(case, tmp_path):
    value = NASTY[case]
    cfg = cfg_with(tmp_path, yaml.safe_dump({"common_labels": {"note": value},
                                             "teams": {"workload": value}}))
    result = run_promtool(tmp_path, cfg, [nan_series(job_id="j1", rank="0")],
                          [{"job_id": "j1", "signal": "grad_norm", "note": value}])
    assert result.ok, result.output
    files = pipeline.render_all(cfg)
    alert = next(r for g in yaml.safe_load(files["rules/gradients.yaml"])["groups"]
                 for r in g["rules"] if r.get("alert") == "Train_GradientNonFinite")
    assert alert["labels"]["team"] in (value, '{{ ' + __import__("json").dumps(value, ensure_ascii=False) + ' }}')


REFUSED = {
    "a NUL character in a selector value": (
        'selector: {cluster: "a\\0b"}\n', "obsgen.yaml: selector.cluster: must not contain NUL characters"),
    "a lone surrogate in a common label": (
        'common_labels: {env: "\\ud800"}\n',
        "obsgen.yaml: common_labels.env: must be valid Unicode text (it holds a lone surrogate)"),
    "a regex that does not compile": (
        'selector: {cluster: {"=~": "a("}}\n',
        "obsgen.yaml: selector.cluster.=~: is not a valid regular expression"),
    "a lookahead, which RE2 lacks": (
        'selector: {cluster: {"=~": "(?!prod).*"}}\n',
        "obsgen.yaml: selector.cluster.=~: uses lookaround, backreferences or possessive quantifiers, which RE2 lacks"),
    "a label name that is not one": (
        'selector: {"my-cluster": a}\n',
        "obsgen.yaml: selector: must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*), got 'my-cluster'"),
    "a zero window": (
        "windows: {progress: 0s}\n", "obsgen.yaml: windows.progress: must be a duration above zero, got '0s'"),
    "a negative duration": (
        "windows: {rate: -5m}\n", "obsgen.yaml: windows.rate: must be a Prometheus duration such as 30s, 5m or 1h30m, got '-5m'"),
}


# Definitions the config makes impossible are refused the same way, with the config path.
REFUSED |= {
    "a for longer than the memory that keeps a dead job's labels": (
        "alerts: {Train_RankFailed: {for: 45m}}\n",
        "obsgen.yaml: alerts.Train_RankFailed.for: must be shorter than 0.5 x windows.memory (1h), got 45m"),
    "a memory window shrunk below the alert's for": (
        "windows: {memory: 4m}\n",
        "obsgen.yaml: alerts.Train_RankFailed.for: must be shorter than 0.5 x windows.memory (4m), got 2m30s"),
    "two alerts renamed to one name": (
        "alerts: {Train_GradientVanishing: {name: Train_GradientExplosion}}\n",
        "obsgen.yaml: alerts.Train_GradientVanishing.name: 'Train_GradientExplosion' is the name of another alert"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_refused_with_one_line_naming_the_field_and_nothing_written(case, tmp_path, monkeypatch, capsys):
    text, line = REFUSED[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "obsgen.yaml").write_text(text)
    from obsgen.cli import main
    assert main(["render", "--config", "obsgen.yaml", "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err
    assert not (tmp_path / "out").exists()


@pytest.mark.promtool
def test_a_selector_label_named_like_a_renamed_contract_label(tmp_path):
    """The extra selector's label is matched on in every join; a contract label renamed to
    the same name must not be copied by group_left as well (PromQL refuses that)."""
    cfg = cfg_with(tmp_path, "labels: {job_id: run}\nselector: {run: r1}\n")
    files = pipeline.render_all(cfg)
    pipeline.validate(files, cfg)  # promtool on the rules, lint (and schema) on the dashboards
