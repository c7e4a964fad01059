"""FSDP: parameter all-gathers and gradient reduce-scatters, and how much of them the
compute hides.

Communication is exposed when the compute stream waits for it
(``train_exposed_comm_seconds``); the rest of the time inside collectives overlapped with
compute. Exposed time that grows is prefetching that no longer keeps up.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import L, M, R
from .model import RANK, TIMESERIES, Panel, Query, Row, Style, View

KEY = "fsdp"
FSDP = "fsdp"


def build(env) -> View:
    q = env.q
    job = (L.job_id,)
    op = "{{%s}}" % q.c.l(L.op)
    steps = f"sum {q.by(*job)} ({q.rate(M.train_step_seconds, '_count', rank=True)})"
    per_op = (f"sum {q.by(L.job_id, L.op)} "
              f"({q.rate(M.nccl_collective_duration_seconds, '_sum', rank=True, match={L.group: FSDP})})")
    all_comm = (f"sum {q.by(*job)} ({q.rate(M.nccl_collective_duration_seconds, '_sum', rank=True)})"
                f"\n/ {q.on(*job)}\n({steps} > 0)")
    exposed = q.mean(M.train_exposed_comm_seconds, job, rank=True)
    if env.records:  # the panels family's job totals (every rank's raw series: seconds at 16k)
        exposed, all_comm = q.r(R.exposed_comm_job), q.r(R.comm_per_step_job)
    gathers = q.mean(M.nccl_collective_duration_seconds, (L.job_id, L.rank), rank=True,
                     match={L.group: FSDP})

    collectives = Row("All-gather and reduce-scatter", (
        Panel(TIMESERIES, "Time per FSDP collective", "Mean duration of one all-gather and "
              "one reduce-scatter, over the selected ranks. Healthy: flat.", u.Seconds,
              (Query(q.mean(M.nccl_collective_duration_seconds, (L.job_id, L.op), rank=True,
                            match={L.group: FSDP}), op),), min=0),
        Panel(TIMESERIES, "FSDP communication per step", "Time per step the mean rank spends "
              "in all-gathers and reduce-scatters. Healthy: flat and mostly overlapped "
              "(below).", u.Seconds,
              (Query(f"{per_op}\n/ {q.join(job)}\n({steps} > 0)", op),), min=0),
        Panel(TIMESERIES, "Time inside FSDP collectives across ranks", "Slowest, median and "
              "fastest rank's mean time per FSDP collective. Healthy: close together.",
              u.Seconds, tuple(Query(e, f"{n} rank") for n, e in q.spread(gathers)), min=0),
        Panel(TIMESERIES, "FSDP bytes per second", "Bytes the job's ranks send in FSDP "
              "collectives, by operation. Healthy: flat.", u.BytesPerSecondSI,
              (Query(f"sum {q.by(L.job_id, L.op)} "
                     f"({q.rate(M.nccl_collective_bytes_total, rank=True, match={L.group: FSDP})})",
                     op),), min=0),
    ))
    overlap = Row("Overlap with compute", (
        Panel(TIMESERIES, "Exposed vs overlapped communication per step", "Per step and mean "
              "rank: communication the compute waited for (exposed) and the rest of the time "
              "inside collectives (overlapped). Healthy: mostly overlapped.", u.Seconds,
              (Query(exposed, "exposed"),
               Query(f"clamp_min(\n{all_comm}\n- {q.on(*job)}\n{exposed}, 0)", "overlapped")),
              styles=(Style("exposed", "red"), Style("overlapped", "green")), stack=True, min=0),
        Panel(TIMESERIES, "Exposed communication share of the step", "Exposed communication "
              "per step / mean step time. Healthy: small and flat; growth means prefetch no "
              "longer hides the all-gathers.", u.PercentUnit,
              (Query(f"{exposed}\n/ {q.on(*job)}\n({q.r(R.step_mean)} > 0)", "exposed share"),),
              min=0),
    ))
    return View(KEY, "FSDP", "FSDP: all-gather / reduce-scatter time, exposed vs overlapped "
                "communication.", __name__.replace(".", "/") + ".py", (collectives, overlap),
                variables=(RANK,))
