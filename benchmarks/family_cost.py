"""One family's rule groups at N ranks, now against before, in the same run.

The full scale benchmark (``make bench-scale``) builds every family's inputs and takes
most of an hour at 16,384 ranks. When a change touches one family, this builds a TSDB of
only the series that family's groups read, now and before (the same generator,
``benchmarks/stream.py``), records their recorded series over the job's history as the
full run does, and times each group as the full run does (Prometheus' own
``evalTotalTime``; the median over 5 evaluation times x ``--repeats`` of the sum of the
group's rules): the groups as obsgen renders them now and, named ``before:``, those of
``benchmarks/baseline/rules.yaml`` (the rules before the change), in alternating order
each round. Compare within the run: the ratio does not depend on the machine. The naive
suite is not built (its straggler rule reads every step histogram bucket, which would
make most of the build); the full run measured it beside the ``before:`` groups.

    .venv/bin/python -m benchmarks.family_cost stragglers --ranks 16384

writes ``build/family/family-<family>-<N>.json`` and prints the groups.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from . import prom, scale, stream
from .measures import family


def groups_of(name: str) -> tuple[list[scale.Rule], list[scale.Rule]]:
    """The family's rules now, and before (the baseline's groups of that family)."""
    now = [r for r in scale.obsgen_rules(scale.default_config()) if family(r.group) == name]
    before = [r for r in scale.before_rules(now)
              if family(r.group.removeprefix("before:")) == name]
    return now, before


def build(rules: list[scale.Rule], n: int, work: Path) -> dict:
    data = work / f"tsdb-{n}"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    b = stream.Bench(n)
    with open(work / f"build-{n}.log", "w") as log:
        read = scale.read_families([r.expr for r in rules])
        raw = scale.backfill_raw(b, data, work, read, 2048, log)
        recorded = scale.backfill_recorded(b, data, work, scale.recording([rules]), log)
    compaction = prom.compact(data, work / "prometheus.log")
    return {"raw_seconds": round(raw["seconds"]), "recorded_seconds": round(recorded["seconds"]),
            "compaction_seconds": round(compaction), "samples": raw["samples"]}


def measure(suites: dict[str, list[scale.Rule]], data: Path, work: Path, repeats: int) -> dict:
    """The full run's measurement of rules (scale.time_rules, one warm-up round, the suites
    in alternating order each round) and its per-group figures (scale.group_times)."""
    measures: dict[str, dict] = {}
    with prom.Prometheus(data, work / "prometheus.log") as p:
        for rules in suites.values():
            scale.time_rules(p, rules, scale.EVAL_TIMES[-1], {})
        for rnd in range(repeats):
            for s in (list(suites) if rnd % 2 == 0 else list(reversed(suites))):
                for at in scale.EVAL_TIMES:
                    scale.time_rules(p, suites[s], at, measures.setdefault(s, {}))
    return scale.group_times(measures, suites)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family", help="a family name, as in rules/<family>.yaml")
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds after a warm-up")
    ap.add_argument("--work", type=Path, default=scale.ROOT / "build" / "family",
                    help="scratch directory (git-ignored) and where the JSON goes")
    args = ap.parse_args(argv)
    now, before = groups_of(args.family)
    if not now:
        print(f"family_cost: {args.family}: no such family in the rendered rules", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    built = build(now + before, args.ranks, args.work)
    data = args.work / f"tsdb-{args.ranks}"
    try:
        groups = measure({"now": now, "before": before}, data, args.work, args.repeats)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    result = {"family": args.family, "ranks": args.ranks, "repeats": args.repeats,
              "rules_sha": scale.rules_sha(), "built": built, "groups": groups,
              "load_average": Path("/proc/loadavg").read_text().split()[:3],
              "seconds": round(time.monotonic() - t0)}
    path = args.work / f"family-{args.family}-{args.ranks}.json"
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    for group, g in sorted(groups.items()):
        for error in g["errors"]:
            print(f"{group}: {error}", file=sys.stderr)
        print(f"{group:36s} {g['ms']:9.1f} ms")
        for name, ms in sorted(g["rules"].items(), key=lambda kv: -kv[1])[:4]:
            print(f"    {name:56s} {ms:9.1f}")
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
