"""The centre of a sharded 131,072-rank job, measured (issue 38): the global tier and the
panels over what 8 shards of 16,384 ranks remote-write, in one Prometheus.

    python -m benchmarks.central            # make bench-scale runs it after benchmarks.sharded
    python -m benchmarks.central --report   # rewrite SHARDED.md from central.json

How the centre's TSDB is built:

1. **One shard.** A 16,384-rank job (2,048 hosts) streamed into blocks and its shard tier
   recorded, as benchmarks/sharded.py builds it, with ``dashboards.records`` on so the
   panels' records exist too.
2. **What that shard writes.** Every series of its keep-list (the ``write_relabel_configs``
   of ``sharding/shard-<i>.yaml``), dumped by promtool 3.5 (``tsdb dump-openmetrics``).
3. **Eight shards.** The dump written 8 times into one TSDB. In copy k every label that
   names a host, a process or a group inside the shard (``COPIED``: rank, node, pod, GPU,
   tensor- and pipeline-parallel group, ...) gets the prefix ``s<k>-``, so each copy is
   another shard's 2,048 hosts, and the world size is 131,072. The data-parallel group
   labels are kept: the 8 copies of a DP group are one group of 8x the ranks, as in a
   131,072-rank job of the same TP and PP. The series that one rank of the job exports
   (loss and gradient norm, from the last rank) are written once.
4. **The global tier's records** backfilled over it, level by level, by Prometheus.

Then every global group is timed at the scale benchmark's evaluation times (median of the
repeats), and every panel query that reads only what the centre holds is timed over 1 h.

What the copies leave out: their values repeat one shard's. A stage's median over 8 copies
is the shard's, and the one slow rank of the benchmark job is 8 slow ranks here. The cost
of a query depends on the series and samples it reads, which are those of a 131,072-rank
centre; it depends on values only where a filter passes more or fewer series.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from obsgen import contract, shards
from obsgen.promql import identifiers

from . import prom, stream
from .scale import (HERE, LONG, ROOT, BACKFILL_ARGS, _say, backfill_raw,
                    backfill_recorded, group_times, measure, naive_rules, panel_expr,
                    into_blocks, panels, read_families, recording, summarize)
from .sharded import BIG, global_tier, shard_tier, sharded_config

SHARD_RANKS = 16384
COPIES = BIG // SHARD_RANKS
# Labels (contract keys) that name a host, a process, a GPU or a group inside one shard:
# made distinct in each copy. The data-parallel group (dp_group) spans shards and stays.
COPIED = (*shards.PIN_KEYS, "pod", "uid", "tp_group", "pp_group", "cp_group", "ep_group",
          "dp_rank")
# A 131,072-rank range query reads tens of millions of samples; Prometheus' default
# --query.max-samples (50 M) is sized for dashboards, not for a backfill.
CENTRE_ARGS = (*BACKFILL_ARGS, "--query.max-samples=2000000000")


def centre_config():
    cfg = sharded_config()
    cfg.data["dashboards"]["records"] = True
    return cfg


def _promtool3() -> str:
    """promtool 3.5 (make e2e-tools): Debian 12's 2.42 has no ``tsdb dump-openmetrics``."""
    path = ROOT / ".tools" / "unstable" / "bin" / "promtool"
    if not path.exists():
        raise SystemExit(f"{path} not found: run make e2e-tools")
    return str(path)


def _world_records(cfg, tier) -> list[str]:
    """Shard records that carry the world size as it is scraped (one per rank)."""
    world = cfg.metric(contract.M.train_world_size.key)
    out = []
    for r in tier:
        e = "".join(r.expr.split())
        if e == world or (e.startswith(world + "{") and "(" not in e):
            out.append(r.name)
    return out


def _once(tier) -> set[str]:
    """Shard records of the series one rank exports whatever the job's size (the last
    rank's loss and gradient norm): written once, not once a copy."""
    return {r.name for r in tier if identifiers(r.expr) & LONG}


def copied_labels(cfg) -> list[str]:
    return [cfg.label(k) for k in COPIED if k in contract.LABELS]


