"""Sharded benchmark (obsgen.shards): the shard tier of a sharded rendering on one shard
of 16,384 ranks, in a real Prometheus, with benchmarks/scale.py's machinery, beside the
naive suite (the machine's speed) in the same run; and what that shard writes to the
centre, against ``obsgen plan --shards`` for the same shape.

    python -m benchmarks.sharded               # make bench-scale runs it after the scale benchmark
    python -m benchmarks.sharded --ranks 1024  # a smaller shard
    python -m benchmarks.sharded --report      # rewrite SHARDED.md from sharded.json

A shard of a 131,072-rank job over 8 shards holds 2,048 hosts: a job of 16,384 ranks as the
scale benchmark streams it. The TSDB is built as there (raw series, then the shard tier's
records level by level, compacted), then every shard-tier group is timed at five
evaluation times, its samples read counted, and the series of the keep-list (what the
shard's ``write_relabel_configs`` lets through) counted at the last one: the shard's
remote-write samples per second are those series once per evaluation of their group.

The global tier is timed in the same TSDB, over the same job: its records are backfilled
after the shard tier's, and it reads only those and the cluster-wide series, as the
central ruler does, so this is the centre of an N-rank job. The same run at a quarter of
the ranks first (``--growth-ranks``) gives each global group's growth exponent, and the
131,072-rank figure is a model from the two: the N-rank time times (131,072 / N) to that
exponent, at least linear. It is not a measurement at 131,072 ranks.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import shutil
import sys
import time
from pathlib import Path

import yaml

from obsgen import pipeline, shardplan, shards
from obsgen.config import DEFAULTS, Config
from obsgen.plan import Shape

from . import prom, stream
from .measures import PANEL_TARGET_MS
from .scale import (HERE, ROOT, Rule, _groups, _say, backfill_raw, backfill_recorded,
                    group_times, measure, naive_rules, read_families, recording)

SIZE = 16384
SHARDS = 8
CENTRE = "http://127.0.0.1:8428/api/v1/write"  # loopback: nothing is written at this size
# bytes a sample on the wire, Prometheus 3.5's remote write (snappy-compressed protobuf)
# as tests/e2e/test_sharded.py measured it; the backfilled shard here writes nothing
E2E_BYTES_PER_SAMPLE = 20.3
TARGET_MS = 1000
BIG = 131072  # the job the shards and the centre are sized for
GROWTH_RANKS = SIZE // 4  # the smaller run that gives the global tier's growth exponents


def sharded_config() -> Config:
    cfg = Config(copy.deepcopy(DEFAULTS), "(defaults, sharded)")
    cfg.data["sharding"] = {"shards": SHARDS, "by": list(DEFAULTS["sharding"]["by"]),
                            "remote_write_url": CENTRE}
    return cfg


def shard_tier(cfg: Config) -> tuple[list[Rule], tuple[str, ...]]:
    files = pipeline.render_all(cfg)
    rules = []
    for path in sorted(p for p in files if p.startswith("rules/shard/")):
        rules.extend(_groups(yaml.safe_load(files[path])))
    keep = shards.split(pipeline.families(cfg), cfg).keep
    return rules, keep


def global_tier(cfg: Config) -> list[Rule]:
    """The central ruler's rules: every rule file outside rules/shard/."""
    files = pipeline.render_all(cfg)
    rules = []
    for path in sorted(p for p in files if p.startswith("rules/") and p.endswith(".yaml")
                       and not p.startswith("rules/shard/")):
        rules.extend(_groups(yaml.safe_load(files[path])))
    return rules


