"""The scale benchmark's parts that can be checked without timing anything: the streamed
OpenMetrics (promtool reads it, counters never fall, buckets are cumulative), the naive
suite (the document's rules plus the group_left fix, which evaluates), and the order in
which recorded series are backfilled. Performance itself is measured by `make bench`,
never asserted here."""
from __future__ import annotations

import io
import math
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from benchmarks import naive, scale, stream
from obsgen import promtool

ROOT = Path(__file__).resolve().parent.parent
# Section 12 of the reference document, carried in the repository with its source named.
SECTION_12 = ROOT / "benchmarks" / "reference" / "section-12.txt"
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+)$')


def _tiny(**kw) -> stream.Bench:
    return stream.Bench(16, pp=2, microbatches=8, **kw)


def _parse(text: str) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """{(name, labels): [(ts, value)]} in file order; asserts families are contiguous."""
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    order: list[str] = []
    lines = text.splitlines()
    assert lines[-1] == "# EOF"
    for line in lines[:-1]:
        m = _LINE.match(line)
        assert m, line
        name, labels, value, ts = m.groups()
        if not order or order[-1] != name:
            assert name not in order, f"family {name} is not contiguous"
            order.append(name)
        series.setdefault((name, labels), []).append((int(ts), float(value)))
    return series


@pytest.fixture(scope="module")
def tiny_text() -> str:
    fh = io.StringIO()
    stream.write(_tiny(), fh)
    return fh.getvalue()


def test_points_are_in_time_order_on_the_scrape_grid(tiny_text):
    for key, points in _parse(tiny_text).items():
        ts = [t for t, _ in points]
        assert ts == sorted(set(ts)), key
        assert all(b - a == stream.SCRAPE for a, b in zip(ts, ts[1:])), key


def test_counters_never_decrease_and_buckets_are_cumulative(tiny_text):
    series = _parse(tiny_text)
    for (name, labels), points in series.items():
        if name.endswith(("_total", "_count", "_sum", "_bucket")):
            values = [v for _, v in points]
            assert values == sorted(values), (name, labels)
    # per histogram series and time: buckets grow with le and end at _count
    hist = defaultdict(dict)
    for (name, labels), points in series.items():
        if name.endswith("_bucket"):
            le = re.search(r'le="([^"]+)"', labels).group(1)
            base = (name[:-len("_bucket")], re.sub(r',le="[^"]+"', "", labels))
            hist[base][math.inf if le == "+Inf" else float(le)] = dict(points)
    assert hist
    for (name, labels), buckets in hist.items():
        count = dict(series[(name + "_count", labels)])
        for t, total in count.items():
            cumulative = [buckets[le][t] for le in sorted(buckets) if t in buckets[le]]
            assert cumulative == sorted(cumulative), (name, labels, t)
            if cumulative:
                assert cumulative[-1] == total, (name, labels, t)


def test_series_per_rank_are_what_bench_series_says(tiny_text):
    b = _tiny()
    per_family = defaultdict(int)
    for name, _ in _parse(tiny_text):
        per_family[name] += 1
    for family, per_rank in b.series().items():
        assert per_family[family] == per_rank * b.ranks, family


def test_unread_series_carry_only_the_short_history():
    b = _tiny()
    fh = io.StringIO()
    stream.write(b, fh, read=frozenset({"train_step_seconds_sum"}))
    series = _parse(fh.getvalue())
    lengths = {name: len(points) for (name, _), points in series.items()}
    assert lengths["train_step_seconds_sum"] == b.rank_history // stream.SCRAPE + 1
    assert lengths["train_compute_seconds_bucket"] == b.unread_history // stream.SCRAPE + 1
    assert lengths["train_grad_norm"] == b.job_history // stream.SCRAPE + 1


def test_shards_are_whole_hosts_and_cover_every_rank():
    b = stream.Bench(64, pp=4)
    parts = stream.shards(b, 20)
    assert [len(r) for r in parts] == [16, 16, 16, 16]
    assert [r for p in parts for r in p] == list(range(64))


