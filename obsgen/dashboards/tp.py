"""Tensor parallel: are the GPUs of a TP group doing the same work?

TP splits every layer across the GPUs of a group, normally the GPUs of one host, so their
SM-active (dcgm-exporter) should move together. A wide spread within a host means uneven
sharding, a throttled GPU or a degraded NVLink. GPUs are matched to ranks through
``train_rank_gpu_info`` (the GPU UUID each rank runs on), so only the job's GPUs count.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import L, M, R
from ..promql import number
from .model import RANK, TIMESERIES, Panel, Query, Row, Step, View

KEY = "tp"
TP = "tp"


def build(env) -> View:
    q = env.q
    top_n, limit = env.dash("top_n"), env.cfg["thresholds"]["tp_sm_active_stddev"]
    job = (L.job_id,)
    # with dashboards.records, the spreads read the panels family's series per rank (the
    # raw ones, every GPU joined to its rank at every step, take tens of seconds at 16k)
    sm = (q.r(R.sm_active_rank, rank=True) if env.records
          else q.gpus(q.m(M.DCGM_FI_PROF_SM_ACTIVE)))
    nvlink = (q.r(R.nvlink_rank, rank=True) if env.records else
              q.gpus(f"({q.m(M.DCGM_FI_PROF_NVLINK_TX_BYTES)} + {q.m(M.DCGM_FI_PROF_NVLINK_RX_BYTES)})"))
    steps = f"sum {q.by(*job)} ({q.rate(M.train_step_seconds, '_count', rank=True)})"
    tp_time = (f"sum {q.by(L.job_id, L.op)} "
               f"({q.rate(M.nccl_collective_duration_seconds, '_sum', rank=True, match={L.group: TP})})")
    inside = (q.r(R.tp_time_rank, rank=True) if env.records else
              q.mean(M.nccl_collective_duration_seconds, (L.job_id, L.rank), rank=True,
                     match={L.group: TP}))

    balance = Row("Balance across the TP group", (
        Panel(TIMESERIES, f"SM-active spread within a host (top {top_n})", "Standard deviation "
              "of SM-active across the job's GPUs of each host, the most uneven hosts. "
              f"Healthy: below {number(limit)} (dashed).", u.PercentUnit,
              # the GPU family's record (the spread Train_TP_Imbalance reads): per GPU and
              # step, joining every GPU of the cluster to its rank cost seconds at 16k GPUs
              (Query(f"topk({top_n}, {q.r(R.sm_active_spread)})", "{{%s}}" % q.c.l(L.node)),),
              steps=(Step(None, "green"), Step(limit, "red")), draw_steps=True, min=0,
              no_value=q.not_collected(M.DCGM_FI_PROF_SM_ACTIVE)),
        Panel(TIMESERIES, "SM-active across the job's GPUs", "Highest, median and lowest "
              "SM-active of the GPUs that run the selected ranks. Healthy: high and close "
              "together.", u.PercentUnit,
              tuple(Query(e, f"{n} GPU") for n, e in q.spread(sm)), min=0, max=1,
              no_value=q.not_collected(M.DCGM_FI_PROF_SM_ACTIVE)),
        Panel(TIMESERIES, "NVLink throughput per GPU", "NVLink transmit + receive of the "
              "busiest, median and least busy GPU. Healthy: close together; one GPU far below "
              "its peers has a degraded link.", u.BytesPerSecondSI,
              tuple(Query(e, f"{n} GPU") for n, e in q.spread(nvlink)), min=0,
              no_value=q.not_collected(M.DCGM_FI_PROF_NVLINK_TX_BYTES, M.DCGM_FI_PROF_NVLINK_RX_BYTES)),
    ))
    comm = Row("TP collectives", (
        Panel(TIMESERIES, "TP communication per step", "Time per step the mean rank spends "
              "in TP collectives, by operation. Healthy: flat and a small share of the step.",
              u.Seconds,
              (Query(f"{tp_time}\n/ {q.join(job)}\n({steps} > 0)",
                     "{{%s}}" % q.c.l(L.op)),), min=0),
        Panel(TIMESERIES, "Time inside TP collectives across ranks", "Mean time per TP "
              "collective of the slowest, median and fastest rank. Healthy: close together; "
              "the least is the rank the others wait for.", u.Seconds,
              tuple(Query(e, f"{n} rank") for n, e in q.spread(inside)), min=0),
    ))
    return View(KEY, "TP", "Tensor parallel: SM-active spread across the GPUs of a host, "
                "NVLink throughput and TP collective time.", __name__.replace(".", "/") + ".py",
                (balance, comm), variables=(RANK,))