def run(n: int, work: Path, repeats: int, shard_ranks: int) -> dict:
    cfg = sharded_config()
    tier, keep = shard_tier(cfg)
    suites = {"obsgen": tier, "global": global_tier(cfg), "naive": naive_rules()}
    read = read_families([r.expr for rs in suites.values() for r in rs])
    b = stream.Bench(n)
    data = work / f"sharded-tsdb-{n}"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    built: dict = {}
    t0 = time.monotonic()
    try:
        with open(work / f"sharded-build-{n}.log", "w") as log:
            _say(f"{n} ranks, shard tier: streaming series into blocks")
            built["raw"] = backfill_raw(b, data, work, read, shard_ranks, log)
            _say(f"{n} ranks, shard tier: recorded series, level by level")
            built["recorded"] = backfill_recorded(b, data, work, recording(list(suites.values())), log)
            _say(f"{n} ranks, shard tier: compacting")
            built["compaction_seconds"] = prom.compact(data, work / "prometheus.log")
            built["total_seconds"] = time.monotonic() - t0
            _say(f"{n} ranks, shard tier: measuring ({repeats} repeats)")
            raw = measure(b, data, work, suites, {}, repeats, log,
                          memory_suites=("obsgen", "global", "naive"))
            with prom.Prometheus(data, work / "prometheus.log") as p:
                kept = {name: p.value(f"count({name})", stream.END) for name in keep}
    finally:
        shutil.rmtree(data, ignore_errors=True)
    groups = group_times(raw["rules"], suites)
    every = {r.name: r.interval for r in tier if r.kind == "record"}
    sent = sum((v or 0) / every.get(name, stream.SCRAPE) for name, v in kept.items())
    # what the shard scrapes: the whole exposition the scale benchmark models (the TSDB
    # holds only the families some rule reads)
    scraped = round(sum(b.series().values()) * n)
    model = shardplan.sizing(b.shape, cfg, SHARDS)
    return {"ranks": n, "shape": {"tp": b.tp, "pp": b.pp}, "built": built, "groups": groups,
            "memory": raw["memory"], "counts": raw["counts"],
            "kept_series": {k: int(v or 0) for k, v in kept.items()},
            "scraped_series": scraped, "sent_per_s": sent, "scraped_per_s": scraped / stream.SCRAPE,
            "model": {"sent_per_s": model["central_per_s"], "scraped_per_s": model["scraped_per_s"]},
            "big": {str(k): shardplan.sizing(Shape(ranks=BIG, pp=8, tp=8), cfg, k)
                    for k in (8, 16)}}


def global_model(res: dict) -> dict[str, dict]:
    """Each global group: its time at the run's ranks, its growth exponent from the smaller
    run (``growth``), and the model's time at 131,072 ranks (at least linear growth)."""
    n = res["ranks"]
    small = res.get("growth") or {}
    out = {}
    for g, v in res["groups"].items():
        if v["suite"] != "global" or v["ms"] is None:
            continue
        before = (small.get("groups") or {}).get(g)
        k = None
        if before and before > 0 and v["ms"] > 0 and small["ranks"] != n:
            k = math.log(v["ms"] / before) / math.log(n / small["ranks"])
        out[g] = {"ms": v["ms"], "small_ms": before, "exponent": k, "interval": v["interval"],
                  "samples": v["samples"],
                  "big_ms": v["ms"] * (BIG / n) ** max(k if k is not None else 1.0, 1.0)}
    return out


def load_centre(here: Path) -> dict | None:
    """benchmarks/central.py's results (the centre measured at 131,072 ranks), when kept
    beside sharded.json."""
    path = here / "central.json"
    return json.loads(path.read_text()) if path.exists() else None


def targets(res: dict, centre: dict | None = None) -> list[str]:
    """Issue 38's targets as measured (a table, and the machine's speed under it)."""
    n = res["ranks"]
    shard = {g: v for g, v in res["groups"].items() if v["suite"] == "obsgen"}
    naive = sum(v["ms"] for v in res["groups"].values() if v["suite"] == "naive")
    worst = max(shard.items(), key=lambda kv: kv[1]["ms"])
    ratio = res["sent_per_s"] / res["scraped_per_s"] if res["scraped_per_s"] else float("nan")
    model = res["model"]["sent_per_s"] / res["model"]["scraped_per_s"]
    mem = res["memory"]["obsgen"]
    return ["| target | measured | |", "|---|---|---|",
            f"| shard-tier groups under 1 s at {n:,} ranks a shard | slowest `{worst[0]}` "
            f"{worst[1]['ms']:,.0f} ms | {'met' if worst[1]['ms'] < TARGET_MS else '**missed**'} |",
            f"| central ingest under 5% of what the shards scrape | this shard: "
            f"{res['sent_per_s']:,.0f} of {res['scraped_per_s']:,.0f} samples/s, {ratio:.2%} "
            f"(`obsgen plan --shards` for the same shape: {model:.2%}) | "
            f"{'met' if ratio < 0.05 else '**missed**'} |",
            _centre_row(centre) if centre else _global_row(res, naive),
            _panel_row(centre) if centre else
            "| every panel over 1 h at 131,072 ranks under 2 s | not measured: the dashboards "
            "read the per-rank series of the shards (a query layer over them, or "
            "dashboards.records) | open |", "",
            f"The naive suite took {naive:,.0f} ms per evaluation in the same run: the machine's "
            f"speed, as in RESULTS.md{_speed(naive, n, worst[1]['ms'])}. Peak RSS of a fresh "
            "Prometheus evaluating the shard tier over the shard's blocks, as RESULTS.md "
            f"measures the rules: {mem['rules_peak_rss'] / 2**30:.1f} GiB (a shard that scrapes "
            f"holds its head too); {res['counts']['all']:,.0f} series in the shard's TSDB"
            + (", the global tier's records included." if global_model(res) else ".")]


