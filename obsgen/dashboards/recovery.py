"""Recovery: what failures cost the run, and whether checkpoints are frequent and fast enough.

Restarts per job (the restart generation), the time from a failure to the first step after
it and the work lost at each failure (both from obsgen.instrument after every restart),
the optimal checkpoint interval sqrt(2 x MTBF x checkpoint cost) next to the actual one,
and the checkpoint storage: write throughput while saving and the duration of each save.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..config import seconds
from ..contract import L, M, R
from ..promql import number
from .model import STAT, TIMESERIES, Panel, Query, Row, Step, View
from .query import RANGE

KEY = "recovery"


def build(env) -> View:
    q, cfg = env.q, env.cfg
    job = (L.job_id,)
    run = q.r(R.run_id)
    mtbf_window = env.dash("mtbf_window")
    floor = cfg["thresholds"]["checkpoint_write_bytes_per_second"]

    # From the checkpoints family's job records, one series per job: over an hour of every
    # rank's counters these panels read 120 samples of every rank at each step.
    ckpt_rate, ckpt_seconds = q.r(R.checkpoint_rate), q.r(R.checkpoint_seconds_rate)
    restarts_long = (f"(max_over_time({run}[{mtbf_window}]) - min_over_time({run}[{mtbf_window}]))")
    cost = (f"avg_over_time({ckpt_seconds}[1h])\n  / {q.on(*job)}\n"
            f"  (avg_over_time({ckpt_rate}[1h]) > 0)")
    optimal = (f"sqrt(2 * ({number(seconds(mtbf_window))} / ({restarts_long} > 0))\n"
               f" * {q.on(*job)} (\n  {cost}\n))")
    actual = f"1 / (avg_over_time({ckpt_rate}[1h]) > 0)"
    throughput = (f"{q.r(R.checkpoint_bytes_rate)}\n/ {q.on(*job)}\n({ckpt_seconds} > 0)")
    duration = f"{ckpt_seconds}\n/ {q.on(*job)}\n({ckpt_rate} > 0)"

    failures = Row("Failure recovery", (
        Panel(STAT, "Restarts in range", "Restarts of the job in the dashboard's time range "
              "(rise of its restart generation). Healthy: 0.", u.Short,
              (Query(f"max_over_time({run}[{RANGE}]) - min_over_time({run}[{RANGE}])",
                     "restarts", instant=True),),
              width=6, height=6, steps=(Step(None, "green"), Step(1, "yellow"), Step(3, "red")),
              decimals=0),
        Panel(TIMESERIES, "Restart generation", "The job's restart generation over time; each "
              "step up is a restart. Healthy: flat.", u.Short, (Query(run, "generation"),),
              width=6, height=6, min=0, decimals=0),
        Panel(TIMESERIES, "Time from failure to the first new step", "job_recovery_seconds of "
              "the last restart: restart latency + checkpoint reload + waiting for capacity. "
              "Healthy: minutes, not hours.", u.Seconds,
              (Query(f"max {q.by(*job)} ({q.m(M.job_recovery_seconds)})", "recovery time"),),
              width=6, height=6, min=0),
        Panel(TIMESERIES, "Checkpoint age at failure", "Work lost by the last restart: the "
              "failure time minus the checkpoint it resumed from "
              "(job_checkpoint_age_at_failure_seconds). Healthy: below the checkpoint "
              "interval.", u.Seconds,
              (Query(f"max {q.by(*job)} ({q.m(M.job_checkpoint_age_at_failure_seconds)})",
                     "checkpoint age at failure"),), width=6, height=6, min=0),
        Panel(TIMESERIES, "Checkpoint interval: actual vs optimal", "Actual: time between "
              "checkpoints over the last hour. Optimal: sqrt(2 x MTBF x checkpoint cost), MTBF "
              f"from the restarts of the last {mtbf_window}. Healthy: the two close; far above "
              "optimal loses too much per failure, far below wastes GPU time.", u.Seconds,
              (Query(actual, "actual interval"), Query(optimal, "optimal interval")),
              width=24, min=0),
    ))
    storage = Row("Checkpoint storage", (
        Panel(TIMESERIES, "Checkpoint write throughput", "Checkpoint bytes of all ranks per "
              "second spent writing them, in intervals with a checkpoint. Healthy: above the "
              f"floor of {number(floor)} B/s (dashed).", u.BytesPerSecondSI,
              (Query(throughput, "write throughput"),
               Query(q.r(R.checkpoint_throughput), f"over {cfg['windows']['checkpoint_throughput']}")),
              steps=(Step(None, "red"), Step(floor, "green")), draw_steps=True, min=0),
        Panel(TIMESERIES, "Duration per checkpoint", "Seconds each checkpoint held the job "
              f"in the last {cfg['windows']['rate']} (the rank that spent the most). Healthy: "
              "flat; a rising line is storage slowing down or checkpoints growing.", u.Seconds,
              (Query(duration, "per checkpoint"),), min=0),
    ))
    return View(KEY, "Recovery", "Failure recovery and checkpoints: restarts, time to "
                "recover, work lost, checkpoint interval against the optimum, checkpoint "
                "storage.", __name__.replace(".", "/") + ".py", (failures, storage))