def sed_script(k: int, labels: list[str], world: list[str], n: int) -> str:
    """The sed program that turns the dump into copy k."""
    lines = []
    if k:
        alts = "\\|".join(labels)
        lines.append(f's/\\([{{,]\\)\\({alts}\\)="/\\1\\2="s{k}-/g')
    for name in world:
        lines.append(f"/^{name.replace(':', '[:]')}{{/s/}} {n} /}} {n * COPIES} /")
    return "\n".join(lines) + "\n"


def build_shard(n: int, data: Path, work: Path, log) -> dict:
    cfg = centre_config()
    tier, _ = shard_tier(cfg)
    read = read_families([r.expr for r in tier + global_tier(cfg)])
    b = stream.Bench(n)
    data.mkdir(parents=True)
    out = {}
    _say(f"shard of {n:,} ranks: streaming series into blocks")
    out["raw"] = backfill_raw(b, data, work, read, 2048, log)
    _say(f"shard of {n:,} ranks: the shard tier's records")
    out["recorded"] = backfill_recorded(b, data, work, recording([tier]), log)
    return out


def dump(shard: Path, names: list[str], path: Path, log) -> dict:
    t0 = time.monotonic()
    with open(path, "w") as fh:
        res = subprocess.run([_promtool3(), "tsdb", "dump-openmetrics",
                              "--match", '{__name__=~"' + "|".join(names) + '"}', str(shard)],
                             stdout=fh, stderr=log)
    if res.returncode:
        raise RuntimeError(f"promtool could not dump {shard}; see {log.name}")
    return {"bytes": path.stat().st_size, "seconds": time.monotonic() - t0}


def write_copies(source: Path, once: Path, data: Path, work: Path, labels: list[str],
                 world: list[str], n: int, log) -> dict:
    """Copy k of the dump, by sed, while promtool writes copy k-1 into blocks; then the
    series written once."""
    def files():
        for k in range(COPIES):
            path = work / f"copy-{k}.om"
            script = work / f"copy-{k}.sed"
            script.write_text(sed_script(k, labels, world, n))
            with open(path, "w") as fh:
                if subprocess.run(["sed", "-f", str(script), str(source)], stdout=fh,
                                  stderr=log).returncode:
                    raise RuntimeError(f"sed failed on copy {k}; see {log.name}")
            script.unlink()
            yield path
        yield once

    t0 = time.monotonic()
    try:
        into_blocks(files(), data, log)
    finally:
        for p in work.glob("copy-*"):
            p.unlink()
    return {"seconds": time.monotonic() - t0}


def on_the_shard(b: stream.Bench, shard: Path, work: Path, tier: list, repeats: int,
                 log) -> dict[str, dict]:
    """The shard tier's and the naive suite's groups over the shard's TSDB, timed as
    benchmarks/sharded.py times them: the shard tier of these rules in this run, and the
    machine's speed (the naive suite) against RESULTS.md's reference run."""
    suites = {"shard": tier, "naive": naive_rules()}
    raw = measure(b, shard, work, suites, {}, repeats, log, memory_suites=())
    return group_times(raw["rules"], suites)


def time_shard(n: int, work: Path, tier: list, repeats: int, built: dict, log) -> dict:
    """Compact the shard's blocks (as benchmarks/sharded.py measures them), then time it."""
    shard = work / f"shard-{n}"
    _say("the shard: compacting")
    built["shard_compaction_seconds"] = prom.compact(shard, work / "prometheus.log")
    _say(f"the shard tier and the naive suite on the shard ({repeats} repeats)")
    groups = on_the_shard(stream.Bench(n), shard, work, tier, repeats, log)
    built["naive_ms"] = sum(v["ms"] or 0 for v in groups.values() if v["suite"] == "naive")
    return groups


def retime_shard(work: Path, results: Path, repeats: int) -> dict:
    """--shard-only: the shard tier and the naive suite timed again over the kept shard
    (compacted first), into an existing central.json."""
    res = json.loads(results.read_text())
    tier, _ = shard_tier(centre_config())
    with open(work / "central.log", "a") as log:
        groups = time_shard(res["shard_ranks"], work, tier, repeats, res["built"], log)
    res["groups"] = {g: v for g, v in res["groups"].items() if v["suite"] != "shard"}
    res["groups"].update({g: v for g, v in groups.items() if v["suite"] == "shard"})
    return res


