"""Reference docs and runbooks generated from the definitions."""
from __future__ import annotations

import copy
from pathlib import Path

import jinja2
import pytest

from obsgen import config, docs, familydoc, pipeline, registry

ROOT = Path(__file__).resolve().parent.parent


def defaults() -> config.Config:
    return config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")


def with_(text: str, tmp_path) -> config.Config:
    (tmp_path / "c.yaml").write_text(text)
    return config.load(tmp_path / "c.yaml", alert_names=registry.alert_names())


def test_without_a_base_url_every_alert_carries_its_runbooks_path_and_checks():
    """No address is invented: the page says where the runbook is and what to check."""
    files = pipeline.render_all(defaults())
    for fam in pipeline.families(defaults()):
        doc = familydoc.parse(fam.name, fam.doc)
        for alert in fam.alerts:
            page = f"docs/runbooks/{alert.name}.md"
            assert page in files, page
            assert "runbook_url" not in alert.annotations, alert.name
            note = alert.annotations["runbook"]
            assert note.startswith(page + " ") and doc.alerts[alert.key].checks[2] in note
            text = files[page]
            assert "## Check first" in text and "\n3. " in text and "amtool silence add" in text
            assert alert.expr in text


def test_a_base_url_links_every_runbook_where_it_is_rendered(tmp_path):
    cfg = with_("links: {base_url: 'https://git.example.com/ml/obs/blob/main/'}\n"
                "docs: {path: ops/obsgen}\n", tmp_path)
    files = pipeline.render_all(cfg)
    for fam in pipeline.families(cfg):
        for alert in fam.alerts:
            page = f"ops/obsgen/runbooks/{alert.name}.md"
            assert page in files
            assert alert.annotations["runbook_url"] == "https://git.example.com/ml/obs/blob/main/" + page
            assert "runbook" not in alert.annotations and "dashboard_url" not in alert.annotations
    assert not any(p.startswith("docs/") for p in files)
    assert "https://git.example.com/ml/obs/blob/main/ops/obsgen/runbooks/${__data.fields.alertname}.md" \
        in files["dashboards/overview.json"]


def test_a_grafana_url_opens_the_dashboard_on_the_job_and_rank(tmp_path):
    cfg = with_("links: {grafana_url: 'https://grafana.example.com/'}\n", tmp_path)
    got = {a.name: a.annotations["dashboard_url"] for f in pipeline.families(cfg) for a in f.alerts}
    base = "https://grafana.example.com/d/obsgen-"
    assert got["Train_Straggler_Persistent"] == (
        base + "overview?var-job_id={{ $labels.job_id }}&var-rank={{ $labels.rank }}")
    assert got["Train_Bubble_Excess"] == base + "pp?var-job_id={{ $labels.job_id }}"
    assert got["Train_GPU_ECC"].startswith(base + "hardware?var-job_id={{ $labels.job_id }}")


def test_docs_can_be_skipped():
    cfg = defaults()
    cfg.data["docs"] = {"enabled": False, "path": "docs"}
    files = pipeline.render_all(cfg)
    assert not any(p.startswith("docs/") for p in files) and "rules/stragglers.yaml" in files


def test_every_runbook_gives_the_query_from_its_rank_to_its_gpu_and_host():
    files = pipeline.render_all(defaults())
    text = files["docs/runbooks/Train_Straggler_Persistent.md"]
    assert '`train_rank_gpu_info{job_id="JOB", rank="RANK"}`' in text
    assert '`train_rank_gpu_info{job_id="JOB", node="NODE"}`' in files["docs/runbooks/Train_IB_Asymmetry.md"]
    for page, text in files.items():
        if page.startswith("docs/runbooks/"):
            assert "## Where it runs\n\n- `train_rank_gpu_info{" in text, page


def test_the_readme_and_the_runbooks_give_the_same_fires_after():
    """The README's last column is each alert's docstring paragraph, as its runbook shows."""
    import re
    readme = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| (Train_\w+) \|.*\| ([^|]*) \|$", readme, flags=re.M))
    files = pipeline.render_all(defaults())
    for fam in pipeline.families(defaults()):
        doc = familydoc.parse(fam.name, fam.doc)
        for alert in fam.alerts:
            after = doc.alerts[alert.key].fires_after
            assert rows[alert.name].strip() == after, alert.name
            assert f"| {alert.for_} | {after} |" in files[f"docs/runbooks/{alert.name}.md"]


