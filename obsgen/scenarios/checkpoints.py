"""Checkpoint scenarios, sized from ``checkpoint_max_age``, ``checkpoint_overhead_ratio``,
``windows.checkpoint_overhead`` and the alerts' ``for``.

The job checkpoints every 10 minutes (20 s each, steps paused while it writes).
NoCheckpoints fires within its ``for`` and two evaluations of the last checkpoint
growing older than the limit; CheckpointOverhead, for checkpoints costing twice the
overhead ratio, within the overhead window, its ``for`` and two evaluations.
"""
from __future__ import annotations

from ..config import seconds
from ..synth import CheckpointStall, Job, RankLoss
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

NC, CO = "Train_NoCheckpoints", "Train_CheckpointOverhead"
MIN = 60.0
EVERY = 10.0  # minutes between the job's checkpoints


def scenarios(s: Setting) -> list:
    age = seconds(s.t("checkpoint_max_age")) / 60
    every = s.every("checkpoints")
    ratio = s.t("checkpoint_overhead_ratio")
    # the healthy job's overhead: at most a third of the ratio (20 s per 10 minutes)
    healthy_cost = round(min(20.0, ratio * EVERY * 60 / 3), 1)
    out: list = []
    quiet = [Quiet(a) for a in (NC, CO) if s.has(a)]
    window = s.w("checkpoint_overhead")
    if age <= EVERY + 2 * every:
        out.append(NotStated("a healthy job checkpointing every 10 minutes fires nothing",
                             f"checkpoint_max_age {s.t('checkpoint_max_age')} is not above the "
                             "scenario job's 10-minute checkpoint interval"))
    elif healthy_cost < 1:
        out.append(NotStated("a healthy job checkpointing every 10 minutes fires nothing",
                             f"checkpoint_overhead_ratio {ratio:g}: a checkpoint of less than a "
                             "second is not one a training job writes"))
    else:
        out.append(Scenario(f"a healthy job checkpointing every 10 minutes ({healthy_cost:g} s "
                            "each) fires nothing",
                            [Job(job_id="scenario-ckpt-a", checkpoint_cost=healthy_cost)],
                            window + 30, quiet))
    if s.has(NC):
        stall = 15.0  # the job stops checkpointing, or hangs, then
        last = 10 + 20 / 60  # the last checkpoint before it completes at 10m20s
        onset = last + age
        w = s.for_(NC) + 2 * every
        out.append(Scenario(
            f"two jobs where one stops checkpointing fire {NC} for that job only, within its "
            f"for and two evaluations ({words(w)}) of its last checkpoint being older than "
            f"{s.t('checkpoint_max_age')}",
            [Job(job_id="scenario-ckpt-a"),
             Job(job_id="scenario-ckpt-b", subnet=1, seed=2,
                 faults=(CheckpointStall(start=stall * MIN),))], onset + w + 2,
            [Fires(NC, onset, w, ({"job_id": "scenario-ckpt-b"},), words(w))]))
        hung = "a hung job (no rank progressing) is not reported as missing checkpoints"
        if stall + s.read("progress") > last + age:
            out.append(NotStated(hung, f"the step histogram is read over {words(s.read('progress'))} "
                                 "(the progress window times a preset's cadence): a job hung "
                                 f"at minute 15 still counts as progressing when its last "
                                 f"checkpoint passes checkpoint_max_age ({s.t('checkpoint_max_age')})"))
        else:
            out.append(Scenario(hung, [Job(job_id="scenario-ckpt-a",
                                           faults=(RankLoss(ranks=(), at=stall * MIN),))],
                                stall + age + s.for_(NC) + 10, [Quiet(NC)]))
    if s.has(CO):
        cost = round(2 * ratio * EVERY * 60, 1)  # twice the ratio's share of the interval
        if cost > EVERY * 60 / 2:
            out.append(NotStated(f"costly checkpoints fire {CO}", f"checkpoint_overhead_ratio "
                                 f"{ratio:g}: checkpoints twice that costly take most of the job"))
        else:
            # the rates it sums lag by the step histogram's window past the rate window
            w = window + s.for_(CO) + 2 * every + s.read("rate") - s.w("rate")
            out.append(Scenario(
                f"checkpoints costing {cost:g} s every 10 minutes fire {CO} within the overhead "
                f"window, its for and two evaluations ({words(w)})",
                [Job(job_id="scenario-ckpt-a", checkpoint_cost=cost)], w + 2,
                [Fires(CO, 0, w, ({"job_id": "scenario-ckpt-a"},), words(w))]))
    return out