def centre_groups(centre: dict) -> dict[str, dict]:
    """The centre's groups: the global tier's, and the panels family's (apart)."""
    return {g: v for g, v in centre["groups"].items()
            if v["ms"] is not None and v["suite"] == "obsgen"}


def _is_panels(group: str) -> bool:
    return group.startswith("obsgen-panels")


def _centre_row(centre: dict) -> str:
    groups = {g: v for g, v in centre_groups(centre).items() if not _is_panels(g)}
    over = sorted((g for g, v in groups.items() if v["ms"] >= TARGET_MS),
                  key=lambda g: -groups[g]["ms"])
    worst = max(groups.items(), key=lambda kv: kv[1]["ms"])
    said = (f"{len(over)} of {len(groups)} groups over 1 s: "
            + ", ".join(f"`{g}` {groups[g]['ms']:,.0f} ms" for g in over)
            if over else f"every group under 1 s; slowest `{worst[0]}` {worst[1]['ms']:,.0f} ms")
    return (f"| global-tier groups under 1 s at 131,072 ranks | measured at the centre of "
            f"{centre['ranks']:,} ranks (below): {said}"
            f"{'. Next steps: SHARDED.md, on the centre measured' if over else ''} | "
            f"{'**missed**' if over else 'met'} |")


def _panel_row(centre: dict) -> str:
    ps = centre["panels"]["centre"]
    over = [k for k, v in ps.items() if v["ms"] >= PANEL_TARGET_MS or v["errors"]]
    worst = max(ps.items(), key=lambda kv: kv[1]["ms"])
    q = centre["panel_queries"]
    return (f"| every panel over 1 h at 131,072 ranks under 2 s | the {len(ps)} panels whose "
            f"{q['centre']} queries read only what the centre holds (dashboards.records), at "
            f"{centre['ranks']:,} ranks: {len(over)} over 2 s, slowest `{worst[0]}` "
            f"{worst[1]['ms']:,.0f} ms. The other {len(centre['panels_at_shards'])} panels "
            f"({q['shards']} queries) read a shard's scraped series: a query layer over the "
            f"shards, each answering for its {centre['shard_ranks']:,} ranks (RESULTS.md's "
            f"{centre['shard_ranks']:,}-rank raw panels); not measured through such a layer | "
            f"{'met at the centre' if not over else '**missed**'} |")


def _global_row(res: dict, naive: float) -> str:
    model = global_model(res)
    if not model:
        return ("| global-tier groups under 1 s at 131,072 ranks | not measured. Next step: the "
                "keep-list's series of 8 such shards (this shard's, relabelled 8 times) in one "
                "store, the global tier timed there | open |")
    n = res["ranks"]
    at_n = max(model.items(), key=lambda kv: kv[1]["ms"])
    big = max(model.items(), key=lambda kv: kv[1]["big_ms"])
    grown = (f"each group's exponent from {res['growth']['ranks']:,} ranks, at least linear"
             if res.get("growth") else "linear growth assumed: no smaller run")
    factor = _factor(naive, n)
    ref = (f", {big[1]['big_ms'] / factor:,.0f} ms at the reference speed" if factor else "")
    ok = big[1]["big_ms"] < TARGET_MS
    return (f"| global-tier groups under 1 s at 131,072 ranks | measured at {n:,} ranks (the "
            f"centre of a {n:,}-rank job): slowest `{at_n[0]}` {at_n[1]['ms']:,.0f} ms. Model "
            f"at 131,072 ({grown}): slowest `{big[0]}` {big[1]['big_ms']:,.0f} ms{ref}. Not "
            f"measured at 131,072 | model: {'met' if ok else '**missed**'} |")