def test_runbook_url_pattern_from_config(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("runbook_url: https://wiki.example.com/ml/{alert}\n")
    cfg = config.load(cfg_file, alert_names=registry.alert_names())
    for fam in pipeline.families(cfg):
        for alert in fam.alerts:
            assert alert.annotations["runbook_url"] == f"https://wiki.example.com/ml/{alert.name}"


def test_docs_list_every_alert_and_metric():
    files = pipeline.render_all(defaults())
    for name in registry.alert_names():
        assert f"### {name}" in files["docs/alerts.md"]
    from obsgen import contract
    for m in contract.METRICS:
        assert f"| `{m}` |" in files["docs/metrics.md"]


@pytest.mark.parametrize("alert,keys", [
    ("Train_RankFailed", ["windows.progress", "windows.memory", "windows.restart_gap"]),
    ("Train_GradientNonFinite", ["windows.grad_baseline", "windows.progress", "windows.memory",
                                 "windows.restart_gap"]),
    ("Train_NoCheckpoints", ["thresholds.checkpoint_max_age", "windows.progress", "windows.memory",
                             "windows.restart_gap"]),
    ("Train_Bubble_Excess", ["thresholds.bubble_excess_factor", "windows.rate"]),
], ids=["rank failure reads the progress, memory and restart-gap windows",
        "non-finite reads the finite baseline and, through the ranks family, progress",
        "no-checkpoints depends on the ranks family's progress and memory windows",
        "bubble excess reads the factor and the rate window"])
def test_config_keys_are_derived_from_the_rules(alert, keys):
    cfg = defaults()
    derived = docs.tuning_keys(pipeline.families(cfg), cfg, registry.build)
    assert derived[alert] == keys


def test_derived_keys_follow_a_renamed_alert(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("alerts: {Train_RankFailed: {name: Train_RanksDown}}\n")
    cfg = config.load(f, alert_names=registry.alert_names())
    derived = docs.tuning_keys(pipeline.families(cfg), cfg, registry.build)
    assert derived["Train_RanksDown"] == ["windows.progress", "windows.memory",
                                          "windows.restart_gap"]


BAD_DOCS = {
    "a section without a check list": ("T.\n\n## A\n\nmeans.\n", "has no 'Check first:' list"),
    "a section with two checks": ("T.\n\n## A\n\nm.\n\nCheck first:\n1. a\n2. b\n", "lists 2 checks, not 3"),
    "no docstring at all": ("", "no docstring"),
}


@pytest.mark.parametrize("case", BAD_DOCS, ids=list(BAD_DOCS))
def test_family_docstrings_are_validated(case):
    text, message = BAD_DOCS[case]
    with pytest.raises(familydoc.DocError, match=message):
        familydoc.parse("m.py", text)


def test_templates_fail_on_an_undefined_variable():
    env = docs._environment()
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("runbook.md.j2").render(header="x")


def test_template_text_turns_go_templates_into_prose():
    text = ('rank {{ $labels.rank }}{{ with $labels.node }}, node {{ . }}{{ end }} is '
            '{{ printf "%.1f" $value }}x')
    assert docs.template_text(text, defaults()) == "rank <rank>, node <node> is <value>x"


def test_metrics_doc_names_the_panels_that_read_each_metric():
    text = pipeline.render_all(defaults())["docs/metrics.md"]
    row = next(l for l in text.splitlines() if l.startswith("| `nccl_collective_bytes_total` |"))
    assert "panel DP / Bytes per second per parallel group" in row
    # a panel that reads a recorded series is listed under the metric beneath it too
    row = next(l for l in text.splitlines() if l.startswith("| `train_compute_seconds` |"))
    assert "panel Overview / " in row


def test_the_config_reference_has_a_row_per_key_with_its_comment_and_default():
    from obsgen import config, configdoc
    page = pipeline.render_all(defaults())["docs/config.md"]

    sections = {k for k, v in config.schema(None)["properties"].items()  # maps of known keys
                if "properties" in v and config.DEFAULTS[k]}
    keys = {f"{k}.{sub}" if k in sections else k
            for k, v in config.DEFAULTS.items() for sub in (v if k in sections else [None])}
    rows = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}
    assert len(sections) >= 7 and rows == keys
    notes = configdoc.comments()
    assert notes[("thresholds", "straggler_ratio")] in page
    assert "| `thresholds.straggler_ratio` | `1.07` | number > 1 |" in page
    assert "| `dashboard_manifests.kinds` | `[]` | list of one of \"configmap\", \"grafana-operator\" |" in page
