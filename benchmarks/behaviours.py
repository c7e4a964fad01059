"""What real clusters do to the straggler alerts: benign noise that must page nobody,
and faults that must page once, to the right team.

    python -m benchmarks.behaviours          # printed; make detect writes it into DETECTION.md

Each case is a sentence, a job of ``obsgen.synth`` and what it holds: ``None`` (benign:
every straggler alert is a false page), a hardware fault (a slow GPU: the platform alerts
that name its rank or TP group are right, a workload alert is a misroute), or a slowness
that moves between ranks (Train_Straggler_Transient is right, a platform alert is a
misroute). Magnitudes and durations come from the published figures in docs/background.md
(What real clusters do): blips of one to three minutes up to 3x, contention that moves
every 30 s, warm-up after every (re)start, sequence-length imbalance up to 1.34x a step, a
heavier last stage, throttles that recur, missed scrapes and a missing wait metric.

Episodes: one alert (name and labels) that fires, stops and fires again is two episodes;
a fault must give one episode per alert. A fixed fault must resolve within ``RESOLVE``
minutes of its end.
"""
from __future__ import annotations

from dataclasses import dataclass

import argparse
import sys
import time

from obsgen.synth import (HostWork, Job, MovingSlow, NcclExporter, Pauses, Recurring, Restart,
                          RotatingSlow, ScrapeMisses, SeqImbalance, SlowRank, WarmRank)

MIN = 60
RESOLVE = 15  # minutes from the end of a fault to the end of its alerts
PLATFORM = ("Train_Straggler_Persistent", "Train_Straggler_TPGroup",
            "Train_Straggler_LateArrival")
WORKLOAD = ("Train_Straggler_Transient", "Train_Straggler_Mapping")


@dataclass(frozen=True)
class Hardware:
    """A slow GPU (``rank``) from ``onset`` to ``end`` minutes: paged to platform within
    ``deadline`` minutes of ``onset`` (None: no latency target), once."""
    rank: int
    onset: float
    end: float | None = None
    deadline: float | None = None


@dataclass(frozen=True)
class Moving:
    """Slowness that moves between ranks from ``onset`` to ``end`` minutes: Transient may
    page (once), a platform alert is a misroute. ``must``: Transient must page."""
    onset: float
    end: float
    must: bool = False


@dataclass
class Case:
    jobs: list
    minutes: float
    fault: Hardware | Moving | None = None
    start: float = 0.0  # first minute evaluated


def _job(tp: int = 1, pp: int = 1, dp: int = 8, seed: int = 1, **kw) -> Job:
    ranks = tp * pp * dp
    return Job(job_id="behave", ranks=ranks, ranks_per_node=min(8, ranks), tp=tp, pp=pp,
               microbatches=8, reports_mesh=True, seed=seed,
               nccl=NcclExporter(group="tp" if tp > 1 else "dp"), **kw)


MESHES = {"DP8": (1, 1, 8), "TP2 PP2 DP2": (2, 2, 2), "TP4 PP2 DP2": (4, 2, 2)}
ON = 20  # minute the cases' events start: warm-up and the first windows behind them


