"""Data parallel: the gradient all-reduce, and who makes everyone wait for it.

A rank's time inside the all-reduce is waiting for the last rank plus the transfer. The
rank that arrives last waits for nobody, so it shows the *least* time inside: the late
arrival, not the slow network. Across ranks, the least time approximates the transfer and
the spread above it the arrival skew; where the NCCL sidecar sees every rank's records, it
measures both per collective instead (aligned by sequence number). Volume per parallel group answers "how much does
each group move" (bytes per second and per step), and the InfiniBand ports of the job's
hosts show whether the fabric carries it symmetrically.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import L, M, R
from . import aligned, inspector
from .model import RANK, SLOW, TABLE, TIMESERIES, Panel, Query, Row, View

KEY = "dp"
ALLREDUCE, DP = "AllReduce", "dp"


def build(env) -> View:
    q = env.q
    top_n = env.dash("top_n")
    job, rank = (L.job_id,), (L.job_id, L.rank)
    inside = (q.r(R.dp_allreduce_rank, rank=True) if env.records else  # the panels family's
              q.mean(M.nccl_collective_duration_seconds, rank, rank=True,
                     match={L.op: ALLREDUCE, L.group: DP}))
    spread = q.spread(inside)
    least = dict(spread)["min"]
    bytes_rate = f"sum {q.by(L.job_id, L.group)} ({q.rate(M.nccl_collective_bytes_total, rank=True)})"
    steps = f"sum {q.by(*job)} ({q.rate(M.train_step_seconds, '_count', rank=True)})"
    dp_time = f"sum {q.by(*job)} ({q.rate(M.nccl_collective_duration_seconds, '_sum', rank=True, match={L.group: DP})})"

    allreduce = Row("Gradient all-reduce", (
        Panel(TIMESERIES, "Time inside the DP all-reduce across ranks", "Mean time per "
              "all-reduce of the slowest, median and fastest rank; the least is the late "
              "arrival. Healthy: the three close together.", u.Seconds,
              tuple(Query(e, {"max": "most (waits longest)", "median": "median",
                              "min": "least (the late arrival)"}[n]) for n, e in spread), min=0),
        Panel(TIMESERIES, "Arrival skew vs transfer", "Transfer ~ the least time inside the "
              "all-reduce (the last rank waits for nobody); skew = most - least, time early "
              "ranks wait for the last. Healthy: skew small next to transfer.", u.Seconds,
              (Query(least, "transfer (least time inside)"),
               Query(f"{dict(spread)['max']}\n- {q.on(L.job_id)}\n{least}", "arrival skew")),
              stack=True, min=0),
        Panel(TABLE, f"Late arrivals: {top_n} ranks with the least time inside", "Ranks that "
              "reach the all-reduce last: look at their compute, input and GPU first. "
              "Healthy: no rank far below the others.", u.Seconds,
              (Query(f"bottomk({top_n}, {inside})", instant=True, table=True),),
              columns=((q.rank, "rank"), ("Value", "time inside all-reduce")),
              sort_by="time inside all-reduce", sort_desc=False, decimals=4),
        Panel(TIMESERIES, "Gradient sync latency per step", "Time per step the mean rank "
              "spends in DP collectives, next to the step time. Healthy: well below the step "
              "time and flat.", u.Seconds,
              (Query(f"{dp_time}\n/ {q.on(*job)}\n({steps} > 0)", "DP collectives per step"),
               Query(q.r(R.step_mean), "step time")), min=0),
    ))
    volume = Row("Volume per parallel group", (
        Panel(TIMESERIES, "Bytes per second per parallel group", "Collective bytes sent per "
              "second by the job's ranks, by group (dp, tp, pp, ep, cp, fsdp). Healthy: flat, "
              "and changing only with the parallel layout.", u.BytesPerSecondSI,
              (Query(bytes_rate, "{{%s}}" % q.c.l(L.group)),), min=0, interval=SLOW),
        Panel(TIMESERIES, "Bytes per step per parallel group", "Collective bytes per training "
              "step, by group: compare with the model (ring all-reduce of P bytes of "
              "gradients moves 2P(n-1)/n per rank). Healthy: flat.", u.BytesIEC,
              (Query(f"{bytes_rate}\n/ {q.join(job)}\n({steps} > 0)",
                     "{{%s}}" % q.c.l(L.group)),), min=0, interval=SLOW),
        Panel(TIMESERIES, "InfiniBand transmit of the job's hosts", "Busiest, median and "
              "least busy host of the job while its ranks all-reduce (node_exporter, all "
              "ports; what Train_IB_Asymmetry compares). Healthy: near line rate and close "
              "together; one host far below has a degraded NIC or rail.",
              u.BytesPerSecondSI,
              # the fabric family's record per job and host: the hosts' raw port counters,
              # joined to the job at each step of the range, read every port of the cluster
              tuple(Query(e, f"{n} host") for n, e in q.spread(q.r(R.ib_tx_job_node))),
              width=24, min=0),
    ))
    return View(KEY, "DP", "Data parallel: gradient all-reduce time per rank, arrival skew "
                "vs transfer, sync latency and bytes per parallel group.",
                __name__.replace(".", "/") + ".py",
                (allreduce, aligned.row(env, DP, "Aligned by collective sequence (NCCL sidecar)"), volume,
                 *((inspector.row(env),) if inspector.enabled(env) else ())),
                variables=(RANK,))
