"""Straggler injection benchmark: does the straggler family name the slow GPU, how fast,
and does it page anyone on a healthy job?

    python -m benchmarks.detect            # writes benchmarks/DETECTION.md (make detect)
    python -m benchmarks.detect --quick    # a few cases, printed only

Every case is a job of ``obsgen.synth`` on a real mesh (TP in {1, 2, 4, 8} x PP in
{1, 2, 4} x DP in {1, 2, 4}, 8 to 64 ranks, its ranks reporting their wait inside
compute): a GPU made 10%, 20% or 50% slower at one of three places of the mesh (the
first rank, one in the middle, the last rank), or a healthy pattern (warm-up, jitter, a
heavier last stage, rank 0's host work, GC pauses, a dataloader stall, moving sequence
length imbalance, a restart, an elastic resize), or one TP position slowed in every TP
group (a mesh pattern, Train_Straggler_Mapping's). Onsets move by a few seconds from case to case, so the
scrape phase differs. promtool evaluates the rendered rules (rules/stragglers.yaml, the
default config) on the case's scrapes (every 30 s) at the families' own interval (1m,
``family_intervals``, the same for both), and the firing straggler alerts at each
evaluation are read from its output.

Then what real clusters do (``benchmarks.behaviours``: blips, moving contention,
restarts and warm-up, recurring throttles, missed scrapes, a missing wait metric) and a
24-hour soak of a 256-rank job with all of it mixed in and a few faults
(``benchmarks.soak``): false pages per job-day, misroutes, episodes per fault.

Scores: a case with a slow GPU is *detected* when a straggler alert points at it within
``DEADLINE`` minutes of the onset (Persistent for its rank, or TPGroup for its TP group),
and *localized* when the first straggler alert to fire names its rank alone. An alert is
*false* when it points at no slow GPU (every alert of a healthy case is). Latency is from
the onset to the first alert that points at the GPU.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from obsgen import promtool
from obsgen.config import defaults, group_interval
from obsgen.mesh import Mesh
from obsgen.synth import (HostWork, Job, NcclExporter, Pauses, Restart, RotatingSlow, SlowRank,
                          elastic)
from tests.promtool import support

ROOT = Path(__file__).resolve().parent.parent
RULES = (ROOT / "rules" / "stragglers.yaml", ROOT / "rules" / "nccl.yaml")
RULES_ARE = "`rules/stragglers.yaml` and `rules/nccl.yaml` as rendered from the default config"
OUT = ROOT / "benchmarks" / "DETECTION.md"
MIN = 60
ONSET = 20 * MIN  # model seconds: after warm-up and two rate windows
DEADLINE = {1.1: 10, 1.2: 5, 1.5: 5}  # minutes the target allows per slowdown
MINUTES = 40  # of each case
LATE = "Train_Straggler_LateArrival"
MAPPING = "Train_Straggler_Mapping"


def _every() -> str:
    """The interval both families' groups are rendered with: promtool evaluates every
    group of a test at the test's one evaluation_interval."""
    every = {group_interval(defaults(), f) or "30s" for f in ("stragglers", "nccl")}
    if len(every) != 1:
        raise SystemExit(f"the stragglers and nccl families evaluate at {sorted(every)}: "
                         "detect needs one interval")
    return every.pop()


EVERY = _every()
ALERTS = ("Train_Straggler_Persistent", "Train_Straggler_TPGroup", "Train_Straggler_Transient",
          MAPPING, LATE)
BUSY = ALERTS[:2]  # the alerts from busy time that name a GPU (or its TP group)
READS = {"train_compute_seconds_sum", "train_compute_seconds_count",
         "train_compute_wait_seconds_sum", "train_compute_wait_seconds_count",
         "train_rank_mesh_info", "nccl_collective_last_arrival_total",
         "nccl_collective_aligned_total"}