def _factor(naive: float, n: int) -> float | None:
    from .measures import REFERENCE_NAIVE_MS
    if n not in REFERENCE_NAIVE_MS or not naive:
        return None
    return naive / REFERENCE_NAIVE_MS[n]


def _speed(naive: float, n: int, worst: float) -> str:
    """The run's speed against the reference run of RESULTS.md, where it has one."""
    from .measures import REFERENCE_NAIVE_MS
    factor = _factor(naive, n)
    if not factor:
        return ""
    return (f", {factor:.2f}x the {REFERENCE_NAIVE_MS[n]:,.0f} ms of the run the time budgets "
            f"were first met on; at that speed the slowest shard group takes "
            f"{worst / factor:,.0f} ms")


def _centre_speed(c: dict, groups: dict[str, dict]) -> str:
    naive = c["built"].get("naive_ms")
    factor = _factor(naive, c["shard_ranks"]) if naive else None
    if not factor:
        return ""
    worst = max((v["ms"], g) for g, v in groups.items() if not _is_panels(g))
    return (f" The naive suite over the shard's TSDB took {naive:,.0f} ms per evaluation in "
            f"the same run: {factor:.2f}x the run the time budgets were first met on (RESULTS.md);"
            f" at that speed the slowest global group, `{worst[1]}`, takes "
            f"{worst[0] / factor:,.0f} ms.")


def centre_section(c: dict) -> list[str]:
    """SHARDED.md's section on the centre measured at 131,072 ranks (central.json)."""
    groups = centre_groups(c)
    b = c["built"]
    mem = c["memory"]["obsgen"]
    minutes = (b.get("shard", {}).get("raw", {}).get("seconds", 0)
               + b.get("shard", {}).get("recorded", {}).get("seconds", 0)
               + b["copies"]["seconds"] + b["compaction_seconds"] + b["recorded"]["seconds"]) / 60
    out = [f"## The centre of {c['ranks']:,} ranks, measured", "",
           f"Written by `python -m benchmarks.central` (central.json; its docstring says how "
           f"the TSDB is built): what {c['copies']} shards of {c['shard_ranks']:,} ranks "
           f"write, in one Prometheus ({c['copies']} relabelled copies of one shard's "
           f"keep-list series, {b['dump']['bytes'] / 2**30:.1f} GiB of OpenMetrics a copy), and "
           f"the global tier's records backfilled over them: {c['counts']['all']:,.0f} series, "
           f"{b['tsdb_bytes'] / 2**30:.1f} GiB of blocks, built in {minutes:,.0f} min. Peak RSS "
           f"of a fresh Prometheus evaluating the global tier at 5 times: "
           f"{mem['rules_peak_rss'] / 2**30:.1f} GiB; of the one that also ran every centre "
           f"panel: {mem['panels_peak_rss'] / 2**30:.1f} GiB."
           + _centre_speed(c, groups), "",
           "| group | every | ms per evaluation | samples read | most samples held |",
           "|---|---:|---:|---:|---:|"]
    for g, v in sorted(groups.items(), key=lambda kv: (_is_panels(kv[0]), kv[0])):
        flag = " **over 1 s**" if v["ms"] >= TARGET_MS else ""
        out.append(f"| `{g}` | {v['interval']:g} s | {v['ms']:,.0f}{flag} | "
                   f"{v['samples']:,.0f} | {v['peak_samples']:,.0f} |")
    tier = {g: v for g, v in c["groups"].items() if v["suite"] == "shard" and v["ms"] is not None}
    if tier:
        slow = max(tier.items(), key=lambda kv: kv[1]["ms"])
        out += ["", f"The shard tier of the same rules, timed in the same run over the shard's "
                f"TSDB ({c['shard_ranks']:,} ranks): slowest `{slow[0]}` {slow[1]['ms']:,.0f} ms, "
                f"{sum(1 for v in tier.values() if v['ms'] >= TARGET_MS)} of {len(tier)} groups "
                "over 1 s."]
    ps = c["panels"]["centre"]
    out += ["", "The `obsgen-panels-*` groups are the panels family (`dashboards.records`), "
            "rendered and measured apart as in RESULTS.md.", "",
            f"**Panels at the centre, over 1 h** ({len(ps)} panels, the slowest ten; a panel's "
            "time is the sum of its queries'):", "", "| panel | ms | samples | series |",
            "|---|---:|---:|---:|"]
    for k, v in sorted(ps.items(), key=lambda kv: -kv[1]["ms"])[:10]:
        out.append(f"| {k} | {v['ms']:,.0f} | {v['samples']:,.0f} | {v['series']:,.0f} |")
    out += ["", f"**Panels that read a shard's scraped series** ({len(c['panels_at_shards'])}): "
            + ", ".join(c["panels_at_shards"]) + ".", ""]
    slow = [g for g, v in groups.items() if not _is_panels(g) and v["ms"] >= TARGET_MS]
    slow_panels = [k for k, v in ps.items() if v["ms"] >= PANEL_TARGET_MS]
    if slow or slow_panels:
        out += ["**Next steps for the misses.**", "", *NEXT_STEPS, ""]
    return out


