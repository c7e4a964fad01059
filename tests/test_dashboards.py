"""Dashboards: Grafana's JSON schema, the dashboard lint (and that each of its rules can
fail), every metric a panel reads known, the tabs, variables, links and provisioning,
golden files for a custom config and for schema v2."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from obsgen import config, contract, dashboards, pipeline, registry
from obsgen.dashboards import lint, validate
from obsgen.dashboards.query import ALL

from .golden import assert_golden

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
NAMES = registry.alert_names()


def defaults(**dash) -> config.Config:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")
    cfg.data["dashboards"].update(dash)
    return cfg


def custom() -> config.Config:
    return config.load(GOLDEN / "custom.yaml", alert_names=NAMES)


def v2() -> config.Config:
    return config.load(GOLDEN / "dashboards-v2.yaml", alert_names=NAMES)


def records() -> config.Config:
    return defaults(records=True)


CONFIGS = {"defaults": defaults, "custom": custom, "v2": v2, "records": records}


def rendered(cfg: config.Config) -> dict[str, dict]:
    return {path: json.loads(text) for path, text in pipeline.render_all(cfg).items()
            if path.startswith("dashboards/") and path.endswith(".json")}


def all_dashboards():
    for name, make in CONFIGS.items():
        for path in rendered(make()):
            yield pytest.param(name, path, id=f"{name}:{path}")


# Grafana's schema ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def validators():
    return validate.schema_validators(str(validate.SHIPPED))


def test_the_shipped_schemas_are_the_ones_their_readme_names():
    """The package carries Grafana's schemas with their license; each file's sha256 is the
    one its README records for the upstream commit it names (a refresh updates both)."""
    import hashlib
    readme = (validate.SHIPPED / "README.md").read_text()
    assert "Apache License" in (validate.SHIPPED / "LICENSE").read_text()
    assert re.search(r"commit\s+[0-9a-f]{40}", readme)
    for name in validate.FILES:
        digest = hashlib.sha256((validate.SHIPPED / name).read_bytes()).hexdigest()
        assert f"| {name} |" in readme and digest in readme, (name, digest)


def test_renders_validate_against_the_shipped_schemas_without_any_setting(monkeypatch):
    monkeypatch.delenv(validate.ENV, raising=False)
    assert validate.schema_dir() == str(validate.SHIPPED)
    doc = rendered(defaults())["dashboards/overview.json"]
    doc["links"][0]["keepTime"] = "yes"
    files = {"dashboards/overview.json": json.dumps(doc)}
    problems = validate.check(files, defaults(), pipeline.families(defaults()))
    assert problems == ["dashboards/overview.json: Grafana schema: links.0.keepTime: "
                        "'yes' is not of type 'boolean'"], problems


def test_a_schema_override_that_cannot_be_read_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(validate.ENV, str(tmp_path))
    files = {p: t for p, t in pipeline.render_all(defaults()).items() if p.endswith(".json")}
    problems = validate.check(files, defaults(), pipeline.families(defaults()))
    assert len(problems) == 1 and problems[0].startswith(str(tmp_path / validate.FILES[0])), problems


@pytest.mark.parametrize("cfg,path", list(all_dashboards()))
def test_dashboard_validates_against_grafanas_schema(validators, cfg, path):
    doc = rendered(CONFIGS[cfg]())[path]
    if doc.get("kind") == "Dashboard":
        assert doc["apiVersion"] == "dashboard.grafana.app/v2"
    errors = validate.schema_problems(doc, validators)
    assert not errors, "\n".join(errors[:10])


def test_the_schema_check_can_fail(validators):
    doc = rendered(defaults())["dashboards/overview.json"]
    doc["panels"][1]["gridPos"]["w"] = "wide"
    doc["links"][0]["keepTime"] = "yes"
    assert len(list(validators["classic"].iter_errors(doc))) == 2
    spec = rendered(v2())["dashboards/training.json"]["spec"]
    del spec["layout"]["spec"]["tabs"][0]["spec"]["layout"]
    assert list(validators["v2"].iter_errors(spec))


# the lint -----------------------------------------------------------------------------
def context(cfg: config.Config) -> lint.Context:
    return lint.Context.of(cfg, pipeline.families(cfg))


@pytest.mark.parametrize("cfg,path", list(all_dashboards()))
def test_dashboard_passes_the_lint(cfg, path):
    c = CONFIGS[cfg]()
    assert lint.lint(rendered(c)[path], context(c)) == []


def _panel(doc, title):
    return next(p for p in doc["panels"] if p.get("title") == title)


def _set_expr(title, expr, ref=0):
    def mutate(doc):
        _panel(doc, title)["targets"][ref]["expr"] = expr
    return mutate


def _var(doc, name):
    return next(v for v in doc["templating"]["list"] if v["name"] == name)


# A change to the rendered overview -> the rule that must report it.
LINT_FAILS = {
    "a dashboard without the datasource variable fails": (
        lambda d: d["templating"]["list"].pop(0), "template-datasource-rule"),
    "a datasource variable with another name fails": (
        lambda d: _var(d, "datasource").update(name="prom"), "template-datasource-rule"),
    "a job variable that takes several jobs fails": (
        lambda d: _var(d, "job_id").update(multi=True), "template-job-rule"),
    "a rank variable whose All lists every rank fails": (
        lambda d: _var(d, "rank").pop("allValue"), "template-job-rule"),
    "a variable that never refreshes fails": (
        lambda d: _var(d, "rank").update(refresh=1), "template-on-time-change-reload-rule"),
    "a variable query that is not label_values fails": (
        lambda d: _var(d, "stage").update(query="query_result(up)"), "template-label-promql-rule"),
    "a panel with a hard-coded data source uid fails": (
        lambda d: _panel(d, "Loss").update(datasource={"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}),
        "panel-datasource-rule"),
    "a query with its own hard-coded data source fails": (
        lambda d: _panel(d, "Loss")["targets"][0].update(datasource={"uid": "abc"}),
        "panel-datasource-rule"),
    "a panel without a description fails": (
        lambda d: _panel(d, "Loss").pop("description"), "panel-title-description-rule"),
    "a description that does not say what healthy looks like fails": (
        lambda d: _panel(d, "Loss").update(description="The loss."), "panel-title-description-rule"),
    "a panel without a title fails": (
        lambda d: _panel(d, "Loss").update(title=""), "panel-title-description-rule"),
    "a panel without a unit fails": (
        lambda d: _panel(d, "Step time")["fieldConfig"]["defaults"].pop("unit"), "panel-units-rule"),
    "a unit Grafana does not know fails": (
        lambda d: _panel(d, "Step time")["fieldConfig"]["defaults"].update(unit="seconds"),
        "panel-units-rule"),
    "a panel without queries fails": (
        lambda d: _panel(d, "Loss").update(targets=[]), "panel-no-targets-rule"),
    "an empty query fails": (_set_expr("Loss", "  "), "panel-no-targets-rule"),
    "invalid PromQL fails": (_set_expr("Loss", 'max by (job_id (train_loss{job_id="$job_id"})'),
                             "target-promql-rule"),
    "a rate over a fixed window fails": (
        _set_expr("Fabric recoveries",
                  'sum by (job_id) (rate(nccl_link_recovery_total{job_id="$job_id"}[5m]))'),
        "target-rate-interval-rule"),
    "an irate over the dashboard's range fails": (
        _set_expr("Fabric recoveries",
                  'sum by (job_id) (irate(nccl_link_recovery_total{job_id="$job_id"}[$__range]))'),
        "target-rate-interval-rule"),
    "a raw counter fails": (
        _set_expr("Fabric recoveries", 'sum by (job_id) (nccl_link_recovery_total{job_id="$job_id"})'),
        "target-counter-agg-rule"),
    "a counter under another function fails": (
        _set_expr("Fabric recoveries",
                  'sum by (job_id) (max_over_time(nccl_link_recovery_total{job_id="$job_id"}[$__range]))'),
        "target-counter-agg-rule"),
    "a histogram _sum read without rate fails": (
        _set_expr("Loss", 'sum by (job_id) (train_step_seconds_sum{job_id="$job_id"})'),
        "target-counter-agg-rule"),
    "a selector without the job matcher fails": (
        _set_expr("Loss", "max by (job_id) (train_loss)"), "target-job-rule"),
    "a job matcher with a fixed value fails": (
        _set_expr("Loss", 'max by (job_id) (train_loss{job_id="job-a"})'), "target-job-rule"),
    "a query of GPU series not joined to the job fails": (
        _set_expr("GPU errors on the job's GPUs",
                  "sum(increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[$__rate_interval]))"),
        "target-job-rule"),
    "a metric that is neither in the contract nor recorded fails": (
        _set_expr("Loss", 'max by (job_id) (train_lossy{job_id="$job_id"})'), "target-known-metric-rule"),
    "a recording rule obsgen does not render fails": (
        _set_expr("Step time", 'job:train_step_seconds:mean1m{job_id="$job_id"}'),
        "target-known-metric-rule"),
}


@pytest.mark.parametrize("case", LINT_FAILS, ids=list(LINT_FAILS))
def test_each_lint_rule_can_fail(case):
    mutate, rule = LINT_FAILS[case]
    cfg = defaults()
    doc = rendered(cfg)["dashboards/overview.json"]
    mutate(doc)
    problems = lint.lint(doc, context(cfg))
    assert any(p.startswith(rule + ": ") for p in problems), problems


def test_every_lint_rule_has_a_failing_case():
    assert {rule for _, rule in LINT_FAILS.values()} == set(lint.RULES)


@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_every_metric_a_panel_reads_is_in_the_contract_or_recorded_by_obsgen(cfg):
    c = CONFIGS[cfg]()
    families = pipeline.families(c)
    metrics = {c.metric(m.key) + s for m in contract.METRICS.values()
               for s in (("_bucket", "_sum", "_count") if m.type == contract.HISTOGRAM else ("",))}
    recorded = {r.name for f in families for r in f.records}
    read = {sel.name for q in dashboards.queries_of(pipeline.render_all(c))
            for sel in lint.selectors(lint.parse(q.expr))}
    assert read and read <= metrics | recorded, read - metrics - recorded
    assert read & recorded, "the panels read no recording rule"


def test_lint_substitutes_variables_outside_strings_only():
    expr = 'rate(x{job_id="$job_id", a=~"${rank:regex}"}[$__rate_interval]) @ $__to'
    assert lint.expand(expr) == ('rate(x{job_id="$job_id", a=~"${rank:regex}"}[11277964s]) '
                                 "@ grafana_var___to")


# structure ----------------------------------------------------------------------------
def test_one_classic_dashboard_per_view_in_tab_order_and_a_provider():
    files = pipeline.render_all(defaults())
    assert [p for p in files if p.startswith("dashboards/")] == (
        [f"dashboards/{v.KEY}.json" for v in dashboards.VIEWS] + [dashboards.PROVISIONING])
    assert [v.KEY for v in dashboards.VIEWS] == ["overview", "dp", "tp", "pp", "fsdp", "ep", "hardware", "recovery"]


def test_uids_are_stable_names_and_unique():
    docs = rendered(defaults())
    assert [d["uid"] for d in docs.values()] == [f"obsgen-{v.KEY}" for v in dashboards.VIEWS]
    assert [d["uid"] for d in rendered(custom()).values()] == [f"train-a-{v.KEY}" for v in dashboards.VIEWS]
    assert all(len(d["uid"]) <= 40 for d in docs.values())


def test_the_links_bar_acts_as_tabs():
    for path, doc in rendered(custom()).items():
        assert doc["tags"] == ["training-a"], path
        assert doc["links"] == [{
            "title": "Training views", "type": "dashboards", "icon": "external link", "tooltip": "",
            "tags": ["training-a"], "asDropdown": False, "targetBlank": False,
            "includeVars": True, "keepTime": True}], path


def test_variables_on_every_dashboard():
    for path, doc in rendered(custom()).items():
        names = [v["name"] for v in doc["templating"]["list"]]
        stage = ["stage"] if path.endswith(("overview.json", "pp.json")) else []
        rank = [] if path.endswith("recovery.json") else ["rank"]  # job-level panels only
        assert names == ["datasource", "cluster", "env", "job_id", *rank, *stage], path
        env = next(v for v in doc["templating"]["list"] if v["name"] == "env")
        assert env["query"] == 'label_values(job:train_world_size:max{cluster="a", env=~"prod|staging"}, env)'
        job = next(v for v in doc["templating"]["list"] if v["name"] == "job_id")
        assert job["query"].endswith(", run)") and "$job_id" not in job["query"]
        if not rank:
            continue
        rank = next(v for v in doc["templating"]["list"] if v["name"] == "rank")
        assert (rank["multi"], rank["includeAll"], rank["allValue"]) == (True, True, ALL)
        assert rank["query"].endswith(', global_rank)')


def test_custom_config_reaches_every_query():
    for q in dashboards.queries_of(pipeline.render_all(custom())):
        tree = lint.parse(q.expr)
        for sel in lint.selectors(tree):
            matchers = {(m.name, m.value) for m in sel.matchers.matchers}
            assert {("cluster", "a"), ("env", "prod|staging"), ("cluster", "$cluster"),
                    ("env", "$env")} <= matchers, (q.panel, sel)
            assert not {name for name, _ in matchers} & {"job_id", "rank"}, (q.panel, sel)


def test_every_panel_has_a_title_description_and_unit():
    for doc in rendered(defaults()).values():
        for p in doc["panels"]:
            if p["type"] != "row":
                assert p["title"] and "Healthy" in p["description"] and p["fieldConfig"]["defaults"]["unit"]


def test_v2_is_one_dashboard_with_a_tab_per_view():
    files = pipeline.render_all(v2())
    assert [p for p in files if p.startswith("dashboards/")] == [
        "dashboards/training.json", dashboards.PROVISIONING]
    doc = json.loads(files["dashboards/training.json"])
    assert doc["metadata"] == {"name": "obsgen-training"}
    layout = doc["spec"]["layout"]
    assert layout["kind"] == "TabsLayout"
    assert [t["spec"]["title"] for t in layout["spec"]["tabs"]] == ["Overview", "DP", "TP", "PP", "FSDP", "EP",
                                                                  "Hardware", "Recovery"]
    refs = [i["spec"]["element"]["name"] for t in layout["spec"]["tabs"]
            for r in t["spec"]["layout"]["spec"]["rows"] for i in r["spec"]["layout"]["spec"]["items"]]
    assert sorted(refs) == sorted(doc["spec"]["elements"]) and len(refs) == len(set(refs))
    names = [v["spec"]["name"] for v in doc["spec"]["variables"]]
    assert names == ["datasource", "job_id", "rank", "stage"]


def test_v2_shows_the_same_queries_as_the_classic_dashboards():
    def key(q):
        return (q.panel, q.ref, q.expr, q.instant, q.interval)
    classic_qs = dashboards.queries_of(pipeline.render_all(defaults()))
    v2_qs = dashboards.queries_of(pipeline.render_all(v2()))
    assert sorted(map(key, classic_qs)) == sorted(map(key, v2_qs))


def test_provisioning_file():
    text = pipeline.render_all(custom())[dashboards.PROVISIONING]
    assert yaml.safe_load(text) == {"apiVersion": 1, "providers": [{
        "name": "train-a", "orgId": 1, "type": "file", "disableDeletion": False,
        "allowUiUpdates": False, "updateIntervalSeconds": 60,
        "options": {"path": "/srv/grafana/dashboards", "foldersFromFilesStructure": True}}]}


def test_trace_links_only_when_a_trace_data_source_is_configured():
    plain = rendered(defaults())["dashboards/dp.json"]
    assert all("links" not in p for p in plain["panels"])
    for kind, needle in (("tempo", "resource.service.name"), ("jaeger", "%22service%22%3A%22megatron-lm")):
        doc = rendered(defaults(trace_datasource_uid="traces1", trace_datasource_type=kind))["dashboards/dp.json"]
        for p in doc["panels"]:
            if p["type"] == "row":
                continue
            (link,) = p["links"]
            assert link["url"].startswith("/explore?") and "traces1" in link["url"]
            assert needle in link["url"] and "nemo.run.id" in link["url"]
            assert "${job_id:percentencode}" in link["url"] and "${__from}" in link["url"]


def test_dashboards_can_be_turned_off():
    files = pipeline.render_all(defaults(enabled=False))
    assert not [p for p in files if p.startswith("dashboards/")]


def test_a_selector_label_may_not_take_a_variables_name():
    cfg = defaults()
    cfg.data["selector"] = {"rank": "0"}
    with pytest.raises(pipeline.passes.DefinitionError) as err:
        pipeline.render_all(cfg)
    assert err.value.problems[0].startswith("selector: label 'rank' clashes with the dashboards' variable $rank")


# panel queries, for e2e tests and benchmarks -------------------------------------------
def test_panel_queries_list_every_query_of_every_panel():
    qs = dashboards.panel_queries()
    docs = rendered(defaults())
    targets = [(d["title"], p["title"], t["refId"]) for d in docs.values()
               for p in d["panels"] for t in p.get("targets", [])]
    assert [(q.dashboard, q.panel, q.ref) for q in qs] == targets
    assert len({q.panel for q in qs}) > 40


def test_panel_queries_expand_to_runnable_promql():
    for q in dashboards.panel_queries(custom()):
        promql = q.promql("job-a", rank="0|1", extra={"cluster": "a", "env": "prod"})
        assert "$" not in promql.replace('"$1"', ""), promql
        tree = lint.parse(promql)
        for sel in lint.selectors(tree):
            values = {m.name: m.value for m in sel.matchers.matchers}
            if "run" in values:
                assert values["run"] == "job-a"


# golden files -------------------------------------------------------------------------
@pytest.mark.parametrize("path", [f"dashboards/{v.KEY}.json" for v in dashboards.VIEWS])
def test_custom_dashboards_match_golden(path):
    assert_golden(GOLDEN / "custom" / path, pipeline.render_all(custom())[path])


def test_v2_dashboard_matches_golden():
    assert_golden(GOLDEN / "dashboards-v2" / "training.json",
                  pipeline.render_all(v2())["dashboards/training.json"])


# dashboards.records --------------------------------------------------------------------
PANEL_RECORDS = {r.name for f in registry.build(records()) if f.name == registry.PANEL_RECORDS
                 for r in f.records}
# Panels that read the panels family with dashboards.records, and the raw series they
# read without it.
RECORDED_PANELS = {
    "Time inside TP collectives across ranks": "nccl_collective_duration_seconds_sum",
    "Time inside the DP all-reduce across ranks": "nccl_collective_duration_seconds_sum",
    "Arrival skew vs transfer": "nccl_collective_duration_seconds_sum",
    "SM-active across the job's GPUs": "DCGM_FI_PROF_SM_ACTIVE",
    "NVLink throughput per GPU": "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "GPU errors on the job's GPUs": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "Exposed vs overlapped communication per step": "train_exposed_comm_seconds_sum",
    "InfiniBand transmit per host during all-reduce": "node_infiniband_rate_bytes_per_second",
}


def _reads(qs, title) -> str:
    return "\n".join(q.expr for q in qs if q.panel == title)


def test_with_dashboards_records_the_slowest_panels_read_the_panels_family():
    on = dashboards.queries_of(pipeline.render_all(records()))
    off = dashboards.queries_of(pipeline.render_all(defaults()))
    for title, raw in RECORDED_PANELS.items():
        reads = re.compile(rf"(?<![\w:]){raw}(?![\w:])")  # the raw series, not a record's name
        assert reads.search(_reads(off, title)) and not reads.search(_reads(on, title)), title
        assert any(name in _reads(on, title) for name in PANEL_RECORDS), title
    assert not [q.panel for q in off if any(name in q.expr for name in PANEL_RECORDS)]


def test_the_panels_family_is_rendered_only_with_dashboards_records():
    assert "rules/panels.yaml" not in pipeline.render_all(defaults())
    assert "interval: 5m" in pipeline.render_all(records())["rules/panels.yaml"]
    cfg = records()
    cfg.data["families"] = ["stragglers"]
    names = [f.NAME for f in registry.selected(cfg)]
    assert names == ["stragglers", "ranks", "gpus", "panels"]  # what panels reads
    cfg.data["families"] = ["panels"]  # asked for without dashboards.records: not rendered
    cfg.data["dashboards"]["records"] = False
    assert "panels" not in [f.NAME for f in registry.selected(cfg)]
    cfg = records()
    cfg.data["dashboards"]["enabled"] = False  # no dashboards, nothing reads the records
    assert "rules/panels.yaml" not in pipeline.render_all(cfg)


def test_panels_over_every_hosts_raw_series_are_queried_at_a_1m_min_interval():
    qs = dashboards.queries_of(pipeline.render_all(defaults()))
    slow = {q.panel for q in qs if q.interval == "1m"}
    assert {"ECC errors per host", "NVLink errors per host", "GPUs held below full clocks, by reason",
            "NCCL link recoveries per rank", "Bytes per second per parallel group",
            "InfiniBand transmit per host during all-reduce"} <= slow
    doc = rendered(defaults())["dashboards/hardware.json"]
    assert _panel(doc, "ECC errors per host")["interval"] == "1m"
    assert "interval" not in _panel(doc, "Hottest GPU per host")
    on = {q.panel for q in dashboards.queries_of(pipeline.render_all(records())) if q.interval}
    assert "InfiniBand transmit per host during all-reduce" not in on  # reads records only
