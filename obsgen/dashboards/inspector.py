"""Panels from the NCCL Inspector's own textfile (the nccl-inspector preset), in the DP view.

The inspector family maps the Inspector's series to the job's ranks. Each dump gives a
mean over the collectives since the last one, per communicator name, collective and
message-size range: no count, so these panels show time per collective and bus bandwidth,
never time per step. In a collective every rank waits for the last to arrive, so within
one communicator the rank with the least time per collective is the one the others
waited for; a rank whose bus bandwidth sits far below its communicator's has a slow link.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..alerts import inspector as family
from ..contract import L, R
from ..presets import families_of
from .model import TABLE, TIMESERIES, Panel, Query, Row


def enabled(env) -> bool:
    """With a preset that brings the inspector family (nccl-inspector)."""
    return family.NAME in families_of(env.cfg["presets"])


def row(env) -> Row:
    q = env.q
    top_n = env.dash("top_n")
    labels = (L.comm_name, L.collective, L.message_size)
    by = (L.job_id, *labels)
    time = q.r(R.inspector_time, rank=True)
    busbw = q.r(R.inspector_busbw, rank=True)
    key = " ".join("{{%s}}" % q.c.l(lb) for lb in labels)
    # each rank against the median of its communicators' ranks: the same name, collective
    # and range (the Inspector names a communicator only by the name the application gave it)
    below = (f"{time}\n/ {q.on(*by)} group_left ()\n"
             f"(quantile {q.by(*by)} (0.5, {time}) > 0)")
    return Row("NCCL Inspector (its own textfile, no sidecar)", (
        Panel(TIMESERIES, "Time per collective across ranks", "The NCCL Inspector's mean "
              "time per collective of the slowest, median and fastest rank, per "
              "communicator name, collective and message size. Healthy: the three close "
              "together; the least is the rank the others waited for.", u.Seconds,
              tuple(Query(e, f"{n} {key}") for n, e in q.spread(time, by)), min=0),
        Panel(TABLE, f"{top_n} ranks quickest against their communicators", "Each rank's "
              "time per collective over the median of the ranks of communicators of the "
              "same name, collective and message size: a rank far below 1 arrives last "
              "and its peers wait for it; look at its compute, input and GPU first. "
              "Healthy: all near 1.",
              u.PercentUnit, (Query(f"bottomk({top_n}, {below})", instant=True, table=True),),
              columns=((q.rank, "rank"), (q.c.l(L.comm_name), "communicator"),
                       (q.c.l(L.collective), "collective"), ("Value", "of the median")),
              sort_by="of the median", sort_desc=False, decimals=2),
        Panel(TIMESERIES, "Bus bandwidth across ranks", "The Inspector's geometric mean bus "
              "bandwidth of the highest, median and lowest rank, per communicator name, "
              "collective and message size. Healthy: close together; one rank far below "
              "the others has a slow link.", u.GigabytesPerSecond,
              tuple(Query(e, f"{n} {key}") for n, e in q.spread(busbw, by)), min=0),
    ))