# What SHARDED.md says to do when the centre misses its targets (benchmarks/central.py).
NEXT_STEPS = (
    "1. **Aggregate by job on the shards.** The ranks, checkpoints, pipeline, fabric and "
    "GPU-facts groups read per-rank partials that the centre aggregates by job straight "
    "away: a maximum (current step, last checkpoint, the slowest rank's checkpoint and step "
    "rates), or a sum or a count (ranks progressing and stepped, checkpoint bytes, bubble "
    "time per stage, link recoveries, GPUs and ranks per host). A shard can take that "
    "aggregate over its own ranks. The centre then combines 8 partials instead of 131,072 "
    "series. This needs each shard's partial to carry a label of its own at the centre (an "
    "external label per shard that the keep-list keeps). The guide asks for no such label "
    "today, so that a per-rank record never splits in two when a rank moves.",
    "2. **Split what stays per rank by stage.** The straggler group's stage baselines and "
    "the NCCL group's last-arrival ratios need every rank's value at the centre. With one "
    "group per pipeline stage, each reading `stage=\"<k>\"`, a ruler with more cores "
    "evaluates the stages side by side: Prometheus runs every group on its own.",
    "3. **Record the panels' cross-rank spread.** *Busy time across ranks* takes the "
    "maximum, median and minimum over every rank at every step of the hour. Recorded per "
    "job in the panels family (for the dashboard's default of every rank), it would read "
    "3 series.",
)


