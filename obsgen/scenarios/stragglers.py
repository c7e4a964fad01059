"""Straggler scenarios, sized from ``straggler_ratio``, the straggler windows (``straggler``,
``straggler_spell``, ``straggler_warmup``, ``straggler_recurrence``, ``straggler_hold``),
the recurrence and transient costs and the alerts' ``for``.

A slow GPU is three times as far above its stage as the threshold (20% at the default
7%); a healthy job's ranks differ by at most a seventh of it. A stage is judged once its
warm-up window is over; a rank's mean crosses the threshold within one window of the
onset, and it pages once it has straggled without a break for a spell and the window:
Persistent fires within two windows, a spell, its ``for`` and two evaluations of the
onset. A spell shorter than ``straggler_spell``, 3x slower, pages nothing; a throttle that
comes back pages once and holds; slowness that moves on before a spell ends is Transient
once it costs the job the transient cost.
"""
from __future__ import annotations

import math

from ..synth import Job, Recurring, Restart, RotatingSlow, SlowRank
from .model import Fires, Holds, NotStated, Quiet, Scenario, Setting, words

P, T = "Train_Straggler_Persistent", "Train_Straggler_Transient"
G, MAP = "Train_Straggler_TPGroup", "Train_Straggler_Mapping"
JOB = "scenario-stragglers"
MIN = 60.0


def scenarios(s: Setting) -> list:
    r, window = s.t("straggler_ratio"), s.w("straggler")
    spell, warmup = s.w("straggler_spell"), s.w("straggler_warmup")
    recur, hold = s.w("straggler_recurrence"), s.w("straggler_hold")
    every = s.every("stragglers")
    factor = round(1 + 3 * (r - 1), 3)
    spread = min(0.01, (r - 1) / 7)
    healthy = dict(job_id=JOB, rank_spread=spread, noise=min(0.03, 3 * spread))
    # the job's own warm-up (3m), the stage's warm-up window, a window and the mesh facts
    onset = math.ceil(3 + warmup + window + 1 + s.facts("stragglers"))
    span = math.ceil((spell + window) / every - 1e-9) * every
    within = 2 * window + span + s.for_(P) + 2 * every
    bound = (f"two rate windows ({words(2 * window)}), a spell and its window "
             f"({words(span)}), its for ({words(s.for_(P))}) and two evaluations "
             f"({words(2 * every)})")
    quiet = [Quiet(a) for a in (P, T, G, MAP) if s.has(a)]
    out: list = [Scenario(
        f"a healthy job (ranks {spread:.1%} apart, warm-up, checkpoints) fires no straggler alert",
        [Job(**healthy)], onset + within + 5, quiet)]
    # New processes warm up together: judged against each other, never the old median.
    for gap in (1, 3):
        out.append(Scenario(
            f"a restart with a {words(gap)} gap, new instances and their warm-up fires no "
            "straggler alert", [Job(**healthy, faults=(Restart(at=onset * MIN, gap=gap * MIN),))],
            onset + warmup + span + s.for_(T) + 10, quiet))
    blip = round(0.95 * spell, 2)
    out.append(Scenario(
        f"one rank 3x slower for {words(blip)}, once (shorter than a spell), fires no "
        "straggler alert", [Job(**healthy, faults=(SlowRank(rank=5, factor=3.0, start=onset * MIN,
                                                            end=(onset + blip) * MIN),))],
        onset + recur + 5, quiet))
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
    # A throttle that comes back: spells a window longer than the unbroken span, quiet
    # spells shorter than the hold; one alert from the first spell to the last.
    on = span + window + 1
    gap = min(hold - 1, 2 * on)
    if gap < 1:
        out.append(NotStated(f"a GPU throttled again and again fires {P} once",
                             f"windows.straggler_hold {words(hold)} leaves no quiet spell between "
                             "throttles that one alert holds through"))
    else:
        end = onset + 3 * (on + gap)
        first = onset + within
        out.append(Scenario(
            f"a GPU 2x slower for {words(on)} in every {words(on + gap)} fires {P} within "
            f"{bound} and holds it, one alert, until its last spell",
            [Job(**healthy, faults=(Recurring(rank=3, factor=2.0, on=on * MIN,
                                              every=(on + gap) * MIN, start=onset * MIN,
                                              end=end * MIN),))],
            end + 2, [Fires(P, onset, within, ({"job_id": JOB, "rank": "3"},), bound),
                      Holds(P, first, end - gap, {"job_id": JOB, "rank": "3"}),
                      *[Quiet(a) for a in (T, G, MAP) if s.has(a)]]))
    # A straggler that moves on before a spell ends: the job's cost of it is Transient's.
    cost, k = s.t("straggler_transient_cost"), s.t("straggler_transient_ranks")
    moving = round(1 + max(3 * (r - 1), 2 * cost), 3)
    period = max(2 * every, round(spell / 2 * 2) / 2)
    if moving > 3 or k > 7 or not s.has(T):
        return out + [NotStated(
            f"a straggler rotating between ranks fires {T}",
            f"straggler_transient_cost {cost:g} or straggler_transient_ranks {k}: a straggler "
            "up to 3x slower moving through an 8-rank job does not cost that much")]
    # the cost climbs by (moving - 1) per evaluation of the window, capped like a rank's
    climb = recur * cost / min(moving - 1, 0.5 * s.t("straggler_recurrence_cost") * recur
                                / (spell + window))
    # the cost is read a spell and a window late (the first minutes of a GPU that pages)
    within_t = climb + span + every + window + s.for_(T) + 2 * every + 1
    return out + [Scenario(
        f"a rank {moving - 1:.0%} slower rotating every {words(period)} through the ranks fires "
        f"{T} within {words(within_t)} (its cost reaches {cost:g} of the step time, then its "
        f"for), and never {P}",
        [Job(**healthy, faults=(RotatingSlow(factor=moving, period=period * MIN,
                                             start=onset * MIN),))],
        onset + within_t + 2, [Fires(T, onset, within_t, ({"job_id": JOB},), ""),
                               *[Quiet(a) for a in (P, G, MAP) if s.has(a)]])]
