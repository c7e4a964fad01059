"""A long benign soak: one 256-rank job for 24 model hours with every benign behaviour of
a real cluster mixed in, and a few faults, through the straggler and NCCL rules.

    python -m benchmarks.soak            # printed; make detect writes it into DETECTION.md
    python -m benchmarks.soak --hours 6  # a shorter soak

The job is TP4 x PP4 x DP16 on 32 hosts of 8 GPUs, its ranks reporting their wait inside
compute, the NCCL sidecar aligning its TP groups. Benign, all day: warm-up after the start
and after every restart (one rank warming 5 minutes longer), a last stage 25% heavier,
sequence-length imbalance up to 1.34x a step, GC pauses, rank 0's host work, 1% of scrapes
missed, blips of one to three minutes up to 3x on random ranks (one every 30 minutes on
average), cheap contention that moves between ranks every 30 s, three restarts (3-minute
gaps, on other hosts and on the same ones). Faults: GPUs 10%, 20% and 50% slower for an
hour or more, one across a restart on the same hosts, a GPU throttled 2x for 4 minutes in
every 10 for two hours, and one hour of contention moving between ranks that costs the
job a fifth of its speed.

The scrapes of the whole day are simulated once and cut into chunks of ``CHUNK`` model
hours, each read by promtool with the ``LEAD`` before it (enough history for every
window the rules read: recurrence, hold, warm-up); the straggler alerts firing at every
evaluation of a chunk's own hours are read from its output.

Scores: every alert episode is matched to a fault (behaviours.points_at, during the fault
and ``RESOLVE`` minutes after it) or is a false page; a workload alert during a hardware
fault, or a platform alert during moving slowness, is a misroute.
"""
from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import yaml

from obsgen import promtool
from obsgen.scenarios.series import SCRAPE, encode, series_name
from obsgen.synth import (HostWork, Job, MovingSlow, NcclExporter, Pauses, Recurring, Restart,
                          ScrapeMisses, SeqImbalance, SlowRank, WarmRank)

from .behaviours import RESOLVE, Hardware, Moving, episodes, misrouted, points_at
from . import detect
from .detect import ALERTS, EVERY, READS

MIN, HOUR = 60, 3600
CHUNK = 4  # model hours of one promtool run
LEAD = 1  # model hours of history before each chunk
RANKS, TP, PP = 256, 4, 4


def faults(hours: float, seed: int = 11) -> tuple[tuple, list]:
    """The day's faults and benign events, and the faults to be paged (incidents)."""
    rng = random.Random(seed)
    end = hours * HOUR
    out: list = [SeqImbalance(worst=1.34), Pauses(seconds=0.3, per_minute=1.0),
                 HostWork(rank=0, seconds=0.4), ScrapeMisses(share=0.01),
                 WarmRank(rank=77, factor=1.5, seconds=5 * MIN)]
    incidents: list = []
    # restarts: 3-minute gaps, alternately on other hosts and the same ones
    restarts = [h * HOUR for h in (5.5, 11.2, 19.7) if h * HOUR < end - HOUR]
    out += [Restart(at=at, gap=3 * MIN, moves=i % 2 == 1) for i, at in enumerate(restarts)]
    busy = [(at - 10 * MIN, at + 15 * MIN) for at in restarts]

    def free(a: float, b: float) -> bool:
        return all(b <= x or a >= y for x, y in busy)

    def add(fault, a: float, b: float, incident) -> None:
        out.append(fault)
        busy.append((a, b + RESOLVE * MIN))
        if incident is not None:
            incidents.append(incident)

    # faults, at fixed times of the day where the day is long enough
    plan = [(1.0, 1.2, 60, 103), (2.6, 1.1, 90, 170), (7.0, 1.5, 60, 211),
            (13.0, 1.2, 80, 34)]
    for start_h, factor, minutes_, rank in plan:
        a, b = start_h * HOUR + 17, start_h * HOUR + 17 + minutes_ * MIN
        if b < end - 20 * MIN:
            add(SlowRank(rank=rank, factor=factor, start=a, end=b), a, b,
                Hardware(rank, a / MIN, b / MIN, deadline=5 if factor >= 1.2 else 10))
    # a GPU slow across a restart on the same hosts (the third restart's hosts are the
    # second's: alternate moves)
    same = [at for i, at in enumerate(restarts) if i % 2 == 0 and i > 0]
    if same:
        a, b = same[0] - 40 * MIN, same[0] + 40 * MIN
        out.append(SlowRank(rank=150, factor=1.3, start=a, end=b))
        incidents.append(Hardware(150, a / MIN, b / MIN, deadline=5))
        busy.append((a, b + RESOLVE * MIN))
    if end >= 17 * HOUR:
        a = 15 * HOUR
        add(Recurring(rank=201, factor=2.0, on=4 * MIN, every=10 * MIN, start=a,
                      end=a + 2 * HOUR), a, a + 2 * HOUR, Hardware(201, a / MIN, (a + 2 * HOUR) / MIN))
    if end >= 23 * HOUR:
        a = 21.5 * HOUR
        add(MovingSlow(factor=1.19, period=30, start=a, end=a + HOUR, seed=5), a, a + HOUR,
            Moving(a / MIN, (a + HOUR) / MIN, must=True))
    # benign, all day: blips on any rank but a faulty one's, away from restarts, and cheap
    # moving contention where no fault is
    faulty = {i.rank for i in incidents if isinstance(i, Hardware)}
    gaps = [(at - 10 * MIN, at + 15 * MIN) for at in restarts]
    t = 20 * MIN
    while t < end - 10 * MIN:
        t += rng.expovariate(1 / (30 * MIN))
        length = rng.uniform(1, 2.95) * MIN
        rank = rng.randrange(RANKS)
        if rank not in faulty and all(t + length + 5 * MIN <= x or t - 5 * MIN >= y
                                      for x, y in gaps):
            out.append(SlowRank(rank=rank, factor=rng.choice((1.2, 1.5, 2.0, 3.0)),
                                start=t, end=t + length))
    for h in (3.5, 9.0, 17.5, 23.2):
        a = h * HOUR
        if a + 40 * MIN < end and free(a, a + 40 * MIN):
            out.append(MovingSlow(factor=1.08, period=30, start=a, end=a + 40 * MIN, seed=int(h * 10)))
    return tuple(out), incidents


