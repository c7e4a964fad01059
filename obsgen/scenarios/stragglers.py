"""Straggler scenarios, sized from ``straggler_ratio``, ``windows.rate``, ``windows.
straggler_persistence`` and the alerts' ``for``.

A slow GPU is three times as far above its stage as the threshold (20% at the default
7%); a healthy job's ranks differ by at most a seventh of it. A rank is judged once its
stage has two rate windows behind it, and its mean then crosses the threshold a third of
a rate window into the slowdown: Persistent fires within one rate window, its ``for``
and a minute of scrapes and evaluations of the onset.
"""
from __future__ import annotations

from ..synth import Job, Restart, RotatingSlow, SlowRank
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

P, T = "Train_Straggler_Persistent", "Train_Straggler_Transient"
G, MAP = "Train_Straggler_TPGroup", "Train_Straggler_Mapping"
JOB = "scenario-stragglers"
MIN = 60.0


def scenarios(s: Setting) -> list:
    r, rate = s.t("straggler_ratio"), s.w("rate")
    factor = round(1 + 3 * (r - 1), 3)
    spread = min(0.01, (r - 1) / 7)
    healthy = dict(job_id=JOB, rank_spread=spread, noise=min(0.03, 3 * spread))
    # warm-up (3m), then the stage's two rate windows, then a minute
    onset = 3 + 2 * rate + 1 + s.facts("stragglers")
    within = rate + s.for_(P) + 2 * s.every("stragglers")
    bound = (f"the rate window ({words(rate)}) + its for ({words(s.for_(P))}) + two "
             f"evaluations ({words(2 * s.every('stragglers'))})")
    quiet = [Quiet(a) for a in (P, T, G, MAP) if s.has(a)]
    out: list = [Scenario(
        f"a healthy job (ranks {spread:.1%} apart, warm-up, checkpoints) fires no straggler alert",
        [Job(**healthy)], onset + within + 5, quiet)]
    # New processes warm up together: judged against each other, never the old median
    # (a ruler reading records one evaluation late once divided the two).
    persist = s.w("straggler_persistence")
    for gap in (1, 3):
        out.append(Scenario(
            f"a restart with a {words(gap)} gap, new instances and their warm-up fires no "
            "straggler alert", [Job(**healthy, faults=(Restart(at=onset * MIN, gap=gap * MIN),))],
            onset + persist + s.for_(T) + 2, quiet))
    slow = f"one GPU {factor - 1:.0%} slower"
    if factor > 3:
        return out + [NotStated(f"{slow} fires {P}",
                                f"straggler_ratio {r:g}: a GPU {factor:g}x slower is a failing "
                                "GPU, not a straggler")]
    jobs = {
        f"{slow} in an 8-rank data-parallel job fires {P} for it alone within {bound}, "
        f"and never {T}": Job(**healthy, faults=(SlowRank(rank=3, factor=factor, start=onset * MIN),)),
        f"{slow} in TP=2 x PP=2 x DP=2 (its TP peer waits for it inside compute) fires {P} "
        f"for it alone within {bound}, and never {T}": Job(
            **healthy, tp=2, pp=2, reports_mesh=True,
            faults=(SlowRank(rank=5, factor=factor, start=onset * MIN),)),
    }
    for sentence, job in jobs.items():
        rank = job.faults[0].rank
        stage = rank * job.pp // job.ranks
        out.append(Scenario(sentence, [job], onset + within + 3, [
            Fires(P, onset, within, ({"job_id": JOB, "rank": str(rank), "stage": str(stage)},),
                  bound),
            *[Quiet(a) for a in (T, G, MAP) if s.has(a)]]))
    # A straggler that moves on each period: it recovers before Persistent's for ends
    # only if the period is short enough; count the ranks that straggled and recovered.
    k = s.t("straggler_transient_ranks")
    period = max(2.0, round(0.6 * rate * 2) / 2)  # the mean gets 60% of the way up
    if k > 7 or (k + 1) * period + rate > persist:
        out.append(NotStated(
            f"a straggler rotating between ranks fires {T}",
            f"straggler_transient_ranks {k} ranks rotating every {words(period)} do not all "
            f"straggle and recover within windows.straggler_persistence ({words(persist)}) "
            "in an 8-rank job"))
    else:
        start = onset
        end = start + 8 * period
        within_t = (k + 1) * period + rate + s.for_(T) + 2 * s.every("stragglers")
        out.append(Scenario(
            f"a rank {factor - 1:.0%} slower rotating every {words(period)} through the ranks "
            f"fires {T} within {words(within_t)} ({k + 1} periods, the rate window, its for)",
            [Job(**healthy, faults=(RotatingSlow(factor=factor, period=period * MIN,
                                                 start=start * MIN, end=end * MIN),))],
            start + within_t + 2, [Fires(T, start, within_t, ({"job_id": JOB},), "")]))
    return out