@dataclass
class Result:
    name: str
    slow: int | None  # the slow rank (None: a healthy case)
    factor: float | None
    onset: float
    fired: dict[float, set[tuple]] = field(default_factory=dict)  # minute -> alerts
    pattern: tuple[str, str] | None = None  # (axis, position) of a mesh pattern, any stage

    def points_at_slow(self, alert: tuple, job: Job) -> bool:
        name, labels = alert[0], dict(alert[1])
        if self.pattern is not None:
            return name == MAPPING and (labels.get("mesh_axis"),
                                        labels.get("mesh_position")) == self.pattern
        if self.slow is None or name in ("Train_Straggler_Transient", MAPPING):
            return False
        if name in ("Train_Straggler_Persistent", LATE):
            return labels.get("rank") == str(self.slow)
        return labels.get("tp_group") == str(min(job.physics().mesh.group(self.slow, "tp")))

    def distinct(self) -> set[tuple]:
        return set().union(*self.fired.values()) if self.fired else set()

    def first(self, job: Job, pointing: bool, names: tuple[str, ...] = BUSY + (MAPPING,)
              ) -> tuple[float, tuple] | None:
        """The first alert among ``names`` to fire (pointing at the slow GPU, or at all)."""
        for minute in sorted(self.fired):
            hits = [a for a in self.fired[minute] if a[0] in names
                    and (not pointing or self.points_at_slow(a, job))]
            if hits:
                return minute, sorted(hits)[0]
        return None


def meshes() -> list[tuple[int, int, int]]:
    return [(tp, pp, dp) for tp in (1, 2, 4, 8) for pp in (1, 2, 4) for dp in (1, 2, 4)
            if 8 <= tp * pp * dp <= 64]


def _job(tp: int, pp: int, dp: int, seed: int, **kw) -> Job:
    ranks = tp * pp * dp
    # the NCCL sidecar aligns the TP groups (the DP groups without tensor parallelism)
    return Job(job_id="detect", ranks=ranks, ranks_per_node=min(8, ranks), tp=tp, pp=pp,
               microbatches=8, reports_mesh=True, seed=seed,
               nccl=NcclExporter(group="tp" if tp > 1 else "dp"), **kw)


