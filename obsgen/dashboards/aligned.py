"""Panels from the NCCL sidecar's cross-rank alignment, shared by the DP and EP views.

The sidecar joins the Inspector records of one collective on every rank (by communicator,
op and sequence number, never by host clock) and measures, per collective, the arrival
skew (earliest to latest arrival) and the tail after the last rank arrived, which is the
better estimate of the transfer. A rank that is last in most collectives of its group is
the critical rank: Train_Straggler_LateArrival fires on it.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import L, M, R
from .model import TABLE, TIMESERIES, Panel, Query, Row


def row(env, group: str, title: str, note: str = "") -> Row:
    q = env.q
    top_n = env.dash("top_n")
    op = "{{%s}}" % q.c.l(L.op)
    by = (L.job_id, L.op)
    skew = q.mean(M.nccl_collective_arrival_skew_seconds, by, match={L.group: group})
    tail = q.mean(M.nccl_collective_tail_seconds, by, match={L.group: group})
    late = q.r(R.late_arrival_ratio, rank=True, match={L.group: group})
    return Row(title, (
        Panel(TIMESERIES, "Arrival skew vs tail per collective (aligned)", "Mean per "
              f"{group} collective of the arrival skew (earliest to last rank) and the tail "
              "after the last arrival (the transfer), from the NCCL sidecar. Healthy: skew "
              f"small next to the tail.{note}", u.Seconds,
              (Query(skew, f"skew {op}"), Query(tail, f"tail {op}")), min=0),
        Panel(TABLE, f"Last arrivals: {top_n} ranks most often last", "Share of the group's "
              "aligned collectives in which the rank arrived last (15-minute window). "
              "Healthy: spread thin; one rank near 1 is the critical rank.", u.PercentUnit,
              (Query(f"topk({top_n}, {late})", instant=True, table=True),),
              columns=((q.rank, "rank"), ("Value", "share last")),
              sort_by="share last", decimals=2),
    ))
