"""Rendering: deterministic, generated headers, valid PromQL, config applied everywhere."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import promql_parser
import pytest
import yaml

from obsgen import config, contract, pipeline, registry
from obsgen.render import MARKER

from .golden import assert_golden

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
NAMES = registry.alert_names()


def defaults() -> config.Config:
    return config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")


def custom() -> config.Config:
    return config.load(GOLDEN / "custom.yaml", alert_names=NAMES)


def rules(files: dict[str, str]):
    for path, text in sorted(files.items()):
        if path.startswith("rules/"):
            for group in yaml.safe_load(text)["groups"]:
                for rule in group["rules"]:
                    yield path, rule


def test_render_is_deterministic():
    assert pipeline.render_all(defaults()) == pipeline.render_all(defaults())


def test_every_file_starts_with_a_generated_header_without_version_or_time():
    """The notice sits in the first 400 bytes, where `check` looks for it (a YAML file's
    header comment, the description that leads a JSON dashboard), and names no version
    and no time."""
    for path, text in pipeline.render_all(defaults()).items():
        head = text.encode()[:400].decode(errors="ignore")
        assert MARKER in head, path
        notice = head[head.index(MARKER):].split("`obsgen render`", 1)[0]
        assert not re.search(r"\d{4}-\d\d-\d\d|\bv?\d+\.\d+\.\d+\b", notice), path


def test_the_generated_notice_names_the_command_a_users_repository_has():
    """A user's repository has obsgen.yaml and the obsgen command, no Makefile: the notice
    tells them to change obsgen.yaml and run `obsgen render`, never `make render`."""
    for path, text in pipeline.render_all(defaults()).items():
        head = text.encode()[:400].decode(errors="ignore")
        assert "make render" not in head, path
        assert "obsgen.yaml" in head and "`obsgen render`" in head, path


def test_one_rule_file_per_family_in_registry_order():
    files = pipeline.render_all(defaults())
    assert [p for p in files if p.startswith("rules/")] == [f"rules/{f.NAME}.yaml" for f in registry.default_families()]


def test_facts_have_their_own_group_at_the_facts_interval_and_nothing_else_does():
    """A family's facts (job shape and placement) go to obsgen-<family>-facts at
    facts_interval (or its family's facts_intervals entry, when it has one), after the family's
    group; its signals and alerts stay at
    rule_interval (or their family's interval). With facts_interval null, every family is
    one group as before."""
    data = copy.deepcopy(config.DEFAULTS)
    data["rule_interval"] = "30s"
    cfg = config.Config(data, "(test)")
    facts = {r.name for f in registry.build(cfg) for r in f.records if r.fact}
    assert facts >= {"job:train_world_size:max", "job_gpu:kube_pod_gpu:info"}
    for path, text in pipeline.render_all(cfg).items():
        if not path.startswith("rules/"):
            continue
        groups = yaml.safe_load(text)["groups"]
        family = Path(path).stem
        main = config.DEFAULTS["family_intervals"].get(family) or "30s"
        assert groups[0]["name"] == f"obsgen-{family}" and groups[0]["interval"] == main
        assert not {r.get("record") for r in groups[0]["rules"]} & facts, path
        every = config.DEFAULTS["facts_intervals"].get(family) or "2m"
        for g in groups[1:]:
            assert (g["name"], g["interval"]) == (f"obsgen-{family}-facts", every), path
            assert {r.get("record") for r in g["rules"]} <= facts, path
    data["rule_interval"] = "5m"  # facts are never evaluated more often than the rules
    groups = yaml.safe_load(pipeline.render_all(config.Config(data, "(test)"))["rules/gpus.yaml"])["groups"]
    assert [g["interval"] for g in groups] == ["5m", "5m"]
    data["facts_interval"] = None
    for path, text in pipeline.render_all(config.Config(data, "(test)")).items():
        if path.startswith("rules/"):
            assert len(yaml.safe_load(text)["groups"]) == 1, path


def test_records_of_a_group_of_their_own_get_it_at_the_familys_interval_and_no_empty_group():
    data = copy.deepcopy(config.DEFAULTS)
    data["dashboards"]["records"] = True
    data["family_intervals"]["panels"] = "10m"
    groups = yaml.safe_load(pipeline.render_all(config.Config(data, "(test)"))["rules/panels.yaml"])["groups"]
    assert [(g["name"], g["interval"]) for g in groups] == [
        (f"obsgen-panels-{v}", "10m") for v in ("tp", "dp", "gpus", "errors", "fsdp", "comm",
                                                "stragglers")]
    # side by side: no group reads what another group of the family records
    recorded = {r["record"]: g["name"] for g in groups for r in g["rules"]}
    for g in groups:
        for r in g["rules"]:
            assert not {n for n, owner in recorded.items() if owner != g["name"] and n in r["expr"]}, r


def test_a_family_interval_sets_its_groups_never_shorter_than_the_rules_and_null_clears_it():
    """family_intervals evaluates a family's group (and its facts group, when that would
    be shorter) less often than rule_interval; rule_interval wins when it is longer, a
    null entry puts the family back at rule_interval, and null for the key every family."""
    def intervals(data, family):
        text = pipeline.render_all(config.Config(data, "(test)"))[f"rules/{family}.yaml"]
        return [(g["name"], g.get("interval")) for g in yaml.safe_load(text)["groups"]]

    data = copy.deepcopy(config.DEFAULTS)
    data.update(rule_interval="30s", facts_interval="1m")
    for part in ("docs", "scenario_tests", "dashboards"):  # the rules are what it reads
        data[part]["enabled"] = False
    data["family_intervals"] = {"pipeline": "3m", "gpus": None}
    assert intervals(data, "pipeline") == [("obsgen-pipeline", "3m"), ("obsgen-pipeline-facts", "3m")]
    assert intervals(data, "gpus") == [("obsgen-gpus", "30s"), ("obsgen-gpus-facts", "1m")]
    assert intervals(data, "gradients") == [("obsgen-gradients", "30s")]
    data["rule_interval"] = "5m"
    assert intervals(data, "pipeline") == [("obsgen-pipeline", "5m"), ("obsgen-pipeline-facts", "5m")]
    data["rule_interval"] = None  # Prometheus' global interval for the rest
    assert intervals(data, "pipeline")[0] == ("obsgen-pipeline", "3m")
    assert intervals(data, "gradients") == [("obsgen-gradients", None)]
    data.update(rule_interval="30s", family_intervals=None)
    assert intervals(data, "pipeline") == [("obsgen-pipeline", "30s"), ("obsgen-pipeline-facts", "1m")]


@pytest.mark.parametrize("cfg", [defaults, custom], ids=["defaults", "custom"])
def test_every_expression_parses_as_promql(cfg):
    for path, rule in rules(pipeline.render_all(cfg())):
        promql_parser.parse(rule["expr"])  # raises on a syntax error


@pytest.mark.promtool
def test_windows_at_their_edges_render_rules_promtool_accepts(tmp_path):
    """A persistence window equal to the rate window once rendered `offset 0s`, which
    promtool 2.42 refuses (found by `make fuzz`); a straggler spell, window and hold of one
    evaluation each render ranges promtool accepts too."""
    from obsgen import promtool

    data = copy.deepcopy(config.DEFAULTS)
    data["windows"].update(rate="30m", straggler_recurrence="30m", straggler="30s",
                           straggler_spell="30s", straggler_hold="30s", straggler_warmup="30s")
    files = pipeline.render_all(config.Config(data, "(edges)"))
    paths = []
    for rel, text in files.items():
        if rel.startswith("rules/"):
            paths.append(tmp_path / Path(rel).name)
            paths[-1].write_text(text)
    result = promtool.check_rules(paths)
    assert result.ok, result.output


def test_every_alert_carries_routing_labels_and_annotations():
    for path, rule in rules(pipeline.render_all(defaults())):
        if "alert" not in rule:
            continue
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule["labels"]["team"] in ("platform", "workload"), rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}, rule["alert"]
        assert rule["annotations"]["runbook"].startswith(f"docs/runbooks/{rule['alert']}.md ")
        assert "{{ $labels.job_id }}" in rule["annotations"]["description"], rule["alert"]


def test_alert_names_are_the_interface():
    assert NAMES == [
        "Train_Straggler_Persistent", "Train_Straggler_TPGroup", "Train_Straggler_Mapping",
        "Train_Straggler_Transient", "Train_GradientExplosion",
        "Train_GradientNonFinite", "Train_GradientVanishing", "Train_Bubble_Excess",
        "Train_NoCheckpoints", "Train_CheckpointOverhead", "Train_RankFailed",
        "Train_TP_Imbalance", "Train_GPU_ECC", "Train_GPU_Unmapped", "Train_NCCL_LinkRecovery", "Train_IB_Asymmetry",
        "Train_RestartLoop", "Train_CheckpointStorage_Slow", "Train_StepTime_Regression",
        "Train_ETA_Slip", "Train_Straggler_LateArrival"]


def test_recorded_series_follow_level_metric_operation():
    for path, rule in rules(pipeline.render_all(defaults())):
        if "record" in rule:
            assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z_0-9]+", rule["record"]), rule["record"]


# The series that map an exporter's instance or a pod to a host or a job: joining on
# instance or pod is how hardware reaches a job; grouping by them is not.
MAPS = {"instance": "node_uname_info", "pod": "kube_pod_labels"}


def test_rules_never_group_by_instance_or_pod():
    for path, rule in rules(pipeline.render_all(defaults())):
        for clause, operand in re.findall(r"\bby\s*\(([^)]*)\)\s*\(\s*([a-zA-Z_:]*)", rule["expr"]):
            grouped = {"instance", "pod"} & {l.strip() for l in clause.split(",")}
            # ... except to collapse duplicates of the map itself (two scrapes of it)
            assert grouped <= {l for l in grouped if MAPS[l] == operand}, rule["expr"]
        for clause in re.findall(r"\bon\s*\(([^)]*)\)", rule["expr"]):
            for label in {"instance", "pod"} & {l.strip() for l in clause.split(",")}:
                assert MAPS[label] in rule["expr"], f"joins on {label} without its map: {rule['expr']}"


def test_no_quantiles_from_buckets_in_rules():
    for path, rule in rules(pipeline.render_all(defaults())):
        assert "histogram_quantile" not in rule["expr"] and "_bucket" not in rule["expr"]


def test_custom_config_applies_everywhere():
    files = pipeline.render_all(custom())
    for path, rule in rules(files):
        expr = rule["expr"]
        # renamed metrics and labels only (recorded names keep obsgen's own names)
        raw = re.sub(r"\b[a-z_]+:[a-z_]+:[a-z_0-9]+", "", expr)
        assert "train_compute_seconds" not in raw and "train_world_size" not in raw, expr
        assert not re.search(r"\bjob_id\b|\brank\b", expr), expr
        # every selector carries the extra matchers
        for sel in re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", expr):
            assert 'cluster="a"' in sel[1] and 'env=~"prod|staging"' in sel[1], sel
        # and every aggregation keeps the extra selector's labels
        for clause in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr):
            if clause.strip():
                assert clause.startswith("cluster, env"), clause
        if "alert" in rule:
            assert rule["labels"]["source"] == "obsgen"
            assert rule["labels"]["team"] in ("ml-infra", "ml-research")
            assert rule["annotations"]["runbook_url"] == f"https://runbooks.example.com/training/{rule['alert']}"
    by_name = {r["alert"]: r for _, r in rules(files) if "alert" in r}
    assert by_name["Train_Straggler_Persistent"]["for"] == "5m"
    assert by_name["Train_Straggler_Persistent"]["labels"]["severity"] == "critical"
    assert by_name["Train_CheckpointOverhead"]["labels"]["team"] == "ml-research"
    assert "{{ $labels.run }}" in by_name["Train_RankFailed"]["annotations"]["description"]


@pytest.mark.parametrize("path", [f"rules/{f.NAME}.yaml" for f in registry.default_families()])
def test_custom_render_matches_golden(path):
    assert_golden(GOLDEN / "custom" / path, pipeline.render_all(custom())[path])


def test_selector_values_are_escaped():
    cfg = defaults()
    cfg.data["selector"] = {"cluster": 'a"b\\c\nd'}
    for _, rule in rules(pipeline.render_all(cfg)):
        assert 'cluster="a\\"b\\\\c\\nd"' in rule["expr"]
        promql_parser.parse(rule["expr"])


def test_contract_names_are_written_only_in_contract():
    """No module but contract.py spells a metric or recorded-series name as a string, and
    no alert family spells a label name: they go through contract.M, R and L."""
    metrics = set(contract.METRICS) | {r.name.split("{")[0] for r in contract.RECORDED.values()}
    labels = set(contract.LABELS)
    for py in (ROOT / "obsgen").rglob("*.py"):
        if py.name == "contract.py":
            continue
        strings = set(re.findall(r"['\"]([A-Za-z_:][A-Za-z0-9_:]*)['\"]", py.read_text()))
        assert not strings & metrics, f"{py.relative_to(ROOT)} spells {strings & metrics}"
        if py.parent.name == "alerts":
            assert not strings & labels, f"{py.relative_to(ROOT)} spells {strings & labels}"


NEWEST_MEAN = {
    "the default family interval of 30s reads the means of the last 45s":
        ({}, "45s"),
    "a family every 2m reads the last 3m":
        ({"family_intervals": {"stragglers": "2m"}}, "3m"),
    "a family left at a rule_interval of 30s reads the last 45s":
        ({"rule_interval": "30s", "family_intervals": {"stragglers": None}}, "45s"),
    "a family left to Prometheus' global interval assumes its default of 1m":
        ({"rule_interval": None, "family_intervals": None}, "1m30s"),
}


@pytest.mark.parametrize("change,window", NEWEST_MEAN.values(), ids=NEWEST_MEAN.keys())
def test_the_straggler_flag_reads_each_ranks_newest_mean(change, window):
    """The flag, the baseline and the hold read the busy means as their newest evaluation
    wrote them: within one and a half of the family's intervals, so a record read one
    evaluation late is still there and an ended one is gone after one more. Only the mean
    reads the raw counts, to record only the ranks scraped within that window (one missed
    scrape does not end a rank); the hold keeps a page for the ranks with a recent mean,
    and through a stop of the whole job, whose baseline of the same means ends with them."""
    data = copy.deepcopy(config.DEFAULTS)
    data.update(change)
    text = pipeline.render_all(config.Config(data, "(test)"))["rules/stragglers.yaml"]
    rules = {r.get("record"): r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]}
    read = r"last_over_time\(job_rank:train_busy_seconds:mean1m\[([0-9a-z]+)\]\)"
    mean = "job_rank:train_busy_seconds:mean1m"
    for name, reads in (("job_rank:train_straggler:flag1m", 3),
                        ("job_stage:train_busy_seconds:baseline1m", 2),
                        ("job_rank:train_straggler:held12m", 1)):
        assert re.findall(read, rules[name]) == [window] * reads, name
        # every read of the means goes through the window: an instant read lingers on a
        # ruler that loses staleness markers
        assert rules[name].count(mean) == reads, name
        assert "train_compute_seconds" not in rules[name], name
    assert re.search(r"> 1\.07\nand on \(job_id, stage\) job_stage:train_straggler:settled5m$",
                     rules["job_rank:train_straggler:flag1m"])
    assert rules[mean].count(f"present_over_time(train_compute_seconds_count[{window}])") == 1


def test_on_prometheus_the_flag_reads_the_baseline_record_and_the_mean_no_liveness():
    """ruler: prometheus renders for a ruler that reads a record as soon as the rule above
    it wrote it: the flag divides the newest means by the baseline recorded at the same
    evaluation (one read of the means, not three), the mean's rate window alone ends a
    rank, and the mesh positions and the moving excess read one join of their few ranks
    with the mesh. Only the straggler family reads differently; ruler: any keeps all."""
    def rules(ruler):
        data = copy.deepcopy(config.DEFAULTS)
        data["ruler"] = ruler
        out = pipeline.render_all(config.Config(data, "(test)"))
        return out, {r.get("record") or r.get("alert"): r["expr"] for f, text in out.items()
                     if f.startswith("rules/") for g in yaml.safe_load(text)["groups"]
                     for r in g["rules"]}

    (out_any, any_), (out_prom, prom) = rules("any"), rules("prometheus")
    flag, mean = "job_rank:train_straggler:flag1m", "job_rank:train_busy_seconds:mean1m"
    newest = "last_over_time(job_rank:train_busy_seconds:mean1m[45s])"
    assert prom[flag].count(newest) == 1 and any_[flag].count(newest) == 3
    assert "(job_stage:train_busy_seconds:baseline1m > 0) > 1.07" in prom[flag]
    assert "baseline1m" not in any_[flag]
    assert "present_over_time" not in prom[mean] and "present_over_time" in any_[mean]
    placed = "job_rank:train_straggler:placed"
    # the held and the moving ranks joined with the mesh once, for the positions and the
    # moving excess to read
    assert set(prom) - set(any_) == {placed} and placed in prom["job_rank:train_straggler:positions"]
    assert placed in prom["job:train_straggler_moving:excess"]
    assert prom[placed].count("job_rank:train_rank_mesh:place") == 1
    assert {k for k in any_ if prom[k] != any_[k]} == {
        flag, mean, "job_rank:train_straggler:positions", "job:train_straggler_moving:excess"}
    changed = {f for f in out_prom if out_prom[f] != out_any[f]}
    assert {f for f in changed if not f.startswith("docs/")} == {"rules/stragglers.yaml"}
