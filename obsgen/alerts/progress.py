"""Progress: is the job getting slower than itself, and will it miss its deadline?

Step time is the job's mean step wall time from ``_sum`` / ``_count``
(``job:train_step_seconds:mean5m``), compared with its own median over the baseline
window: no fixed target, so a model change that is slower by design only moves the
baseline. The reference document reads a p50 with ``histogram_quantile`` from
prometheus_client's default buckets: every step between 1 and 2.5 seconds falls in one
bucket, and the interpolated p50 stays at 1.75 s whatever the steps take, so a 20%
regression from 1.5 s to 1.8 s is invisible to it.

Both alerts stay quiet for ``windows.restart_quiet`` after the job starts and after every
restart (its generation must be the same as that long ago): warm-up steps (compilation,
NCCL init, cold data loaders and caches) are slow by nature, and a rate window spanning
the restart mixes two processes.

The ETA is (planned - current steps) x current mean step time, as on the overview
dashboard; the deadline is ``train_planned_end_timestamp_seconds``, which the launch
config provides through obsgen.instrument. A deadline must be a gauge: PromQL cannot
compare a label's text with a time.

## Train_StepTime_Regression

The job's mean step time has been above its own baseline (median over the baseline
window) by the regression ratio for 30 minutes, outside warm-up. The run now takes that
much longer to finish, every GPU-hour of it.

Fires after the fault, with the default windows: 35 min.

Check first:
1. Whether it coincides with a restart onto other hosts, a config or code change (sequence length, batch size, a new kernel), or a data pipeline change; compare step time with compute time and collective time.
2. Stragglers and hardware: Train_Straggler_* and Train_TP_Imbalance for the job, GPU clock event reasons (thermal, power), NCCL link recoveries and InfiniBand asymmetry.
3. Shared resources: other jobs on the same hosts, storage or network saturation, checkpoint or evaluation work running inside the step.

## Train_ETA_Slip

At the current step time the job finishes after its deadline. It is information for the
run owner: the projection moves with every change in step time, so it is worth acting on
when it has held for a while.

Fires after the fault, with the default windows: 30 min after the quiet start.

Check first:
1. The ETA panel on the overview dashboard: when did the projection cross the planned end, and did step time change or did time go to restarts and lost work?
2. Step-time regressions, stragglers and restart loops of the job (their alerts), and the checkpoint interval against the failure rate (lost work per failure).
3. Whether the deadline or the planned steps are still right; if the slip is real, decide with the run owner: more nodes, fewer steps, or a new date.
"""
from __future__ import annotations

from ..contract import L, M, R
from ..model import Alert, Family, Record, expr
from ..promql import Ctx, number

NAME = "progress"
REQUIRES = ("ranks", "recovery")  # step mean, planned and current steps; restart generation


def build(c: Ctx) -> Family:
    t = c.cfg["thresholds"]
    baseline, quiet = c.w("step_baseline"), c.w("restart_quiet")
    job = c.tl(L.job_id)
    on = c.on(L.job_id)
    run = c.r(R.run_id)
    settled = f"({run} == {on} ({run} offset {quiet}))"
    ratio = number(t["step_regression_ratio"])
    deadline = c.r(R.planned_end)
    rules = (
        # A fact of the launch config every rank publishes: recorded every facts_interval,
        # not read from every rank at each evaluation of the alert.
        Record(c.rname(R.planned_end), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_planned_end_timestamp_seconds)})
        """), fact=True),
        Record(c.rname(R.step_baseline), expr(f"""
            quantile_over_time(0.5, {c.r(R.step_mean)}[{baseline}])
        """)),
        # From the ranks family's job-level records, not four reads of every rank's series
        # (at 16,384 ranks those cost more than the rest of this group): all three come from
        # one evaluation of that group, so they agree with each other; evaluated in another
        # group, they may be one interval older than this one, 30 s against a 30m for.
        Record(c.rname(R.eta), expr(f"""
            clamp_min({c.r(R.planned_steps)} - {on} {c.r(R.current_step)}, 0)
            * {on}
            {c.r(R.step_mean)}
        """)),
        Alert(
            name="Train_StepTime_Regression",
            expr=expr(f"""
                {c.r(R.step_mean)}
                / {on}
                ({c.r(R.step_baseline)} > 0)
                > {ratio}
                and {on}
                {settled}
            """),
            for_="30m",
            severity="warning",
            role="workload",
            summary=f"Steps of job {job} got slower than its baseline",
            description=(
                f"The mean step time of job {job} is "
                '{{ printf "%.1f" $value }}x its median over the last '
                f"{baseline} (limit {ratio}x), outside warm-up: the run takes that much longer "
                "to finish."),
        ),
        Alert(
            name="Train_ETA_Slip",
            expr=expr(f"""
                (time() + {c.r(R.eta)})
                - {on}
                {deadline}
                > 0
                and {on}
                {settled}
            """),
            for_="30m",
            severity="info",
            role="workload",
            summary=f"Job {job} is projected to finish after its deadline",
            description=(
                f"At its current step time job {job} finishes "
                "{{ $value | humanizeDuration }} after its planned end "
                f"({c.mname(M.train_planned_end_timestamp_seconds)}): (planned - current "
                "steps) x mean step time."),
        ),
    )
    return Family(NAME, __doc__, rules, requires=REQUIRES)