def positions(tp: int, pp: int, dp: int) -> dict[str, int]:
    m = Mesh(tp=tp, pp=pp, dp=dp)
    return {"first rank": 0, "middle": m.rank_of(tp=tp // 2, dp=dp // 2, pp=pp // 2),
            "last rank": m.world - 1}


def injected(quick: bool = False) -> list[tuple[str, Job, int, float, float]]:
    out, k = [], 0
    for tp, pp, dp in meshes()[:3] if quick else meshes():
        for where, rank in positions(tp, pp, dp).items():
            for factor in (1.1, 1.2, 1.5):
                onset = ONSET + (k * 7) % 30  # every scrape phase
                job = _job(tp, pp, dp, seed=k + 1,
                           faults=(SlowRank(rank=rank, factor=factor, start=onset),))
                out.append((f"TP{tp} PP{pp} DP{dp}, {where} (rank {rank}), "
                            f"{round((factor - 1) * 100)}% slower", job, rank, factor, onset))
                k += 1
    return out


def patterns(quick: bool = False) -> list[tuple[str, Job, tuple[str, str]]]:
    """The last TP position 20% slower in every TP group of the job, in meshes with two or
    more TP groups per stage: a mapping pattern, Train_Straggler_Mapping's (per stage)."""
    out, k = [], 500
    for tp, pp, dp in [m for m in meshes() if m[0] > 1 and m[2] > 1][:2 if quick else None]:
        mesh = Mesh(tp=tp, pp=pp, dp=dp)
        slow = [r for r in range(mesh.world) if mesh.coords(r)["tp"] == tp - 1]
        onset = ONSET + (k * 7) % 30
        job = _job(tp, pp, dp, seed=k, faults=tuple(SlowRank(rank=r, factor=1.2, start=onset)
                                                      for r in slow))
        out.append((f"TP{tp} PP{pp} DP{dp}, TP position {tp - 1} of every TP group, 20% slower",
                    job, ("tp", str(tp - 1)), onset))
        k += 1
    return out


HEALTHY = {
    "warm-up, 3% jitter": lambda m, s: _job(*m, seed=s),
    "5% jitter, each GPU within 3% of nominal speed": lambda m, s: _job(*m, seed=s, noise=0.05,
                                                                   rank_spread=0.015),
    "a last stage 25% heavier": lambda m, s: _job(*m, seed=s, stage_compute=(1.0,) * (m[1] - 1) + (1.25,)),
    "rank 0 logging, evaluating and checkpointing outside compute":
        lambda m, s: _job(*m, seed=s, faults=(HostWork(rank=0, seconds=0.4, start=5 * MIN),)),
    "GC pauses of 300 ms, twice a minute per rank":
        lambda m, s: _job(*m, seed=s, faults=(Pauses(seconds=0.3, per_minute=2.0),)),
    "one rank's dataloader stalling for 2 minutes":
        lambda m, s: _job(*m, seed=s, faults=(HostWork(rank=1, seconds=30.0, start=ONSET,
                                                       end=ONSET + 2 * MIN),)),
    "sequence-length imbalance moving between ranks every 30 s (up to 8%)":
        lambda m, s: _job(*m, seed=s, faults=(RotatingSlow(factor=1.08, period=30, start=5 * MIN),)),
    "a restart with a 3-minute gap": lambda m, s: _job(*m, seed=s, faults=(Restart(at=ONSET, gap=3 * MIN),)),
    "an elastic resize to half the DP replicas, 2 minutes apart":
        lambda m, s: elastic(_job(*m, seed=s), at=ONSET, gap=2 * MIN, ranks=m[0] * m[1] * m[2] // 2),
}
HEALTHY_MESHES = ((1, 2, 4), (2, 2, 2), (8, 2, 2), (4, 4, 2))


def healthy(quick: bool = False) -> list[tuple[str, Job | list[Job]]]:
    out, k = [], 1000
    for name, make in HEALTHY.items():
        for mesh in HEALTHY_MESHES[:1] if quick else HEALTHY_MESHES:
            if mesh[1] == 1 and "last stage" in name:
                continue
            out.append((f"{name} (TP{mesh[0]} PP{mesh[1]} DP{mesh[2]})", make(mesh, k)))
            k += 1
    return out


_FAIL = re.compile(r"alertname: (\S+), time: ([0-9hms]+),")
_LABELS = re.compile(r"Labels:\{([^}]*)\}")


def _minutes(text: str) -> float:
    parts = dict((u, float(n)) for n, u in re.findall(r"([0-9.]+)([hms])", text))
    return parts.get("h", 0) * 60 + parts.get("m", 0) + parts.get("s", 0) / 60


def evaluate(job: Job | list[Job], start: float, end: float) -> dict[float, set[tuple]]:
    """The straggler alerts firing at every evaluation from ``start`` to ``end`` minutes
    (of a job, or of the runs of one, as an elastic resize makes)."""
    probes = [{"eval_time": support._minutes(m / 2), "alertname": a, "exp_alerts": []}
              for m in range(int(start * 2), int(end * 2) + 1) for a in ALERTS]
    doc = {"rule_files": [str(r) for r in RULES], "evaluation_interval": EVERY,
           "tests": [{"name": "detect", "interval": "30s",
                      "input_series": support.input_series(
                          job if isinstance(job, list) else [job], end, READS),
                      "alert_rule_test": probes}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
        yaml.safe_dump(doc, fh)
        fh.flush()
        proc = subprocess.run([promtool.find(), "test", "rules", fh.name],
                              capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    fired: dict[float, set[tuple]] = {}
    # each failed probe: "alertname: X, time: T," then "exp:[]," then "got:[ Labels:{...} ...]"
    for block in re.split(r"\n\s*alertname: ", "\n" + out)[1:]:
        head = _FAIL.match("alertname: " + block)
        if not head:
            continue
        got = block.split("got:", 1)[1] if "got:" in block else ""
        for labels in _LABELS.findall(got):
            pairs = tuple(sorted((k, v) for k, v in re.findall(r'(\w+)="([^"]*)"', labels)
                                 if k in ("rank", "tp_group", "pp_group", "job_id", "stage", "mesh_axis",
                                          "mesh_position")))
            fired.setdefault(_minutes(head.group(2)), set()).add((head.group(1), pairs))
    return fired


def run(quick: bool = False) -> tuple[list, list]:
    inj, ok = [], []
    for name, job, rank, factor, onset in injected(quick):
        t0 = time.monotonic()
        r = Result(name, rank, factor, onset / MIN,
                   evaluate(job, onset / MIN - 2, MINUTES))
        inj.append((r, job))
        print(f"{name}: {_summary(r, job)} ({time.monotonic() - t0:.1f} s)", flush=True)
    pat = []
    for name, job, where, onset in patterns(quick):
        r = Result(name, None, 1.2, onset / MIN, evaluate(job, onset / MIN - 2, MINUTES), where)
        pat.append((r, job))
        print(f"{name}: {_summary(r, job)}", flush=True)
    for name, job in healthy(quick):
        r = Result(name, None, None, 0.0, evaluate(job, 5, MINUTES))
        ok.append((r, job))
        print(f"healthy, {name}: {len(r.distinct())} alerts", flush=True)
    return inj, pat, ok


def _latency(r: Result, job: Job, names: tuple[str, ...] = BUSY + (MAPPING,)) -> float | None:
    hit = r.first(job, pointing=True, names=names)
    return None if hit is None else hit[0] - r.onset


def _summary(r: Result, job: Job) -> str:
    lat = _latency(r, job)
    return "missed" if lat is None else f"{lat:.1f} min"


def scores(inj: list, pat: list, ok: list) -> dict:
    detected = localized = late_detected = 0
    true_alerts = false_alerts = 0
    lat: dict[float, list[float]] = {}
    late: dict[float, list[float]] = {}
    for r, job in inj:
        latency = _latency(r, job)
        if latency is not None and latency <= DEADLINE[r.factor]:
            detected += 1
        if latency is not None:
            lat.setdefault(r.factor, []).append(latency)
        la = _latency(r, job, (LATE,))
        if la is not None and la <= DEADLINE[r.factor]:
            late_detected += 1
        if la is not None:
            late.setdefault(r.factor, []).append(la)
        first = r.first(job, pointing=False)
        if first and first[1][0] == "Train_Straggler_Persistent" and r.points_at_slow(first[1], job):
            localized += 1
    pattern_named = 0
    for r, job in pat:
        latency = _latency(r, job, (MAPPING,))
        pattern_named += latency is not None and latency <= DEADLINE[r.factor]
    for r, job in inj + pat:
        for a in r.distinct():
            if r.points_at_slow(a, job):
                true_alerts += 1
            else:
                false_alerts += 1
    false_pages = {r.name: len(r.distinct()) for r, _ in ok}
    false_alerts_total = false_alerts + sum(false_pages.values())
    stats = lambda d: {f: (statistics.median(v), _p95(v), len(v)) for f, v in sorted(d.items())}
    return {"cases": len(inj), "detected": detected, "localized": localized,
            "late_detected": late_detected, "patterns": len(pat), "pattern_named": pattern_named,
            "recall": detected / len(inj) if inj else 0.0,
            "late_recall": late_detected / len(inj) if inj else 0.0,
            "top1": localized / len(inj) if inj else 0.0,
            "precision": true_alerts / (true_alerts + false_alerts_total)
            if true_alerts + false_alerts_total else 0.0,
            "latency": stats(lat), "late_latency": stats(late),
            "false_pages": false_pages}


def _p95(values: list[float]) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, -(-95 * len(v) // 100) - 1))]


def _named(alert: tuple) -> str:
    return (f"{alert[0].removeprefix('Train_Straggler_')} "
            + ", ".join(f"{k}={v}" for k, v in alert[1]
                        if k in ("rank", "tp_group", "stage", "mesh_axis", "mesh_position")))


def report(inj: list, pat: list, ok: list, s: dict) -> str:
    met = lambda ok_: "met" if ok_ else "**missed**"
    lines = [
        "# Straggler detection (make detect)", "",
        "Written by `python -m benchmarks.detect` (`make detect`, also run by `make bench`); "
        f"see the module docstring for the cases and the scores. Rules: {RULES_ARE}, evaluated by promtool "
        f"every {EVERY} on each case's scrapes (the ranks' busy time and the NCCL sidecar's last "
        "arrivals in the TP groups, or the DP groups without tensor parallelism).", "",
        "| target | value | |", "|---|---:|---|",
        f"| top-1 localization >= 95% | {s['top1']:.1%} ({s['localized']}/{s['cases']}) | {met(s['top1'] >= 0.95)} |",
        f"| precision >= 0.95 (every straggler alert) | {s['precision']:.3f} | {met(s['precision'] >= 0.95)} |",
        f"| recall >= 0.95 from busy time (within 10 min at 10%, 5 min at 20% and 50%) | {s['recall']:.3f} ({s['detected']}/{s['cases']}) | {met(s['recall'] >= 0.95)} |",
        f"| recall >= 0.95 from late arrivals (same deadlines) | {s['late_recall']:.3f} ({s['late_detected']}/{s['cases']}) | {met(s['late_recall'] >= 0.95)} |",
        f"| mesh patterns named as one Mapping alert per stage within 5 min | {s['pattern_named']}/{s['patterns']} | {met(s['pattern_named'] == s['patterns'])} |",
        f"| 0 false pages on healthy jobs | {sum(s['false_pages'].values())} | {met(sum(s['false_pages'].values()) == 0)} |",
    ]
    for key, what in (("latency", "busy time"), ("late_latency", "late arrival")):
        for f, (p50, p95, n) in s[key].items():
            lines.append(f"| {what}: latency at {round((f - 1) * 100)}% slower, p95 <= {DEADLINE[f]} min | "
                         f"p50 {p50:.1f}, p95 {p95:.1f} min ({n} detected) | {met(p95 <= DEADLINE[f])} |")
    lines += ["", "## Cases with a slow GPU", "",
              "| case | first alert from busy time | latency (min) | late arrival (min) | alerts pointing elsewhere |",
              "|---|---|---:|---:|---:|"]
    for r, job in inj:
        first = r.first(job, pointing=False)
        lat, la = _latency(r, job), _latency(r, job, (LATE,))
        wrong = sum(1 for a in r.distinct() if not r.points_at_slow(a, job))
        lines.append(f"| {r.name} | {'none' if first is None else _named(first[1])} | "
                     f"{'missed' if lat is None else f'{lat:.1f}'} | "
                     f"{'missed' if la is None else f'{la:.1f}'} | {wrong} |")
    lines += ["", "## Mesh patterns (one slow TP position in every TP group)", "",
              "| case | first alert | latency (min) | alerts pointing elsewhere |", "|---|---|---:|---:|"]
    for r, job in pat:
        first = r.first(job, pointing=False, names=ALERTS)
        lat = _latency(r, job, (MAPPING,))
        wrong = sum(1 for a in r.distinct() if not r.points_at_slow(a, job))
        lines.append(f"| {r.name} | {'none' if first is None else _named(first[1])} | "
                     f"{'missed' if lat is None else f'{lat:.1f}'} | {wrong} |")
    lines += ["", "## Healthy cases (every alert is a false page)", "",
              "| case | straggler alerts |", "|---|---:|"]
    for name, n in s["false_pages"].items():
        lines.append(f"| {name} | {n} |")
    return "\n".join(lines) + "\n"


def episodes_and_misroutes(inj: list) -> tuple[int, int]:
    """The most episodes of one alert that points at a case's slow GPU (a fault must give
    one), and the alerts routed to the workload team for it (misroutes)."""
    from .behaviours import WORKLOAD, episodes
    most = misroutes = 0
    for r, job in inj:
        runs = episodes(r.fired)
        most = max([most] + [len(v) for a, v in runs.items() if r.points_at_slow(a, job)])
        misroutes += sum(1 for a in runs if a[0] in WORKLOAD)
    return most, misroutes


def realism(inj: list, quick: bool, hours: float) -> list[str]:
    """The targets of what real clusters do (benchmarks/behaviours.py) and of the long soak
    (benchmarks/soak.py), with their tables."""
    from . import behaviours, soak
    outcomes = behaviours.run(log=lambda line: print(line, flush=True))
    if quick:
        outcomes = outcomes[:12]
    day = soak.run(hours, log=lambda line: print(line, flush=True))
    most, mis = episodes_and_misroutes(inj)
    b_false = sum(o.false() for o in outcomes if o.case.fault is None)
    b_mis = sum(o.misroutes() for o in outcomes)
    b_bad = [o for o in outcomes if o.verdict() != "ok"]
    b_most = max((o.most_episodes() for o in outcomes), default=0)
    ok = lambda cond: "met" if cond else "**missed**"  # noqa: E731
    benign = sum(1 for o in outcomes if o.case.fault is None)
    lines = [
        "", "## What real clusters do: benign noise, moving slowness, recurrence, restarts", "",
        "`benchmarks/behaviours.py` (cases) and `benchmarks/soak.py` (the long soak). A false "
        "page is an alert that points at no fault; a misroute is a hardware fault paged to the "
        "workload team, or slowness that moves paged to the platform team; an episode is one "
        "alert firing from its start to its end.", "",
        "| target | value | |", "|---|---:|---|",
        f"| 0 false pages per job-day in the soak ({soak.RANKS} ranks, {hours:g} model hours) | "
        f"{len(day.false_pages()) / (hours / 24):.2f} | {ok(not day.false_pages())} |",
        f"| 0 false pages on {benign} benign cases | {b_false} | {ok(b_false == 0)} |",
        f"| 0 misroutes (slow GPUs above, the cases below, the soak) | "
        f"{mis + b_mis + len(day.misroutes())} | {ok(mis + b_mis + len(day.misroutes()) == 0)} |",
        f"| 1 episode per alert per fault (most seen) | "
        f"{max(most, b_most, max((sum(1 for x, _, _ in e if x == a) for e in day.matched().values() for a, _, _ in e), default=0))} | "
        f"{ok(max(most, b_most) <= 1)} |",
        f"| every case as stated (below) | {len(outcomes) - len(b_bad)}/{len(outcomes)} | "
        f"{ok(not b_bad)} |", "",
        "### Cases", "",
        *behaviours.table(outcomes), "",
        f"### The soak: one {soak.RANKS}-rank job, {hours:g} model hours", "",
        *soak.report(day)]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few cases, printed, nothing written")
    p.add_argument("--soak-hours", type=float, default=24.0,
                   help="model hours of the long soak (default 24; --quick: 2)")
    p.add_argument("--rules", type=Path, metavar="DIR",
                   help="the rules/ folder another config rendered (default: this repository's, "
                        "the default config); the report goes to --out")
    p.add_argument("--config-text", default=None,
                   help="with --rules: the config that rendered them, as the report names it")
    p.add_argument("--out", type=Path, default=OUT, help=f"report file (default {OUT.relative_to(ROOT)})")
    args = p.parse_args(argv)
    if args.rules:
        global RULES, RULES_ARE  # the soak reads them too (one module: see the end)
        RULES = tuple(args.rules / r.name for r in RULES)
        RULES_ARE = (f"`stragglers.yaml` and `nccl.yaml` as rendered from "
                     f"{args.config_text or 'another config'}")
        missing = [str(r) for r in RULES if not r.is_file()]
        if missing:
            print(f"detect: --rules: no {', '.join(missing)}", file=sys.stderr)
            return 2
    t0 = time.monotonic()
    inj, pat, ok = run(args.quick)
    s = scores(inj, pat, ok)
    text = report(inj, pat, ok, s) + "\n".join(
        realism(inj, args.quick, 2.0 if args.quick else args.soak_hours)) + "\n"
    if args.quick:
        print(text)
    else:
        args.out.write_text(text)
        print(f"wrote {args.out} ({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    # run as benchmarks.detect, the module benchmarks.soak imports, not as a second copy
    from benchmarks import detect
    sys.exit(detect.main())
