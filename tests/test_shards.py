"""The sharded topology (obsgen.shards): which expressions a shard may evaluate over its
own targets, the two tiers a sharded config renders, each shard's relabelling and remote
write, and the scenarios passing on the split with every cross-tier read late."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import promql_parser
import pytest
import yaml

from obsgen import config, contract, pipeline, render, shards

SHARDED = ("sharding:\n  shards: 2\n  by: [__meta_kubernetes_pod_node_name]\n"
           "  remote_write_url: http://127.0.0.1:8428/api/v1/write\n")


def _cfg(text: str = SHARDED, tmp: Path | None = None) -> config.Config:
    """The config of this text, loaded as obsgen loads a user's file."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "obsgen.yaml"
        path.write_text(text)
        return config.load(path)


def _local(expr: str, cfg: config.Config | None = None) -> bool:
    env = shards._Env(cfg or config.defaults())
    pins = shards.local_pins(promql_parser.parse(expr), env)
    return pins is not None and pins is not shards._SCALAR


LOCAL = {
    "a rank's rate is local": ("rate(train_step_seconds_sum[5m])", True),
    "a sum by job and rank is local": (
        "sum by (job_id, rank)(rate(train_compute_seconds_sum[1m]))", True),
    "a sum without the stage keeps the rank: local": (
        "sum without (stage)(rate(train_compute_seconds_sum[1m]))", True),
    "a stage's median spans hosts: not local": (
        "quantile by (job_id, stage)(0.5, rate(train_compute_seconds_sum[1m]))", False),
    "a job's max spans hosts: not local": ("max by (job_id)(train_current_step)", False),
    "a sum without the rank and the instance spans hosts: not local": (
        "sum without (rank, instance)(rate(train_compute_seconds_sum[1m]))", False),
    "a join on the job alone pairs ranks of other hosts: not local": (
        "rate(train_step_seconds_sum[5m]) / on (job_id) group_left max by (job_id)(train_world_size)",
        False),
    "a join on job and rank stays on the rank's host: local": (
        "sum by (job_id, rank)(rate(train_step_seconds_sum[5m])) / on (job_id, rank) "
        "sum by (job_id, rank)(rate(train_step_seconds_count[5m]))", True),
    "a GPU's series by host and UUID are local": (
        "max by (Hostname, gpu, UUID)(DCGM_FI_PROF_SM_ACTIVE)", True),
    "a host's spread of its GPUs is local": (
        "stddev by (Hostname)(DCGM_FI_PROF_SM_ACTIVE)", True),
    "kube-state-metrics sits on one shard whatever it describes: not local": (
        "kube_pod_labels", False),
    "vector() makes a series on every shard: not local": ("vector(1)", False),
    "absent() says absent on every shard without the job: not local": (
        "absent(train_step_seconds_sum)", False),
    "a scalar compared with a rank's series stays local": (
        "rate(train_step_seconds_count[5m]) > 0", True),
    "the ruler's ALERTS are never local": ('ALERTS{alertstate="firing"}', False),
    "a host label copied whole by label_replace pins as its source: a count by it is local": (
        'count by (h)(label_replace(node_uname_info, "h", "$1", "nodename", "(.*)"))', True),
    "a label label_replace fills with part of its source does not pin: not local": (
        'count by (h)(label_replace(node_uname_info, "h", "$1", "nodename", "(.).*"))', False),
    "a pinning label written over by label_replace pins no more: not local": (
        'count by (nodename)(label_replace(node_uname_info, "nodename", "x", "nodename", ".*"))', False),
    "the NCCL Inspector's series counted by the process's host are local": (
        "count by (process_host, cuda_device)(train_rank_gpu_info)", True),
}


@pytest.mark.parametrize("expr,local", list(LOCAL.values()), ids=list(LOCAL))
def test_which_expressions_a_shard_evaluates_alone(expr, local):
    assert _local(expr) is local


# The label keys that pin a series to one host, written out here apart from obsgen.shards:
# a shard-tier aggregation must keep one, so no shard rule combines hosts.
PINNED = {"rank", "node", "UUID", "Hostname", "hostname", "nodename", "instance"}


def _aggregations(node, out: list) -> list:
    kind = type(node).__name__
    if kind == "AggregateExpr":
        out.append(node)
    for child in shards._children(node):
        _aggregations(child, out)
    return out


