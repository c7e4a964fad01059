"""Late-arrival scenarios (the NCCL sidecar beside the job, obsgen.nccl), timed from
``windows.late_arrival``, the straggler spell and warm-up windows and LateArrival's
``for``: 8 ranks, 4 per node, each node's exporter aligning its TP communicator in 4
collectives per step.

A rank 20% slower arrives last in nearly every collective of its group; it is flagged
within the late-arrival window of the onset and fires once it has been late without a
break for a spell and what the window remembers, its ``for`` and two evaluations later.
The share of collectives a rank must arrive last in (``late_arrival_fraction``) is
crossed by any consistently slower rank, so the fault is not sized from it."""
from __future__ import annotations

import math

from ..synth import Job, NcclExporter, SlowRank
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

LA = "Train_Straggler_LateArrival"
JOB = "scenario-nccl"
MIN = 60.0


def scenarios(s: Setting) -> list:
    if not s.has(LA):
        return []
    nccl = NcclExporter()
    every = s.every("nccl")
    span = s.w("straggler_spell") + s.w("late_arrival") + every
    w = s.w("late_arrival") + span + s.for_(LA) + 2 * every + 1
    onset = max(15.0, math.ceil(3 + s.w("straggler_warmup") + 2 * s.w("late_arrival") + 1))
    out: list = [Scenario("a healthy job whose ranks differ by about 1% names no late arrival",
                          [Job(job_id=JOB, nccl=nccl)], onset + w + 10, [Quiet(LA)])]
    if s.t("late_arrival_fraction") > 0.97 or s.t("late_arrival_min_collectives") > 4 * 40 * s.w("late_arrival"):
        return out + [NotStated(f"a slow rank fires {LA}", "late_arrival_fraction above 0.97, or "
                                "more aligned collectives than the window holds: a slow rank "
                                "with 3% noise does not arrive last that often")]
    return out + [Scenario(
        f"one rank 20% slower is the late arrival of its TP group within the late-arrival "
        f"window, a spell, its for and two evaluations ({words(w)}), and no other rank",
        [Job(job_id=JOB, nccl=nccl, faults=(SlowRank(rank=3, factor=1.2, start=onset * MIN),))],
        onset + w + 2, [Fires(LA, onset, w, ({"job_id": JOB, "rank": "3"},), words(w))])]