def job(hours: float) -> tuple[Job, list]:
    f, incidents = faults(hours)
    return Job(job_id="soak", ranks=RANKS, ranks_per_node=8, tp=TP, pp=PP, microbatches=16,
               reports_mesh=True, stage_compute=(1.0, 1.0, 1.0, 1.25), seed=3,
               nccl=NcclExporter(group="tp"), buckets=False, faults=f), incidents


def scrapes(j: Job, hours: float) -> tuple[dict[tuple, list], int]:
    ticks = int(hours * HOUR // SCRAPE) + 1
    table: dict[tuple, list] = {}
    for scrape in j.run(until=(ticks - 1) * SCRAPE):
        i = int(round(scrape.time / SCRAPE))
        for key, value in scrape.samples.items():
            if dict(key)["__name__"] in READS:
                table.setdefault(key, [None] * ticks)[i] = value
    return table, ticks


_GOT = re.compile(r'expr: "ALERTS.*?", time: ([0-9hms]+),\n\s*exp: .*?\n\s*got: (.*?)\n')


def chunk(table: dict, first: int, last: int, judged: int) -> dict[float, set]:
    """Alerts firing at every evaluation from tick ``judged`` to ``last`` (minutes of the
    day), the input cut from tick ``first``."""
    offset = first * SCRAPE / MIN
    series = [{"series": series_name(k), "values": encode(v[first:last + 1])}
              for k, v in sorted(table.items()) if any(x is not None for x in v[first:last + 1])]
    every = int(re.fullmatch(r"(\d+)s", EVERY).group(1)) if EVERY.endswith("s") else 60
    probes = [{"expr": 'ALERTS{alertstate="firing"}',
               "eval_time": f"{(t - first) * SCRAPE}s", "exp_samples": []}
              for t in range(judged, last + 1, max(1, every // SCRAPE))]
    doc = {"rule_files": [str(r) for r in detect.RULES], "evaluation_interval": EVERY,
           "tests": [{"name": "soak", "interval": f"{SCRAPE}s", "input_series": series,
                      "promql_expr_test": probes}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
        yaml.dump(doc, fh, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), width=1 << 20)
        fh.flush()
        proc = subprocess.run([promtool.find(), "test", "rules", fh.name],
                              capture_output=True, text=True)
    fired: dict[float, set] = {}
    for when, got in _GOT.findall(proc.stdout + proc.stderr):
        minute = offset + _minutes(when)
        for labels in re.findall(r"\{([^}]*)\}", got):
            pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            if pairs.get("alertname") not in ALERTS:
                continue
            keep = tuple(sorted((k, v) for k, v in pairs.items()
                                if k in ("rank", "tp_group", "pp_group", "job_id", "stage",
                                         "mesh_axis", "mesh_position")))
            fired.setdefault(minute, set()).add((pairs["alertname"], keep))
    return fired


def _minutes(text: str) -> float:
    parts = dict((u, float(n)) for n, u in re.findall(r"([0-9.]+)([hms])", text))
    return parts.get("h", 0) * 60 + parts.get("m", 0) + parts.get("s", 0) / 60


@dataclass
class Soak:
    hours: float
    job: Job
    incidents: list
    runs: dict  # alert -> [(first, last minute)]
    seconds: float

    def matched(self) -> dict[int, list]:
        """Incident index -> the alert episodes that point at it."""
        out: dict[int, list] = {i: [] for i in range(len(self.incidents))}
        for alert, runs in self.runs.items():
            for first, last in runs:
                for i, inc in enumerate(self.incidents):
                    end = inc.end if inc.end is not None else self.hours * 60
                    if (points_at(alert, inc, self.job) and first >= inc.onset
                            and first <= end + RESOLVE):
                        out[i].append((alert, first, last))
        return out

    def unmatched(self) -> list[tuple]:
        hit = {(a, f) for eps in self.matched().values() for a, f, _ in eps}
        return [(a, f, l) for a, runs in self.runs.items() for f, l in runs if (a, f) not in hit]

    def misroutes(self) -> list[tuple]:
        out = []
        for alert, first, last in self.unmatched():
            for inc in self.incidents:
                end = inc.end if inc.end is not None else self.hours * 60
                if inc.onset <= first <= end + RESOLVE and misrouted(alert, inc):
                    out.append((alert, first, last))
                    break
        return out

    def false_pages(self) -> list[tuple]:
        mis = set(self.misroutes())
        return [e for e in self.unmatched() if e not in mis]


def run(hours: float = 24, log=print) -> Soak:
    t0 = time.monotonic()
    j, incidents = job(hours)
    table, ticks = scrapes(j, hours)
    log(f"soak: {RANKS} ranks, {hours:g} model hours, {len(table)} series, "
        f"simulated in {time.monotonic() - t0:.0f} s")
    fired: dict[float, set] = {}
    per = int(CHUNK * HOUR // SCRAPE)
    lead = int(LEAD * HOUR // SCRAPE)
    for judged in range(int(20 * MIN // SCRAPE), ticks, per):
        t1 = time.monotonic()
        last = min(ticks - 1, judged + per - 1)
        fired.update(chunk(table, max(0, judged - lead), last, judged))
        log(f"soak: hours {judged * SCRAPE / HOUR:.1f} to {(last + 1) * SCRAPE / HOUR:.1f} "
            f"({time.monotonic() - t1:.0f} s)")
    step = max(1, int(re.fullmatch(r"(\d+)s", EVERY).group(1)) // SCRAPE if EVERY.endswith("s") else 2)
    return Soak(hours, j, incidents, episodes(fired, step=step * SCRAPE / MIN),
                time.monotonic() - t0)


def _named(alert: tuple) -> str:
    return (alert[0].removeprefix("Train_Straggler_") + " "
            + ", ".join(f"{k}={v}" for k, v in alert[1] if k != "job_id")).strip()


def _incident(inc) -> str:
    if isinstance(inc, Moving):
        return f"contention moving every 30 s, minutes {inc.onset:.0f} to {inc.end:.0f}"
    return (f"rank {inc.rank} slow, minutes {inc.onset:.0f} to "
            f"{'the end' if inc.end is None else f'{inc.end:.0f}'}")


def report(s: Soak) -> list[str]:
    days = s.hours / 24
    matched = s.matched()
    lines = [f"{len(s.job.faults)} faults and benign events in {s.hours:g} model hours of a "
             f"{RANKS}-rank TP{TP} x PP{PP} job ({s.seconds / 60:.0f} min to run).", "",
             "| measure | value | target |", "|---|---:|---|",
             f"| false pages per job-day | {len(s.false_pages()) / days:.2f} "
             f"({len(s.false_pages())} in {s.hours:g} h) | 0 |",
             f"| misroutes | {len(s.misroutes())} | 0 |",
             f"| faults paged | {sum(1 for i, e in matched.items() if e or (isinstance(s.incidents[i], Moving) and not s.incidents[i].must))}"
             f"/{len(s.incidents)} | all |",
             f"| most episodes of one alert for one fault | "
             f"{max((sum(1 for a, _, _ in e if a == x) for e in matched.values() for x, _, _ in e), default=0)} | 1 |",
             "", "| fault | alerts (first minute, episodes) | latency (min) | resolved after its end (min) |",
             "|---|---|---:|---:|"]
    for i, inc in enumerate(s.incidents):
        eps = matched[i]
        by: dict[tuple, list] = {}
        for a, f, l in eps:
            by.setdefault(a, []).append((f, l))
        alerts = "; ".join(f"{_named(a)} ({r[0][0]:.0f}, {len(r)})" for a, r in sorted(by.items())) or "none"
        lat = min((f for _, f, _ in eps), default=None)
        res = max((l for _, _, l in eps), default=None)
        lines.append(f"| {_incident(inc)} | {alerts} | "
                     f"{'' if lat is None else f'{lat - inc.onset:.1f}'} | "
                     f"{'' if res is None or inc.end is None or isinstance(inc, Moving) else f'{res + 0.5 - inc.end:.1f}'} |")
    for title, rows in (("False pages", s.false_pages()), ("Misroutes", s.misroutes())):
        if rows:
            lines += ["", f"{title}:", ""] + [f"- {_named(a)}, minutes {f:.1f} to {l:.1f}"
                                              for a, f, l in rows]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=24)
    args = p.parse_args(argv)
    print("\n".join(report(run(args.hours))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
