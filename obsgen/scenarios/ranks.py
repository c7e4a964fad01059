"""Rank scenarios, timed from ``windows.progress``, ``windows.memory`` and RankFailed's
``for``: a rank that completed no step in the progress window is not progressing, so
RankFailed fires within that window, its ``for`` and two evaluations of the loss (the
remaining ranks of a synchronous job hang in their next collective); a restart shorter
than that wait fires nothing."""
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
    # a restart shorter than the alert waits (the progress window and its for, less the
    # scrapes the new processes need to show two samples) is no failure
    gap = min(3.0, s.read("progress") + s.for_(RF) - 1.5)
    restart: list = ([Scenario(
        f"a restart with a {words(gap)} gap (shorter than the progress window and its for), "
        "counter resets and new instances fires nothing",
        [Job(job_id=a, faults=(Restart(at=onset * MIN, gap=gap * MIN),))],
        onset + gap + w + 10, [Quiet(RF)])] if gap >= 0.5 else
        [NotStated("a restart fires nothing", f"the progress window and {RF}'s for leave less "
                   "than 2 minutes: any restart is a failure to it")])
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
        Scenario(f"all ranks gone fires {RF} within {bound}",
                 [Job(job_id=a, stop=onset * MIN)], onset + w + 2,
                 [Fires(RF, onset, w, ({"job_id": a},), bound)]),
    ]