def cases() -> dict[str, Case]:
    out: dict[str, Case] = {}
    k = 0
    for mesh, (tp, pp, dp) in MESHES.items():
        world = tp * pp * dp
        mid = world // 2 + 1
        j = lambda **kw: _job(tp, pp, dp, seed=100 + k, **kw)  # noqa: E731
        for factor in (1.5, 2.0, 3.0):
            for length in (1, 2, 2.9):
                out[f"{mesh}: one blip of {length:g} min at {factor:g}x on one rank"] = Case(
                    [j(faults=(SlowRank(rank=mid, factor=factor, start=ON * MIN + 7,
                                        end=(ON + length) * MIN + 7),))], ON + 25)
                k += 1
        out[f"{mesh}: contention moving to a random rank every 30 s, 19% slower"] = Case(
            [j(faults=(MovingSlow(factor=1.19, period=30, start=ON * MIN, end=(ON + 40) * MIN,
                                  seed=k),))], ON + 60, Moving(ON, ON + 40, must=True))
        out[f"{mesh}: a slowdown of 1.5x dwelling 2 minutes on each rank in turn"] = Case(
            [j(faults=(RotatingSlow(factor=1.5, period=2 * MIN, start=ON * MIN,
                                    end=(ON + 40) * MIN),))], ON + 60, Moving(ON, ON + 40))
        out[f"{mesh}: a restart with a 3-minute gap onto other hosts, warm-up on every rank"] = Case(
            [j(faults=(Restart(at=ON * MIN, gap=3 * MIN),))], ON + 30)
        out[f"{mesh}: a restart with a 3-minute gap on the same hosts, one rank warming 5 minutes at 1.5x"] = Case(
            [j(faults=(Restart(at=ON * MIN, gap=3 * MIN, moves=False),
                       WarmRank(rank=mid, factor=1.5, seconds=5 * MIN)))], ON + 30)
        out[f"{mesh}: one rank warming 5 minutes at 1.5x after the job starts"] = Case(
            [j(faults=(WarmRank(rank=mid, factor=1.5, seconds=5 * MIN),))], ON + 10)
        out[f"{mesh}: sequence-length imbalance, up to 1.34x a step, moving between replicas"] = Case(
            [j(faults=(SeqImbalance(worst=1.34),))], ON + 40)
        out[f"{mesh}: 2% of scrapes missed, GC pauses and rank 0's host work"] = Case(
            [j(faults=(ScrapeMisses(share=0.02), Pauses(seconds=0.3, per_minute=2.0),
                       HostWork(rank=0, seconds=0.4)))], ON + 40)
        if pp > 1:
            out[f"{mesh}: a last stage 30% heavier"] = Case(
                [j(stage_compute=(1.0,) * (pp - 1) + (1.3,))], ON + 40)
        # faults
        out[f"{mesh}: a GPU 20% slower, steady"] = Case(
            [j(faults=(SlowRank(rank=mid, factor=1.2, start=ON * MIN + 11),))], ON + 30,
            Hardware(mid, ON + 11 / 60, deadline=5))
        out[f"{mesh}: a GPU 2x slower 4 minutes in every 10, for 2 hours, then fixed"] = Case(
            [j(faults=(Recurring(rank=mid, factor=2.0, on=4 * MIN, every=10 * MIN,
                                 start=ON * MIN, end=(ON + 120) * MIN),))], ON + 140,
            Hardware(mid, ON, ON + 120))
        out[f"{mesh}: a GPU 20% slower from the first step after a restart on the same hosts"] = Case(
            [j(faults=(Restart(at=ON * MIN, gap=3 * MIN, moves=False),
                       SlowRank(rank=mid, factor=1.2, start=(ON + 3) * MIN)))], ON + 25,
            Hardware(mid, ON + 3))
        out[f"{mesh}: a GPU 20% slower for 30 minutes, then fixed"] = Case(
            [j(faults=(SlowRank(rank=mid, factor=1.2, start=ON * MIN, end=(ON + 30) * MIN),))],
            ON + 50, Hardware(mid, ON, ON + 30, deadline=5))
        k += 1
    # a TP group without the wait metric: one alert for the pipeline, not one per stage
    out["TP8 PP2 DP2 without the wait metric: a GPU of stage 0 20% slower"] = Case(
        [_job(8, 2, 2, seed=7, reports_wait=False,
              faults=(SlowRank(rank=9, factor=1.2, start=ON * MIN),))], ON + 25,
        Hardware(9, ON, deadline=5))
    return out


# scoring ----------------------------------------------------------------------------------
def episodes(fired: dict[float, set], step: float = 0.5) -> dict[tuple, list[tuple[float, float]]]:
    """Each alert (name, labels) -> its firing runs [(first, last minute)]."""
    runs: dict[tuple, list[list[float]]] = {}
    for minute in sorted(fired):
        for alert in fired[minute]:
            r = runs.setdefault(alert, [])
            if r and minute - r[-1][1] <= step + 1e-9:
                r[-1][1] = minute
            else:
                r.append([minute, minute])
    return {a: [tuple(x) for x in r] for a, r in runs.items()}


