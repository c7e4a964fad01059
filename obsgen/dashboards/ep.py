"""Expert parallel (MoE): the all-to-all and the balance of tokens across experts.

Every MoE layer dispatches tokens to their experts and combines the results with two
all-to-alls; the slowest participant sets their time, and the slowest is usually the rank
whose experts got the most tokens. Tokens per expert and the imbalance (busiest expert
over the mean) show routing collapse before it shows up as stragglers.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import L, M
from ..promql import number
from . import aligned
from .model import BARGAUGE, HEATMAP, RANK, TIMESERIES, Panel, Query, Row, Step, View
from .query import RANGE

KEY = "ep"
EP = "ep"


def build(env) -> View:
    q = env.q
    limit = env.dash("expert_imbalance")
    op = "{{%s}}" % q.c.l(L.op)
    expert = "{{%s}}" % q.c.l(L.expert)
    tokens = f"sum {q.by(L.job_id, L.expert)} ({q.rate(M.moe_expert_tokens_total)})"
    inside = q.mean(M.nccl_collective_duration_seconds, (L.job_id, L.rank), rank=True,
                    match={L.group: EP})

    alltoall = Row("All-to-all", (
        Panel(TIMESERIES, "All-to-all latency", "Mean duration of one EP collective (dispatch "
              "and combine), over the selected ranks. Healthy: flat.", u.Seconds,
              (Query(q.mean(M.nccl_collective_duration_seconds, (L.job_id, L.op), rank=True,
                            match={L.group: EP}), op),), min=0),
        Panel(TIMESERIES, "Time inside the all-to-all across ranks", "Slowest, median and "
              "fastest rank's mean time per EP collective; the least is the rank the others "
              "wait for. Healthy: close together.", u.Seconds,
              tuple(Query(e, f"{n} rank") for n, e in q.spread(inside)), min=0),
        Panel(TIMESERIES, "EP bytes per second", "Bytes the job's ranks send in EP "
              "collectives, by operation. Healthy: flat.", u.BytesPerSecondSI,
              (Query(f"sum {q.by(L.job_id, L.op)} "
                     f"({q.rate(M.nccl_collective_bytes_total, rank=True, match={L.group: EP})})",
                     op),), min=0),
    ))
    experts = Row("Expert load", (
        Panel(TIMESERIES, "Expert load imbalance", "Tokens of the busiest expert / mean tokens "
              f"per expert. Healthy: below {number(limit)} (dashed); 1 is perfect balance.",
              u.NoUnit,
              (Query(f"max {q.by(L.job_id)} ({tokens})\n/ {q.on(L.job_id)}\n"
                     f"(avg {q.by(L.job_id)} ({tokens}) > 0)", "busiest / mean"),),
              steps=(Step(None, "green"), Step(limit, "red")), draw_steps=True, min=1),
        Panel(BARGAUGE, "Tokens per expert in range", "Tokens routed to each expert in the "
              "time range. Healthy: bars of similar length.", u.Short,
              (Query(f"sum {q.by(L.job_id, L.expert)} "
                     f"(increase({q.m(M.moe_expert_tokens_total)}[{RANGE}]))",
                     "expert " + expert, instant=True),), height=10),
        Panel(HEATMAP, "Tokens per expert over time", "Token rate of each expert (rows) over "
              "time. Healthy: an even colour; a row that darkens is an expert taking over.",
              u.Short, (Query(tokens, expert),), height=10),
    ))
    return View(KEY, "EP", "Expert parallel (MoE): all-to-all latency, tokens per expert and "
                "their imbalance.", __name__.replace(".", "/") + ".py",
                (alltoall, aligned.row(env, EP, "Aligned by collective sequence (NCCL sidecar)",
                                       note=" NCCL's Inspector records only collectives whose "
                                            "ranks finish together; an all-to-all built from "
                                            "grouped send/recv does not show here."), experts),
                variables=(RANK,))