def markdown(res: dict, centre: dict | None = None) -> str:
    n = res["ranks"]
    shard = {g: v for g, v in res["groups"].items() if v["suite"] == "obsgen"}
    out = [f"# Sharded benchmark: the shard tier on one shard of {n:,} ranks", "",
           "Written by `make bench-scale` (`python -m benchmarks.sharded`; `--report` rewrites "
           "this file from `sharded.json`). Do not edit by hand.", "",
           *(["The last two targets and the section on the centre come from a later run, "
              "`python -m benchmarks.central` (`central.json`), which measures the centre at "
              f"{centre['ranks']:,} ranks; the rest from `benchmarks.sharded`'s run.", ""]
             if centre else []),
           "## Targets", "", *targets(res, centre), "",
           "## Shard-tier groups", "",
           "| group | ms per evaluation | every | samples read |", "|---|---:|---:|---:|"]
    for g, v in sorted(shard.items()):
        out.append(f"| `{g}` | {v['ms']:,.1f} | {v['interval']:g} s | {v['samples']:,.0f} |")
    wire = res["sent_per_s"] * E2E_BYTES_PER_SAMPLE
    model = global_model(res)
    measured = centre_groups(centre) if centre else {}
    if model:
        small = (res.get("growth") or {}).get("ranks")
        mem = res["memory"].get("global", {}).get("rules_peak_rss")
        out += ["", "## Global-tier groups (the central ruler)", "",
                f"Timed over the same TSDB, reading only the shard tier's records and the "
                f"cluster-wide series: the centre of a {n:,}-rank job. The model column is "
                f"the time at {n:,} ranks times (131,072 / {n:,}) to the group's growth "
                f"exponent" + (f" from the run at {small:,} ranks" if small else "")
                + ", at least linear; the last column is the measurement at 131,072 ranks "
                "(the next section), where there is one."
                + (f" Peak RSS of a fresh Prometheus evaluating the global tier: "
                   f"{mem / 2**30:.1f} GiB." if mem else ""), "",
                f"| group | every | ms at {small or 0:,} | ms at {n:,} | exponent | samples read "
                f"at {n:,} | model: ms at 131,072 | measured: ms at 131,072 |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for g, v in sorted(model.items()):
            k = "" if v["exponent"] is None else f"{v['exponent']:.2f}"
            sm = "" if v["small_ms"] is None else f"{v['small_ms']:,.1f}"
            big = f"{measured[g]['ms']:,.0f}" if g in measured else ""
            out.append(f"| `{g}` | {v['interval']:g} s | {sm} | {v['ms']:,.1f} | {k} | "
                       f"{v['samples']:,.0f} | {v['big_ms']:,.0f} | {big} |")
    if centre:
        out += ["", *centre_section(centre)]
    out += ["", "## What the shard writes to the centre", "",
            f"{sum(res['kept_series'].values()):,} series of {len(res['kept_series'])} names, "
            f"{res['sent_per_s']:,.0f} samples/s; at the {E2E_BYTES_PER_SAMPLE} bytes a sample "
            f"the live e2e measured (tests/e2e/test_sharded.py), about {wire / 1024:,.0f} KiB/s.",
            "", "| series | at the last evaluation |", "|---|---:|"]
    for name, v in sorted(res["kept_series"].items(), key=lambda kv: -kv[1]):
        out.append(f"| `{name}` | {v:,} |")
    out += ["", "## 131,072 ranks (pp 8, tp 8): the model (`obsgen plan --shards`)", "",
            "| shards | per shard: hosts | series | the centre: series | ingest samples/s | "
            "of what the shards scrape |", "|---:|---:|---:|---:|---:|---:|"]
    for k, m in sorted(res["big"].items(), key=lambda kv: int(kv[0])):
        out.append(f"| {k} | {m['hosts']:,} | {m['shard_scraped'] + m['shard_records']:,} | "
                   f"{m['central_written'] + m['central_global']:,} | {m['central_per_s']:,.0f} | "
                   f"{m['central_per_s'] / m['scraped_per_s']:.2%} |")
    out += ["", "Time to the page: the single Prometheus' latency (DETECTION.md), plus the "
            "remote write and the central ruler's reads (docs/remote-rulers.md); "
            "tests/e2e/test_sharded.py measures both live."]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=SIZE, help=f"ranks of the shard (default {SIZE})")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--shard-ranks", type=int, default=2048)
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "bench-sharded")
    ap.add_argument("--results", type=Path, default=HERE / "sharded.json")
    ap.add_argument("--growth-ranks", type=int, default=GROWTH_RANKS,
                    help=f"a smaller run first, for the global tier's growth exponents "
                         f"(default {GROWTH_RANKS}; 0: none)")
    ap.add_argument("--report", action="store_true", help="only rewrite the report")
    args = ap.parse_args(argv)
    if not args.report:
        args.work.mkdir(parents=True, exist_ok=True)
        small = None
        if 0 < args.growth_ranks < args.ranks:
            first = run(args.growth_ranks, args.work, args.repeats, args.shard_ranks)
            small = {"ranks": args.growth_ranks,
                     "groups": {g: v["ms"] for g, v in first["groups"].items()
                                if v["suite"] != "naive"}}
        res = run(args.ranks, args.work, args.repeats, args.shard_ranks)
        if small:
            res["growth"] = small
        args.results.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    res = json.loads(args.results.read_text())
    (args.results.parent / "SHARDED.md").write_text(markdown(res, load_centre(args.results.parent)))
    if (args.results.parent / "results.json").exists():  # RESULTS.md's sharded section
        from . import report
        report.write(json.loads((args.results.parent / "results.json").read_text()),
                     args.results.parent)
    print(markdown(res, load_centre(args.results.parent)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
