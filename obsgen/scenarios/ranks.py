"""Rank scenarios, timed from ``windows.progress``, ``windows.restart_gap``,
``windows.memory`` and RankFailed's ``for``. A rank that completed no step in the progress
window is not progressing. While a process that has stepped is still there (the remaining
ranks of a synchronous job hang in their next collective), RankFailed fires within that
window, its ``for`` and two evaluations of the loss. A job with no such process left (all
gone, or new ones loading after a restart) fires only once no full progress has been seen
for ``windows.restart_gap``, so a restart whose processes step again within it fires
nothing."""
from __future__ import annotations

from ..synth import Job, RankLoss, Restart
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

RF = "Train_RankFailed"
MIN = 60.0


def scenarios(s: Setting) -> list:
    if not s.has(RF):
        return []
    onset = 10.0
    w = s.read("progress") + s.for_(RF) + 2 * s.every("ranks")
    bound = f"the progress window ({words(s.read('progress'))}), its for and two evaluations ({words(w)})"
    a, b = "scenario-ranks-a", "scenario-ranks-b"
    # all gone: the last full progress is a progress window after the exit; then the gap
    # and the for. A restart whose processes step again within the gap is no failure.
    gap = s.w("restart_gap")
    gone = s.read("progress") + gap + s.for_(RF) + 2 * s.every("ranks")
    gone_bound = (f"the progress window, windows.restart_gap ({words(gap)}), its for and two "
                  f"evaluations ({words(gone)})")
    # the new processes need two scrapes and an evaluation (about 1.5 minutes) to show
    # progress, within the progress window and the for that follow the gap
    quiet = s.read("progress") + s.for_(RF) >= 2.0
    restart: list = [
        Scenario(f"a restart with a {words(gap)} gap (windows.restart_gap: rescheduling, "
                 "a checkpoint load), counter resets and new instances fires nothing",
                 [Job(job_id=a, faults=(Restart(at=onset * MIN, gap=gap * MIN),))],
                 onset + gap + w + 10, [Quiet(RF)]) if quiet else
        NotStated("a restart fires nothing", f"the progress window and {RF}'s for leave less "
                  "than 2 minutes after windows.restart_gap: new processes cannot show "
                  "progress in time"),
        Scenario(f"new processes that hang before their first step after a restart fire {RF} "
                 f"within {gone_bound}",
                 [Job(job_id=a, faults=(Restart(at=onset * MIN, gap=MIN),
                                        RankLoss(ranks=(), at=(onset + 1) * MIN)))],
                 onset + gone + 2, [Fires(RF, onset, gone, ({"job_id": a},), gone_bound)]),
    ]
    return [*restart,
        Scenario("a healthy job fires nothing", [Job(job_id=a)], onset + w + 10, [Quiet(RF)]),
        Scenario("a job initialising for 10 minutes before its first step fires nothing",
                 [Job(job_id=a, init=10 * MIN)], 20 + w, [Quiet(RF)]),
        Scenario("a job that completes its planned steps and exits fires nothing",
                 [Job(job_id=a, planned_steps=400)], 20 + w, [Quiet(RF)]),
        Scenario(f"two of eight ranks gone, the others hung, fires {RF} within {bound}, for "
                 "that job only",
                 [Job(job_id=a, faults=(RankLoss(ranks=(6, 7), at=onset * MIN),)),
                  Job(job_id=b, subnet=1, seed=2)], onset + w + 2,
                 [Fires(RF, onset, w, ({"job_id": a},), bound)]),
        Scenario(f"all ranks gone fires {RF} within {gone_bound}",
                 [Job(job_id=a, stop=onset * MIN)], onset + gone + 2,
                 [Fires(RF, onset, gone, ({"job_id": a},), gone_bound)]),
        Scenario(f"all ranks present and hung in a collective fire {RF} within {bound}",
                 [Job(job_id=a, faults=(RankLoss(ranks=(), at=onset * MIN),))], onset + w + 2,
                 [Fires(RF, onset, w, ({"job_id": a},), bound)]),
    ]