def _selectors(node, out: set) -> set:
    return shards._reads(node, out)


def _split(text: str = SHARDED) -> tuple[config.Config, shards.Split]:
    cfg = _cfg(text)
    return cfg, shards.split(pipeline.families(cfg), cfg)


CONFIGS = {
    "the defaults": SHARDED,
    "the Megatron OpenTelemetry and dcgm presets": (
        SHARDED + "presets: [megatron-otel, dcgm]\nmegatron_log_interval: 10\n"),
    "renamed metrics and labels": (
        SHARDED + "metrics: {train_compute_seconds: megatron_compute_seconds}\n"
                  "labels: {job_id: run, rank: global_rank}\n"),
}


@pytest.mark.parametrize("text", list(CONFIGS.values()), ids=list(CONFIGS))
def test_no_shard_rule_aggregates_across_hosts_or_reads_a_cluster_wide_series(text):
    cfg, split = _split(text)
    pinned = {cfg.label(k) for k in PINNED}
    cluster = {cfg.metric(m.key) for m in contract.METRICS.values()
               if m.emitter in (contract.KSM, contract.RULER)} | {"ALERTS"}
    assert split.shard
    for fam in split.shard:
        for rule in fam.rules:
            assert not isinstance(rule, shards.Alert), rule.name
            tree = promql_parser.parse(rule.expr)
            assert not _selectors(tree, set()) & cluster, rule.name
            for agg in _aggregations(tree, []):
                labels = set(agg.modifier.labels or []) if agg.modifier else set()
                if agg.modifier is not None and "Without" in str(agg.modifier.type):
                    assert pinned - labels, (rule.name, str(agg))
                else:
                    assert labels & pinned, (rule.name, str(agg))


@pytest.mark.parametrize("text", list(CONFIGS.values()), ids=list(CONFIGS))
def test_the_global_tier_reads_only_recorded_and_cluster_wide_series(text):
    cfg, split = _split(text)
    env = shards._Env(cfg)
    recorded = {r.name for f in split.shard + split.global_ for r in f.records}
    for fam in split.global_:
        for rule in fam.rules:
            reads = _selectors(promql_parser.parse(rule.expr), set())
            scraped = reads & set(env.local_raw)
            assert not scraped, (fam.name, rule.name, scraped)
            assert reads <= recorded | env.cluster_raw, (rule.name, reads - recorded)
    # and the shards write exactly the series it reads that the shards hold
    global_reads = {n for f in split.global_ for r in f.rules
                    for n in _selectors(promql_parser.parse(r.expr), set())}
    global_records = {r.name for f in split.global_ for r in f.records}
    assert set(split.keep) == global_reads - global_records - {cfg.metric("ALERTS")}


def test_every_alert_is_in_the_global_tier_and_every_rule_lands_in_one_tier():
    cfg, split = _split()
    fams = pipeline.families(cfg)
    assert [a.name for f in split.global_ for a in f.alerts] == [a.name for f in fams for a in f.alerts]
    # every record keeps its name, in the shard or the global tier, never both
    shard = [r.name for f in split.shard for r in f.records]
    glob = [r.name for f in split.global_ for r in f.records]
    assert not set(shard) & set(glob)
    assert sorted(r.name for f in fams for r in f.records) == sorted(
        n for n in shard + glob if not n.startswith("obsgen_shard:"))
    # the stage baseline is a median over hosts: the centre's
    assert "job_stage:train_busy_seconds:baseline1m" in glob
    assert "job_rank:train_busy_seconds:mean1m" in shard


def test_a_hoisted_part_is_never_a_filter():
    """A series a filter drops on a shard would linger at a store that lost its
    staleness marker: the global rule filters the hoisted values itself."""
    cfg, split = _split()
    for fam in split.shard:
        for rule in fam.records:
            if rule.name.startswith("obsgen_shard:"):
                assert not shards._filters(promql_parser.parse(rule.expr)), rule.expr
    ranks = {r.name: r.expr for f in split.global_ if f.name == "ranks" for r in f.rules}
    assert "> 0" not in next(r.expr for f in split.shard if f.name == "ranks" for r in f.rules
                             if r.name.startswith("obsgen_shard:ranks_job_train_ranks_progressing"))
    assert "obsgen_shard:ranks_job_train_ranks_progressing_count:0 > 0" in ranks[
        "job:train_ranks_progressing:count"]


