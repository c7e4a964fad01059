"""Pipeline: the bubble of pipeline-parallel training, observed against theory.

With p pipeline stages and m microbatches per step, the 1F1B schedule leaves each stage
idle for a share (p-1)/(m+p-1) of the step (the bubble). A stage's observed bubble is
1 - busy/wall, where busy is ``pipeline_stage_seconds`` (forward and backward) and wall is
``train_step_seconds``, both summed over the ranks of the stage (the ranks of a
synchronous job share the step's wall time, so this is the mean of their ratios).
Both sides are aggregated to the same labels (job_id, stage) before they meet, so they
match, unlike the reference document's rule whose two sides share no labels and never
fire. A job without pipeline parallelism (p = 1) has no theoretical bubble and never
fires; interleaved schedules have a smaller bubble, so the 1F1B formula is a ceiling.

## Train_Bubble_Excess

A stage's observed bubble has been above the excess factor times the theoretical 1F1B
bubble for the whole ``for`` duration. The stage is idle beyond what the schedule
explains: it waits for data, for a slow neighbour stage, or for the network.

Fires after the fault, with the default windows: 32 min.

Check first:
1. Whether the interleaved (virtual pipeline) schedule is actually engaged: if the bubble did not drop after enabling it, the schedule is not in use (check the virtual pipeline size and microbatches per step).
2. Stage balance: forward and backward time per stage on the PP dashboard; a stage with more layers, the embedding or the loss makes its neighbours wait.
3. The send/recv path between stages: P2P latency, NIC and IB counters of the nodes that hold the stage, and data-loader stalls on the first stage.
"""
from __future__ import annotations

from ..model import Alert, Family, Record, expr
from ..contract import L, M, R
from ..promql import Ctx

NAME = "pipeline"


def build(c: Ctx) -> Family:
    stage = (L.job_id, L.stage)
    rate = c.stepped(c.w("rate"))  # the step histogram's window (a preset's cadence)
    rules = (
        # Per stage, not per rank: a ratio per rank was a record of every rank every
        # evaluation, read again to average it. The ranks of a synchronous job have the
        # same wall time, so the ratio of the stage's sums is the mean of its ranks' ratios.
        Record(c.rname(R.bubble), expr(f"""
            1 - (
              sum {c.by(*stage)} ({c.rate(M.pipeline_stage_seconds, '_sum', rate)})
              /
              (sum {c.by(*stage)} ({c.rate(M.train_step_seconds, '_sum', rate)}) > 0)
            )
        """)),
        Record(c.rname(R.pp_size), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_pipeline_stages)})
        """), fact=True),
        Record(c.rname(R.microbatches), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_microbatches_per_step)})
        """), fact=True),
        Record(c.rname(R.bubble_theoretical), expr(f"""
            ({c.r(R.pp_size)} - 1)
            /
            (({c.r(R.microbatches)} + {c.r(R.pp_size)} - 1) > 0)
        """), fact=True),
        Alert(
            name="Train_Bubble_Excess",
            expr=expr(f"""
                100 * (
                  {c.r(R.bubble)}
                  > {c.join((L.job_id,))}
                  {c.t('bubble_excess_factor')} * {c.r(R.bubble_theoretical)}
                )
                and {c.on(L.job_id)}
                {c.r(R.pp_size)} > 1
            """),
            for_="30m",
            severity="warning",
            role="workload",
            summary=(f"Pipeline bubble excess on stage {c.tl(L.stage)} of job "
                     f"{c.tl(L.job_id)}"),
            description=(
                f"Stage {c.tl(L.stage)} of job {c.tl(L.job_id)} is idle "
                '{{ printf "%.0f" $value }}% of each step, more than '
                f"{c.t('bubble_excess_factor')}x the 1F1B bubble (p-1)/(m+p-1) of its "
                "pipeline. It waits for data, a slow neighbour stage or the network."),
        ),
    )
    return Family(NAME, __doc__, rules)