def centre_panels(cfg, central: set[str]) -> tuple[list, list]:
    """The panel queries the centre can answer (every series they read is held there), and
    the rest (they read a shard's scraped series: a query layer over the shards)."""
    ok, rest = [], []
    for q in panels(cfg):
        reads = shards._reads(shards._parse(panel_expr(q, "bench")), set())
        (ok if reads <= central else rest).append(q)
    return ok, rest


def run(work: Path, repeats: int, reuse_shard: bool, n: int = SHARD_RANKS) -> dict:
    cfg = centre_config()
    tier, keep = shard_tier(cfg)
    glob = global_tier(cfg)
    world = _world_records(cfg, tier)
    central = set(keep) | {r.name for r in glob if r.kind == "record"}
    at_centre, at_shards = centre_panels(cfg, central)
    work.mkdir(parents=True, exist_ok=True)
    big = n * COPIES
    shard, data = work / f"shard-{n}", work / f"centre-{big}"
    built: dict = {}
    with open(work / "central.log", "a") as log:
        kept = work / f"shard-{n}.json"  # how the shard was built, for --reuse-shard
        if reuse_shard and shard.exists() and kept.exists():
            built["shard"] = json.loads(kept.read_text())
        else:
            shutil.rmtree(shard, ignore_errors=True)
            built["shard"] = build_shard(n, shard, work, log)
            kept.write_text(json.dumps(built["shard"], indent=1, sort_keys=True) + "\n")
        shard_groups = time_shard(n, work, tier, repeats, built, log)
        _say("the keep-list's series: dumping")
        source, once = work / "keep.om", work / "once.om"
        alone = _once(tier)
        built["dump"] = dump(shard, [k for k in keep if k not in alone], source, log)
        dump(shard, [k for k in keep if k in alone], once, log)
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir()
        _say(f"the centre: {COPIES} copies into blocks")
        built["copies"] = write_copies(source, once, data, work, copied_labels(cfg), world, n,
                                       log)
        source.unlink()
        _say("the centre: compacting")
        built["compaction_seconds"] = prom.compact(data, work / "prometheus.log")
        _say("the centre: the global tier's records, level by level")
        long = frozenset(LONG | alone)
        built["recorded"] = backfill_recorded(stream.Bench(big), data, work,
                                              recording([glob]), log, long, CENTRE_ARGS)
        built["compaction_seconds"] += prom.compact(data, work / "prometheus.log")
        built["tsdb_bytes"] = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
        _say(f"the centre: measuring ({repeats} repeats)")
        b = stream.Bench(n)  # its job id and END: the copies keep them
        suites = {"obsgen": glob}
        boards = {"centre": at_centre}
        t0 = time.monotonic()
        raw = measure(b, data, work, suites, boards, repeats, log, memory_suites=("obsgen",))
        built["measure_seconds"] = time.monotonic() - t0
    res = summarize(b, raw, suites, boards, built)
    res["groups"].update({g: v for g, v in shard_groups.items() if v["suite"] == "shard"})
    res.update(ranks=big, copies=COPIES, shard_ranks=n,
               panels_at_shards=sorted({f"{q.dashboard} / {q.panel}" for q in at_shards}),
               panel_queries={"centre": len(at_centre), "shards": len(at_shards)})
    res.pop("series_per_rank", None)
    res.pop("emitters", None)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--shard-ranks", type=int, default=SHARD_RANKS,
                    help=f"ranks of the one shard copied {COPIES} times (default {SHARD_RANKS})")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "bench-central")
    ap.add_argument("--results", type=Path, default=HERE / "central.json")
    ap.add_argument("--reuse-shard", action="store_true",
                    help="keep a shard TSDB built by an earlier run (the work folder's)")
    ap.add_argument("--shard-only", action="store_true",
                    help="only time the kept shard again (the shard tier, the naive suite) "
                         "into the existing results")
    ap.add_argument("--report", action="store_true", help="only rewrite the report")
    args = ap.parse_args(argv)
    if args.shard_only:
        res = retime_shard(args.work, args.results, args.repeats)
        args.results.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    elif not args.report:
        res = run(args.work, args.repeats, args.reuse_shard, args.shard_ranks)
        args.results.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    from . import sharded
    sharded.main(["--report"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