def test_the_sharded_render_writes_both_tiers_and_each_shards_config():
    cfg = _cfg(SHARDED.replace("shards: 2", "shards: 3"))
    files = pipeline.render_all(cfg)
    shard_files = sorted(p for p in files if p.startswith("rules/shard/"))
    assert shard_files and all(p.endswith("-shard.yaml") for p in shard_files)
    assert "rules/stragglers.yaml" in files and "rules/shard/stragglers-shard.yaml" in files
    names = [g["name"] for p in files if p.startswith("rules/")
             for g in render.rule_groups(p, render.load_yaml(files[p]), cfg)]
    assert len(names) == len(set(names))
    assert "obsgen-shard-stragglers" in names and "obsgen-stragglers" in names
    configs = [yaml.safe_load(files[f"sharding/shard-{i}.yaml"]) for i in range(3)]
    assert f"sharding/shard-3.yaml" not in files
    for i, doc in enumerate(configs):
        hashmod, keep = doc["relabel_configs"]
        assert hashmod == {"source_labels": ["__meta_kubernetes_pod_node_name"], "modulus": 3,
                           "target_label": "__tmp_obsgen_shard", "action": "hashmod"}
        assert keep == {"source_labels": ["__tmp_obsgen_shard"], "regex": str(i), "action": "keep"}
        (write,) = doc["remote_write"]
        assert write["url"] == "http://127.0.0.1:8428/api/v1/write"
        (kept,) = write["write_relabel_configs"]
        assert kept["action"] == "keep" and kept["source_labels"] == ["__name__"]
        assert "job_rank:train_busy_seconds:mean1m" in kept["regex"].split("|")
        assert "train_step_seconds_count" not in kept["regex"].split("|")
    page = files["docs/sharding.md"]
    assert all(f"## {f.name}\n" in page for f in pipeline.families(cfg))
    assert "- `job_rank:train_busy_seconds:mean1m`: `sum by" in page
    # one Prometheus renders neither
    plain = pipeline.render_all(config.defaults())
    assert not [p for p in plain if p.startswith(("rules/shard/", "sharding/"))]
    assert "runs on one Prometheus" in plain["docs/sharding.md"]
    assert "- `job_rank:train_busy_seconds:mean1m`: `sum by" in plain["docs/sharding.md"]
    assert {p: t for p, t in plain.items() if p.startswith("rules/")} == {
        p: t for p, t in pipeline.render_all(_cfg("sharding: {shards: 0}\n")).items()
        if p.startswith("rules/")}


BAD = {
    "one shard is no split": ("sharding: {shards: 1, remote_write_url: http://127.0.0.1:1/w}\n",
                              "sharding.shards"),
    "shards need the central store's address": ("sharding: {shards: 2}\n",
                                                "sharding.remote_write_url"),
    "the address must be http(s)": ("sharding: {shards: 2, remote_write_url: 'ftp://127.0.0.1/w'}\n",
                                    "sharding.remote_write_url"),
    "the hashed labels must be label names": (
        "sharding: {shards: 2, remote_write_url: 'http://127.0.0.1:1/w', by: ['not a label']}\n",
        "sharding.by"),
    "the centre reads records late: not ruler: prometheus": (
        "ruler: prometheus\nsharding: {shards: 2, remote_write_url: 'http://127.0.0.1:1/w'}\n", "ruler"),
}


