"""obsgen plan --shards: the series and samples of each shard and of the centre."""
from __future__ import annotations

import promql_parser
import pytest

from obsgen import config, pipeline, shardplan, shards
from obsgen.cli import main
from obsgen.plan import Shape, plan

CFG = config.defaults()
KNOWN = {"x": frozenset({"job_id", "rank", "op", "group", "instance", "job"}),
         "info": frozenset({"job_id", "rank", "stage", "tp_rank"}),
         "h_bucket": frozenset({"job_id", "rank", "le"})}

LABELS = {
    "a rate keeps its series' labels":
        ("rate(x[1m])", {"job_id", "rank", "op", "group", "instance", "job"}),
    "sum by keeps exactly its labels": ("sum by (job_id, rank) (rate(x[1m]))", {"job_id", "rank"}),
    "without drops its labels":
        ("max without (instance, job) (x)", {"job_id", "rank", "op", "group"}),
    "a one-to-one division on() keeps only the on labels":
        ("x / on (job_id, rank) info", {"job_id", "rank"}),
    "a one-to-one division ignoring() drops the ignored labels":
        ("x / ignoring (op, group, instance, job) info", {"job_id", "rank"}),
    "group_left keeps the left labels and adds the included ones":
        ("x * on (job_id, rank) group_left (stage) info",
         {"job_id", "rank", "op", "group", "instance", "job", "stage"}),
    "a filter keeps the left side as it is": ("x > on (job_id, rank) info", set(KNOWN["x"])),
    "and keeps the left side": ("info and on (job_id, rank) x", set(KNOWN["info"])),
    "or keeps what both sides carry": ("info or x", {"job_id", "rank"}),
    "label_replace adds its target": (
        'label_replace(info, "part", "a", "", "")', set(KNOWN["info"]) | {"part"}),
    "histogram_quantile drops le":
        ("histogram_quantile(0.5, h_bucket)", {"job_id", "rank"}),
    "a scalar times a vector is the vector": ("2 * info", set(KNOWN["info"])),
    "vector() carries no label": ("vector(1)", set()),
}


@pytest.mark.parametrize("case", LABELS)
def test_out_labels(case):
    expr, want = LABELS[case]
    assert shardplan.out_labels(promql_parser.parse(expr), KNOWN) == frozenset(want)


BIG = Shape(ranks=131072, pp=8, tp=8)


def test_every_shard_scrapes_its_share_and_sixteen_shards_halve_it():
    eight, sixteen = (shardplan.sizing(BIG, CFG, n) for n in (8, 16))
    scraped = sum(l.total for l in plan(BIG) if l.type != "recorded")
    assert eight["shard_scraped"] * 8 >= scraped > (eight["shard_scraped"] - 1) * 8
    assert abs(sixteen["shard_scraped"] * 2 - eight["shard_scraped"]) <= 2
    # what the centre holds does not depend on how many shards write it
    assert sixteen["central_written"] == eight["central_written"] > 0


def test_a_part_that_reads_one_ranks_loss_is_one_series_at_the_centre():
    """Megatron logs the loss and the gradient norm from one rank: the hoisted copies are
    one series for the job, not one per rank (the plan's own count bounds a part)."""
    fams = pipeline.families(CFG)
    tiers = shards.split(fams, CFG)
    lines = {l.name: l for l in plan(BIG, CFG["windows"], {r.name for f in fams for r in f.records})}
    counts = shardplan._scraped_counts(lines, CFG)
    grads = next(f for f in tiers.shard if f.name == "gradients")
    for rule in grads.rules:
        tree = promql_parser.parse(rule.expr)
        assert shardplan._bound(tree, BIG, CFG, counts) <= 2, rule.name


def test_the_centre_ingests_under_a_twentieth_of_what_the_shards_scrape_at_131072_ranks():
    """Issue 38's target, in the model: the keep-list's samples against the scraped ones."""
    got = shardplan.sizing(BIG, CFG, 8)
    assert got["central_per_s"] < 0.05 * got["scraped_per_s"], got
    # and the centre holds far fewer series than one Prometheus of the whole job would
    assert got["central_written"] + got["central_global"] < got["shard_scraped"] * 8 / 5


def test_obsgen_plan_prints_the_sharded_sizing(capsys):
    assert main(["plan", "--ranks", "131072", "--pp", "8", "--tp", "8", "--shards", "8"]) == 0
    out = capsys.readouterr().out
    assert "sharded over 8 Prometheus shards" in out
    assert "each shard: ~2,048 hosts" in out
    assert "central ingest:" in out and "of the" in out


def test_a_sharded_config_is_planned_sharded(tmp_path, monkeypatch, capsys):
    (tmp_path / "obsgen.yaml").write_text(
        "sharding: {shards: 4, remote_write_url: 'http://127.0.0.1:8428/api/v1/write'}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--ranks", "4096"]) == 0
    assert "sharded over 4 Prometheus shards" in capsys.readouterr().out


@pytest.mark.parametrize("shards_", ["1", "0", "1025", "eight"])
def test_a_shard_count_sharding_refuses_is_refused(shards_, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--ranks", "8", "--shards", shards_])
    assert exc.value.code == 2
    assert "--shards" in capsys.readouterr().err


def test_renamed_metrics_and_labels_are_sized_as_the_defaults(tmp_path):
    """A config that renames what the shards write sizes the same centre."""
    from obsgen import registry
    path = tmp_path / "obsgen.yaml"
    path.write_text("metrics: {kube_pod_labels: site_pod_labels, train_world_size: ws}\n"
                    "labels: {rank: global_rank, node: host}\n")
    renamed = config.load(path, alert_names=registry.alert_names())
    got, want = (shardplan.sizing(BIG, c, 8) for c in (renamed, CFG))
    assert got == want