def points_at(alert: tuple, fault, job: Job) -> bool:
    name, labels = alert[0], dict(alert[1])
    if isinstance(fault, Moving):
        return name == "Train_Straggler_Transient"
    if not isinstance(fault, Hardware) or name not in PLATFORM:
        return False
    if "rank" in labels:
        return labels["rank"] == str(fault.rank)
    mesh = job.physics().mesh
    if "pp_group" in labels:  # one alert for a pipeline's TP groups
        return str(min(mesh.group(fault.rank, "pp"))) == labels["pp_group"] or any(
            str(min(mesh.group(m, "pp"))) == labels["pp_group"] for m in mesh.group(fault.rank, "tp"))
    return labels.get("tp_group") == str(min(mesh.group(fault.rank, "tp")))


def misrouted(alert: tuple, fault) -> bool:
    name = alert[0]
    return ((isinstance(fault, Hardware) and name in WORKLOAD)
            or (isinstance(fault, Moving) and name in PLATFORM))


@dataclass
class Outcome:
    sentence: str
    case: Case
    runs: dict[tuple, list[tuple[float, float]]]

    @property
    def job(self) -> Job:
        return self.case.jobs[0]

    def right(self) -> dict[tuple, list]:
        return {a: r for a, r in self.runs.items() if points_at(a, self.case.fault, self.job)}

    def misroutes(self) -> int:
        return sum(1 for a in self.runs if misrouted(a, self.case.fault))

    def false(self) -> int:
        """Alerts that point at no fault and are no misroute: false pages."""
        return sum(1 for a in self.runs if not points_at(a, self.case.fault, self.job)
                   and not misrouted(a, self.case.fault))

    def latency(self) -> float | None:
        right = self.right()
        if not right or self.case.fault is None:
            return None
        return min(r[0][0] for r in right.values()) - self.case.fault.onset

    def most_episodes(self) -> int:
        return max((len(r) for r in self.right().values()), default=0)

    def resolved_after(self) -> float | None:
        """Minutes from the fault's end to the end of its last alert."""
        end = getattr(self.case.fault, "end", None)
        right = self.right()
        if not isinstance(self.case.fault, Hardware) or end is None or not right:
            return None
        return max(r[-1][1] for r in right.values()) + 0.5 - end

    def verdict(self) -> str:
        f = self.case.fault
        problems = []
        if self.false():
            problems.append(f"{self.false()} false")
        if self.misroutes():
            problems.append(f"{self.misroutes()} misrouted")
        if f is not None and (not isinstance(f, Moving) or f.must) and not self.right():
            problems.append("missed")
        if self.most_episodes() > 1:
            problems.append(f"{self.most_episodes()} episodes")
        lat = self.latency()
        if isinstance(f, Hardware) and f.deadline is not None and lat is not None and lat > f.deadline:
            problems.append(f"late ({lat:.1f} min)")
        res = self.resolved_after()
        if res is not None and res > RESOLVE:
            problems.append(f"resolves {res:.1f} min after the fix")
        return "; ".join(problems) or "ok"


def run(only: str | None = None, log=print) -> list[Outcome]:
    from .detect import evaluate
    out = []
    for sentence, case in cases().items():
        if only and only not in sentence:
            continue
        t0 = time.monotonic()
        fired = evaluate(case.jobs if len(case.jobs) > 1 else case.jobs[0], case.start,
                         case.minutes)
        o = Outcome(sentence, case, episodes(fired))
        out.append(o)
        log(f"{sentence}: {o.verdict()} ({time.monotonic() - t0:.0f} s)")
    return out


def _named(alert: tuple) -> str:
    return (alert[0].removeprefix("Train_Straggler_") + " "
            + ", ".join(f"{k}={v}" for k, v in alert[1] if k != "job_id"))


def table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| case | alerts (episodes) | latency (min) | resolved after the fix (min) | verdict |",
             "|---|---|---:|---:|---|"]
    for o in outcomes:
        alerts = "; ".join(f"{_named(a)} ({len(r)})" for a, r in sorted(o.runs.items())) or "none"
        lat, res = o.latency(), o.resolved_after()
        lines.append(f"| {o.sentence} | {alerts} | {'' if lat is None else f'{lat:.1f}'} | "
                     f"{'' if res is None else f'{res:.1f}'} | {o.verdict()} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="the cases whose sentence holds this text")
    args = p.parse_args(argv)
    print("\n".join(table(run(args.only))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