@pytest.mark.parametrize("text,path", list(BAD.values()), ids=list(BAD))
def test_a_bad_sharding_config_is_one_line_naming_the_field(text, path, tmp_path):
    (tmp_path / "obsgen.yaml").write_text(text)
    done = subprocess.run([sys.executable, "-m", "obsgen", "render"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f": {path}" in lines[0], done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obsgen.yaml"]


@pytest.mark.promtool
@pytest.mark.parametrize("fmt", ["prometheus", "thanos"])
def test_the_scenarios_pass_on_the_split_with_every_record_read_late(tmp_path, fmt):
    """The user's path: render a sharded config, run its scenarios on both tiers with every
    record read one evaluation late (the global tier reads the shards' through remote write)."""
    (tmp_path / "obsgen.yaml").write_text(SHARDED + f"format: {fmt}\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "obsgen", *a], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=900)
    done = run("render")
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load((tmp_path / "tests/promtool/obsgen-ranks.yaml").read_text())
    assert doc["rule_files"] == ["../../rules/shard/ranks-shard.yaml", "../../rules/ranks.yaml"]
    done = run("test", "--late-reads")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all ranks gone fires Train_RankFailed" in done.stdout
    assert " 0 failed, 0 not stated" in done.stdout


@pytest.mark.promtool
def test_a_shard_record_that_filters_fails_the_rank_loss_on_a_store_without_markers(tmp_path, monkeypatch):
    """The check can fail: hoisting the progress filter onto the shards, and reading the
    shards' records as a store that lost their staleness markers would, keeps gone ranks
    counted and Train_RankFailed silent."""
    (tmp_path / "obsgen.yaml").write_text(SHARDED + "families: [ranks]\ndashboards: {enabled: false}\n")
    from obsgen import cli
    from obsgen.scenarios import run as scenario_run
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shards, "_filters", lambda node: False)
    assert cli.main(["render"]) == 0
    monkeypatch.setattr(shards, "is_shard_file", lambda path: False)
    monkeypatch.setattr(scenario_run, "is_shard_file", lambda path: False, raising=False)
    assert cli.main(["test", "--late-reads"]) == 1


def test_a_family_that_cannot_be_split_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """Were a part the split records on the shards not found again in its rule (a printer
    that wrote it otherwise), the render says which family and rule, and writes nothing."""
    from obsgen import cli
    (tmp_path / "obsgen.yaml").write_text(SHARDED)
    monkeypatch.chdir(tmp_path)
    stray = promql_parser.parse("rate(train_planned_steps[5m])")
    monkeypatch.setattr(shards, "_parts", lambda node, env, out: [stray])
    assert cli.main(["render"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("family "), lines
    assert "is not found again in its printed expression" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obsgen.yaml"]


@pytest.mark.promtool
@pytest.mark.vmalert
@pytest.mark.parametrize("engine", ["Prometheus 2.42", "Prometheus 3.5", "vmalert 1.79", "vmalert 1.145"])
def test_both_tiers_load_in_every_engine(engine, tmp_path):
    """The shards are Prometheus (2.x or 3.x), the centre vmalert or a Prometheus: every
    engine loads both tiers, the hoisted records included."""
    from .test_targets import loads
    cfg = _cfg(SHARDED + "presets: [megatron-otel, dcgm]\nmegatron_log_interval: 10\n")
    paths = []
    for rel, text in render.rule_files(pipeline.families(cfg), cfg).items():
        path = tmp_path / rel.replace("/", "_")
        path.write_text(text)
        paths.append(path)
    assert any("shard" in p.name for p in paths)
    result = loads(engine, paths)
    assert result.ok, result.output


@pytest.mark.parametrize("case", ["a double quote", "a backslash", "a newline",
                                  "all of them with unicode", "template syntax"])
def test_the_split_writes_selector_values_and_windows_as_the_rules_do(case, tmp_path):
    """promql_parser prints label values unescaped and sub-second windows as 0s: the split
    keeps every string and duration as the unsplit rules write them (a nasty selector, and
    a 100x profile's windows under a second)."""
    from tests.test_escaping import NASTY
    from obsgen import timescale
    base = yaml.safe_load(timescale.profile_yaml(100.0))
    from obsgen import registry
    path = tmp_path / "obsgen.yaml"
    path.write_text(yaml.safe_dump({**base, "selector": {"cluster": NASTY[case]}}) + SHARDED)
    cfg = config.load(path, alert_names=registry.alert_names())
    fams = pipeline.families(cfg)
    tiers = shards.split(fams, cfg)

    def literals(families):
        out = set()
        for f in families:
            for r in f.rules:
                out |= set(shards._STRING.findall(r.expr))
                out |= {m.group(2) for m in shards._DURATION.finditer(r.expr)}
                promql_parser.parse(r.expr)  # and it parses
        return out
    split = literals(tiers.shard) | literals(tiers.global_)
    assert split == literals(fams)
    assert any("ms" in d for d in split)  # the profile has windows under a second