@pytest.mark.promtool
@pytest.mark.long  # a promtool TSDB backfill: make long, CI
def test_promtool_backfills_the_openmetrics(tiny_text, tmp_path):
    src = tmp_path / "tiny.om"
    src.write_text(tiny_text)
    res = subprocess.run([promtool.find(), "tsdb", "create-blocks-from", "openmetrics",
                          str(src), str(tmp_path / "data")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    # every series has a point at the end, so the last block holds all of them
    per_block = [int(line.split()[-2]) for line in res.stdout.splitlines()[1:] if line.strip()]
    assert max(per_block) == len(_parse(tiny_text))


# the naive suite ----------------------------------------------------------------------------
def test_the_naive_rules_are_the_documents_section_12_verbatim():
    text = SECTION_12.read_text(encoding="utf-8")
    section = text[text.index("\n----\n") + 6:]
    assert section.startswith("12. Distributed Training Alert Suite")
    assert naive.DOCUMENT in section


def test_the_naive_suite_changes_the_document_only_by_group_left():
    fixed = naive.fixed_text()
    assert fixed != naive.DOCUMENT
    assert fixed.replace("group_left ", "", 1) == naive.DOCUMENT
    doc = naive.rules_file()
    assert [r["alert"] for g in doc["groups"] for r in g["rules"]] == list(naive.FAMILY)
    assert [g["name"] for g in doc["groups"]] == [f"naive-{f}" for f in naive.FAMILY.values()]


@pytest.mark.promtool
def test_the_fixed_straggler_rule_evaluates_where_the_documents_fails(tmp_path):
    rules = tmp_path / "naive.yaml"
    rules.write_text(naive.dump())
    check = subprocess.run([promtool.find(), "check", "rules", str(rules)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    bucket = 'train_step_seconds_bucket{job_id="a",rank="%d",le="+Inf"}'
    series = [{"series": bucket % r, "values": "0+20x120"} for r in (0, 1)]
    doc_expr = yaml.safe_load(naive.DOCUMENT)[0]["expr"]
    fixed_expr = yaml.safe_load(naive.fixed_text())[0]["expr"]
    for expr, ok in ((doc_expr, False), (fixed_expr, True)):
        test = tmp_path / "t.yaml"
        test.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "30s", "tests": [{
            "interval": "30s", "input_series": series,
            "promql_expr_test": [{"expr": expr, "eval_time": "50m", "exp_samples": [
                {"labels": '{job_id="a",rank="%d"}' % r, "value": 7} for r in (0, 1)]}]}]}))
        res = subprocess.run([promtool.find(), "test", "rules", str(test)],
                             capture_output=True, text=True, cwd=tmp_path)
        out = res.stdout + res.stderr
        assert (res.returncode == 0) == ok, out
        assert ("many-to-one matching must be explicit" in out) == (not ok), out


# the harness --------------------------------------------------------------------------------
def test_recorded_series_are_backfilled_after_the_series_they_read():
    rules = scale.obsgen_rules(scale.default_config())
    lv = scale.levels(rules)
    level_of = {r.name: i for i, rules_ in enumerate(lv) for r in rules_}
    assert set(level_of) == {r.name for r in rules if r.kind == "record"}
    for rule in (r for r in rules if r.kind == "record"):
        for dep in scale.identifiers(rule.expr) & set(level_of) - {rule.name}:
            assert level_of[dep] < level_of[rule.name], (rule.name, dep)
    assert len(lv) >= 4  # mean -> median -> ratio -> flag -> transient count


def test_every_series_a_measured_query_reads_is_generated():
    cfg = scale.default_config()
    rec_rules, rec_panels = scale.records_suites(scale.panels(cfg))
    exprs = [r.expr for r in scale.obsgen_rules(cfg) + scale.naive_rules() + rec_rules]
    exprs += [scale.panel_expr(q, "bench") for q in scale.panels(cfg) + rec_panels]
    read = scale.read_families(exprs)
    recorded = {r.name for r in scale.obsgen_rules(cfg) + rec_rules if r.kind == "record"}
    written = set(_tiny().series()) | {"train_grad_norm", "train_loss", "train_nonfinite", "ALERTS",
                                       *stream.NAIVE_JOB_SERIES}
    from obsgen.contract import METRICS
    contract = set(METRICS) | {m + s for m in METRICS for s in ("_bucket", "_sum", "_count")}
    missing = {n for n in read & contract if n not in written} - recorded
    # the job is dense (TP x PP x DP): no experts; FSDP and EP panels read collectives
    # of groups it does not run, which is a label value, not a series name. It never
    # restarted, so rank 0 exports no recovery time or checkpoint age at failure.
    assert missing == {"moe_expert_tokens_total", "job_recovery_seconds",
                       "job_checkpoint_age_at_failure_seconds"}


def test_a_rank_publishes_what_obsgen_plan_counts_for_the_same_shape():
    from obsgen import plan
    for b in (_tiny(), stream.Bench(256), stream.Bench(64, pp=1, tp=1)):
        lines = plan.plan(b.shape)
        # rank 0 exports these after a restart only; the benchmark job never restarted
        after_restart = {"job_recovery_seconds", "job_checkpoint_age_at_failure_seconds"}
        per_rank = {l.name: l.per_unit for l in lines if l.scope in ("rank", "gpu")
                    and l.type != "recorded" and l.per_unit and l.name not in after_restart}
        # kube-state-metrics' pod series are per pod (one per rank here), not per host
        per_host = {l.name: l.per_unit for l in lines if l.scope == "host" and l.per_unit
                    and l.type != "recorded"
                    and not l.name.startswith("kube_")}
        mine = b.series()
        for name, per in per_rank.items():
            ours = sum(v for k, v in mine.items()
                       if k == name or k in (name + "_bucket", name + "_sum", name + "_count"))
            assert ours == per, (b.shape, name)
        for name, per in per_host.items():
            ours = b.ranks_per_node * sum(
                v for k, v in mine.items()
                if k == name or k in (name + "_bucket", name + "_sum", name + "_count"))
            assert ours == per, (b.shape, name)


def test_a_facts_group_costs_the_ruler_its_time_scaled_by_its_interval():
    """Totals are ruler time per 30 s: a group evaluated every 2m counts a quarter, and a
    family's facts group belongs to the family (for the comparison with the naive rule)."""
    from benchmarks import measures, scale

    rules = {r.group: r.interval for r in scale.obsgen_rules(scale.default_config())}
    assert rules["obsgen-gpus"] == 60 and rules["obsgen-gpus-facts"] == 120 and rules["obsgen-ranks"] == 30
    size = {"groups": {"obsgen-gpus": {"suite": "obsgen", "ms": 800.0, "interval": 30},
                       "obsgen-gpus-facts": {"suite": "obsgen", "ms": 400.0, "interval": 120},
                       "naive-ranks": {"suite": "naive", "ms": 50.0}}}
    assert measures.total_ms(size, "obsgen") == 900.0
    assert measures.once_ms(size, "obsgen") == 1200.0
    assert measures.total_ms(size, "naive") == 50.0
    assert measures.family("obsgen-gpus-facts") == measures.family("obsgen-gpus") == "gpus"


def test_a_panel_is_queried_at_its_min_interval_with_grafanas_rate_interval():
    from benchmarks import scale
    from obsgen.dashboards import PanelQuery

    def q(interval):
        return PanelQuery("d", "u", "p", "A", "rate(x[$__rate_interval])", False, interval)
    assert (scale.panel_step(q("")), scale.panel_expr(q(""), "j")) == (30, "rate(x[120s])")
    assert (scale.panel_step(q("1m")), scale.panel_expr(q("1m"), "j")) == (60, "rate(x[120s])")
    assert (scale.panel_step(q("5m")), scale.panel_expr(q("5m"), "j")) == (300, "rate(x[330s])")


def test_dashboards_records_is_measured_apart_with_every_query_of_the_panels_it_changes():
    from benchmarks import measures, scale

    default = scale.panels(scale.default_config())
    rules, qs = scale.records_suites(default)
    assert {r.group for r in rules} == {f"obsgen-panels-{v}" for v in
                                        ("tp", "dp", "gpus", "errors", "fsdp", "comm", "stragglers")}
    assert not [r for r in scale.obsgen_rules(scale.default_config()) if r.group.startswith("obsgen-panels")]
    changed = {(q.dashboard, q.panel) for q in qs}
    assert ("Training · TP", "Time inside TP collectives across ranks") in changed
    by_panel = lambda panels: sorted(q.ref for q in panels
                                     if q.panel == "Fabric recoveries")
    assert by_panel(qs) == by_panel(default) == ["A", "B"]  # B changed, A measured too
    size = {"panels": {"obsgen": {"a": {"ms": 9.0}, "b": {"ms": 1.0}},
                       "records": {"a": {"ms": 2.0}}}}
    assert measures.with_records(size) == {"a": {"ms": 2.0}, "b": {"ms": 1.0}}


def test_the_committed_report_is_what_its_saved_results_and_findings_write():
    """RESULTS.md is a function of results.json and the report code (its findings text
    included): a finding edited without `python -m benchmarks.scale --report`, or a run whose
    report the saved results would write differently, fails here."""
    import json

    from benchmarks import report

    here = ROOT / "benchmarks"
    results = json.loads((here / "results.json").read_text())
    assert (here / "RESULTS.md").read_text() == report.text(results, here), (
        "benchmarks/RESULTS.md is stale: python -m benchmarks.scale --report")


def test_a_group_is_the_median_of_the_sums_of_its_rules_not_the_sum_of_their_medians():
    """What the full run and benchmarks/family_cost.py report for a group (group_times):
    its rules' times summed per evaluation time and round, then the median of those sums;
    a query error is reported with its rule."""
    rules = [scale.Rule("g", "record", "a", "a"), scale.Rule("g", "record", "b", "b")]
    times = {"a": [1.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0]}  # a sum of medians would be 0
    measures = {}
    for i, at in enumerate(scale.EVAL_TIMES):
        for r in rules:
            m = measures.setdefault((r.group, r.name, at), scale.Measure())
            m.times = [times[r.name][i % 3]] * 3
    measures[("g", "b", scale.EVAL_TIMES[0])].error = "timeout"
    g = scale.group_times({"now": measures}, {"now": rules})["g"]
    assert g["ms"] == 1000.0
    assert g["rules"] == {"a": 0.0, "b": 0.0}
    assert g["errors"] == ["b: timeout"]


def _sharded_result(slowest_ms: float, sent: float) -> dict:
    group = {"suite": "obsgen", "ms": slowest_ms, "interval": 30, "samples": 10}
    return {"ranks": 16384, "groups": {"obsgen-shard-stragglers": group,
                                       "obsgen-shard-ranks": {**group, "ms": 1.0},
                                       "naive-stragglers": {**group, "suite": "naive"}},
            "sent_per_s": sent, "scraped_per_s": 1000.0,
            "model": {"sent_per_s": 30.0, "scraped_per_s": 1000.0},
            "memory": {"obsgen": {"rules_peak_rss": 2**30, "idle_rss": 2**29}},
            "counts": {"all": 5}, "kept_series": {"a:b": 3}, "big": {}}


@pytest.mark.parametrize("case,slowest,sent,want", [
    ("a shard group of 1.2 s misses, 3% of the scrapes meets", 1200.0, 30.0, ["**missed**", "met"]),
    ("a shard group of 900 ms meets, 6% of the scrapes misses", 900.0, 60.0, ["met", "**missed**"]),
])
def test_the_sharded_targets_say_met_or_missed_from_the_measures(case, slowest, sent, want):
    from benchmarks import sharded
    rows = sharded.targets(_sharded_result(slowest, sent))[2:4]
    assert [r.rsplit("|", 2)[-2].strip() for r in rows] == want, rows
    assert "obsgen-shard-stragglers" in rows[0]
    # the open targets are named open, never met
    assert all(r.endswith("| open |") for r in sharded.targets(_sharded_result(1, 1))[4:6])


@pytest.mark.parametrize("case,small_ms,ms,want_k,want_big,verdict", [
    ("a group 4x slower at 4x the ranks grows linearly: 8x to 131,072",
     25.0, 100.0, 1.0, 800.0, "model: met"),
    ("a group 8x slower at 4x the ranks grows with exponent 1.5",
     50.0, 400.0, 1.5, 400.0 * 8 ** 1.5, "model: **missed**"),
    ("a group that grows slower than linear is modelled linear, never cheaper",
     80.0, 100.0, math.log(1.25) / math.log(4), 800.0, "model: met"),
])
def test_the_global_tier_at_131072_ranks_is_a_model_from_two_measured_sizes(
        case, small_ms, ms, want_k, want_big, verdict):
    from benchmarks import sharded
    res = _sharded_result(900.0, 30.0)
    res["groups"]["obsgen-stragglers"] = {"suite": "global", "ms": ms, "interval": 30, "samples": 5}
    res["growth"] = {"ranks": 4096, "groups": {"obsgen-stragglers": small_ms}}
    m = sharded.global_model(res)["obsgen-stragglers"]
    assert m["exponent"] == pytest.approx(want_k)
    assert m["big_ms"] == pytest.approx(want_big)
    row = sharded.targets(res)[4]
    assert row.endswith(f"| {verdict} |") and "Not measured at 131,072" in row, row
    assert "## Global-tier groups" in sharded.markdown(res)


def test_without_a_smaller_run_the_global_tier_is_modelled_linear_and_says_so():
    from benchmarks import sharded
    res = _sharded_result(900.0, 30.0)
    res["groups"]["obsgen-stragglers"] = {"suite": "global", "ms": 200.0, "interval": 30, "samples": 5}
    assert sharded.global_model(res)["obsgen-stragglers"]["big_ms"] == pytest.approx(1600.0)
    assert "linear growth assumed" in sharded.targets(res)[4]


def test_the_sharded_benchmark_times_the_global_tier_apart_from_the_shard_tier():
    from benchmarks import sharded
    cfg = sharded.sharded_config()
    shard, _ = sharded.shard_tier(cfg)
    central = sharded.global_tier(cfg)
    assert central and not any(r.group.startswith("obsgen-shard-") for r in central)
    assert {r.name for r in central}.isdisjoint({r.name for r in shard if r.kind == "record"})
    assert any(r.kind == "alert" for r in central)


def test_the_sharded_benchmark_times_the_shard_tier_and_counts_the_keep_list():
    from benchmarks import sharded
    rules, keep = sharded.shard_tier(sharded.sharded_config())
    assert rules and all(r.group.startswith("obsgen-shard-") for r in rules)
    assert "job_rank:train_busy_seconds:mean1m" in keep
    # every raw series the shard tier reads is one the benchmark streams
    from obsgen.contract import METRICS
    contract = set(METRICS) | {m + s for m in METRICS for s in ("_bucket", "_sum", "_count")}
    read = scale.read_families([r.expr for r in rules]) & contract
    written = set(_tiny().series()) | {"train_grad_norm", "train_loss", "train_nonfinite"}
    assert read and read - written <= {"job_recovery_seconds", "job_checkpoint_age_at_failure_seconds",
                              "moe_expert_tokens_total"}, sorted(read - written)


# the centre at 131,072 ranks (benchmarks/central.py) ---------------------------------------
_DUMP = (
    'job_rank:train_busy_seconds:mean1m{job_id="bench",node="gpu-node-009",rank="72",stage="4"} 1.18 1700009036.447\n'
    'obsgen_shard:stragglers_job_tp_group_train_rank_mesh_pipeline:0{cp_group="3",dp_group="0",dp_rank="5",'
    'instance="10.0.0.1:9400",job="training",job_id="bench",node="gpu-node-000",pp_group="2",rank="72",'
    'stage="4",tp_group="9",tp_rank="0"} 1 1700009006.447\n'
    'obsgen_shard:ranks_job_train_world_size_max:2{job_id="bench",node="gpu-node-009",rank="72"} 16384 1700009006.447\n'
    'obsgen_shard:gpus_job_node_train_ranks_count:0{job_id="bench",node="gpu-node-009",rank="72"} 16384 1700009006.447\n'
    'obsgen_shard:ranks_job_train_current_step_max:3{job_id="bench",rank="72"} 16384 1700009006.447\n'
    '# EOF\n')


@pytest.mark.parametrize("case,k,want", [
    ("copy 0 is the shard as it is, with the job's world size", 0,
     ['node="gpu-node-009",rank="72"', 'tp_group="9"', "} 131072 1700009006.447",
      'current_step_max:3{job_id="bench",rank="72"} 16384 ']),
    ("copy 3 names other hosts, ranks and TP/PP groups, and keeps the DP group", 3,
     ['node="s3-gpu-node-009",rank="s3-72"', 'cp_group="s3-3",dp_group="0",dp_rank="s3-5"',
      'instance="s3-10.0.0.1:9400",job="training",job_id="bench"', 'pp_group="s3-2"',
      'tp_group="s3-9",tp_rank="0"', 'stage="4"', "} 131072 1700009006.447",
      'current_step_max:3{job_id="bench",rank="s3-72"} 16384 ']),
])
def test_a_copy_of_the_shard_is_another_shards_hosts_of_the_big_job(case, k, want, tmp_path):
    """benchmarks/central.py writes one shard's keep-list series 8 times with sed: each copy
    is another shard's hosts (their ranks, nodes, pods and in-shard groups), the world size
    is the big job's, and any other value is left alone (a step count that equals the
    shard's ranks too)."""
    from benchmarks import central
    cfg = central.centre_config()
    tier, _ = central.shard_tier(cfg)
    world = central._world_records(cfg, tier)
    assert sorted(world) == ["obsgen_shard:gpus_job_node_train_ranks_count:0",
                             "obsgen_shard:ranks_job_train_world_size_max:2"]
    script = tmp_path / "copy.sed"
    script.write_text(central.sed_script(k, central.copied_labels(cfg), world, 16384))
    out = subprocess.run(["sed", "-f", str(script)], input=_DUMP, capture_output=True,
                         text=True, check=True).stdout
    assert len(out.splitlines()) == len(_DUMP.splitlines())
    for text in want:
        assert text in out, (case, text, out)
    assert out.count("131072") == 2


def _centre(group_ms: dict[str, float], panel_ms: float) -> dict:
    groups = {g: {"suite": "obsgen", "ms": ms, "interval": 30, "samples": 1, "peak_samples": 1}
              for g, ms in group_ms.items()}
    groups["obsgen-shard-ranks"] = {"suite": "shard", "ms": 5000.0, "interval": 30,
                                    "samples": 1, "peak_samples": 1}
    return {"ranks": 131072, "shard_ranks": 16384, "copies": 8, "groups": groups,
            "panels": {"centre": {"A / p": {"ms": panel_ms, "samples": 1, "series": 1,
                                            "queries": 1, "errors": []}}},
            "panel_queries": {"centre": 1, "shards": 2}, "panels_at_shards": ["B / q"],
            "memory": {"obsgen": {"rules_peak_rss": 2**30, "panels_peak_rss": 2**31}},
            "counts": {"all": 10}, "built": {"dump": {"bytes": 1}, "copies": {"seconds": 1},
                                             "compaction_seconds": 1, "recorded": {"seconds": 1},
                                             "tsdb_bytes": 1}}


@pytest.mark.parametrize("case,groups,panel,want", [
    ("a global group of 1.5 s at the centre misses, and is named",
     {"obsgen-stragglers": 1500.0, "obsgen-ranks": 900.0, "obsgen-panels-comm": 3000.0}, 100.0,
     ["**missed**", "met at the centre"]),
    ("every global group under 1 s meets; a panel of 2.5 s misses",
     {"obsgen-stragglers": 990.0, "obsgen-panels-comm": 3000.0}, 2500.0,
     ["met", "**missed**"]),
])
def test_the_centre_measured_at_131072_ranks_says_met_or_missed(case, groups, panel, want):
    """With central.json, the global row is the measurement at 131,072 ranks, not the model.
    The panels family's groups and the shard tier's are reported apart, never in it."""
    from benchmarks import sharded
    c = _centre(groups, panel)
    rows = sharded.targets(_sharded_result(900.0, 30.0), c)[4:6]
    assert [r.rsplit("|", 2)[-2].strip() for r in rows] == want, rows
    assert "Not measured" not in rows[0] and "131,072 ranks" in rows[0]
    assert "obsgen-panels-comm" not in rows[0] and "obsgen-shard-ranks" not in rows[0]
    if want[0] != "met":
        assert "`obsgen-stragglers` 1,500 ms" in rows[0] and "obsgen-ranks" not in rows[0]
    text = sharded.markdown(_sharded_result(900.0, 30.0), c)
    assert "## The centre of 131,072 ranks, measured" in text and "B / q" in text


def test_the_centre_times_only_the_panels_whose_every_series_it_holds():
    from benchmarks import central
    from obsgen import shards
    cfg = central.centre_config()
    tier, keep = central.shard_tier(cfg)
    held = set(keep) | {r.name for r in central.global_tier(cfg) if r.kind == "record"}
    ok, rest = central.centre_panels(cfg, held)
    assert ok and rest
    reads = [shards._reads(shards._parse(central.panel_expr(q, "j")), set()) for q in ok + rest]
    assert all(r <= held for r in reads[:len(ok)])
    assert all(r - held for r in reads[len(ok):])


def test_into_blocks_writes_each_file_as_the_next_is_made_and_removes_it(tmp_path):
    """The pipeline backfill_raw and the centre's copies share: promtool reads each
    OpenMetrics file while the next is written, each is removed once read, and a file
    promtool rejects stops it with the file's name."""
    data, log = tmp_path / "data", open(tmp_path / "log", "w")
    data.mkdir()
    made = []

    def files(bad: bool = False):
        for i in range(2):
            path = tmp_path / f"f{i}.om"
            body = "x_total 1 1700000000\n" if not (bad and i) else "x_total{ 1\n"
            path.write_text(f'up{{i="{i}"}} 1 1700000000\n{body}# EOF\n')
            made.append(path)
            yield path

    scale.into_blocks(files(), data, log)
    assert not any(p.exists() for p in made)
    assert any(d.is_dir() for d in data.iterdir())
    with pytest.raises(RuntimeError, match="f1.om"):
        scale.into_blocks(files(bad=True), data, log)
