"""Pipeline parallel: stage balance and the bubble.

With p stages and m microbatches the 1F1B schedule idles each stage (p-1)/(m+p-1) of the
step. The observed bubble per stage (the recording rule, 1 - busy/wall) is drawn against
that theory and against the alert's threshold. Forward and backward time per stage show
which stage the others wait for; microbatches per step confirm the schedule in use.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import L, M, R
from ..promql import number
from .model import RANK, STAGE, TIMESERIES, Panel, Query, Row, Style, View

KEY = "pp"
PP = "pp"


def build(env) -> View:
    q = env.q
    job = (L.job_id,)
    factor = number(env.cfg["thresholds"]["bubble_excess_factor"])
    theory, limit = "1F1B theory (p-1)/(m+p-1)", f"alert threshold ({factor}x theory)"
    steps = f"sum {q.by(*job)} ({q.rate(M.train_step_seconds, '_count', rank=True)})"
    p2p = (f"sum {q.by(L.job_id, L.op)} "
           f"({q.rate(M.nccl_collective_duration_seconds, '_sum', rank=True, match={L.group: PP})})")
    stage = "stage {{%s}}" % q.stage
    by_peer = (f"sum {q.by(L.job_id, L.rank, L.op, L.peer)} "
               f"({q.rate(M.nccl_p2p_seconds_total, rank=True, match={L.group: PP})})")

    stages = Row("Stages", (
        Panel(TIMESERIES, "Forward and backward time per stage", "Mean busy time per step of "
              "each stage, by phase. Healthy: stages close together; the slowest stage sets "
              "the pace of the pipeline.", u.Seconds,
              (Query(q.mean(M.pipeline_stage_seconds, (L.job_id, L.stage, L.phase), rank=True,
                            stage=True), stage + " {{%s}}" % q.c.l(L.phase)),), min=0),
        Panel(TIMESERIES, "Observed vs theoretical bubble per stage", "Observed idle share of "
              "each stage against the 1F1B bubble and the alert threshold (dashed). Healthy: "
              "at or just above theory.", u.PercentUnit,
              (Query(q.r(R.bubble, stage=True), stage),
               Query(q.r(R.bubble_theoretical), theory),
               Query(f"{factor} * {q.r(R.bubble_theoretical)}", limit)),
              styles=(Style(theory, "green", dashed=True),
                      Style(limit, "red", dashed=True)), min=0),
        Panel(TIMESERIES, "Busy time per stage", "Median busy time of each stage's ranks "
              "(compute without the waits for peers; the stage's slowest rank left out). "
              "Healthy: balanced; a stage above the rest holds up its neighbours, which wait "
              "for it in recv.", u.Seconds,
              (Query(q.r(R.busy_baseline, stage=True), stage),), min=0),
    ))
    schedule = Row("Schedule", (
        Panel(TIMESERIES, "Microbatches per step and stages", "m and p as the ranks report "
              "them. Healthy: as configured; the bubble falls as m grows.", u.Short,
              (Query(q.r(R.microbatches), "microbatches m"),
               Query(q.r(R.pp_size), "stages p")), min=0),
        Panel(TIMESERIES, "Pipeline send/recv per step", "Time per step the mean rank spends "
              "in pipeline point-to-point transfers, by operation. Healthy: flat and small.",
              u.Seconds,
              (Query(f"{p2p}\n/ {q.join(job)}\n({steps} > 0)",
                     "{{%s}}" % q.c.l(L.op)),), min=0),
        Panel(TIMESERIES, "Send/recv time by peer", "Share of time each selected rank spends "
              "in pipeline Send and Recv with each peer, from the NCCL sidecar (NCCL 2.30+; "
              "the peer is its global rank where the group map names it). Healthy: the "
              "ranks of a stage alike; one rank's Recv from a peer far above its neighbours' "
              "points at that peer's stage.", u.PercentUnit,
              (Query(by_peer, "rank {{%s}} {{%s}} peer {{%s}}" % (
                  q.c.l(L.rank), q.c.l(L.op), q.c.l(L.peer))),), min=0),
    ))
    return View(KEY, "PP", "Pipeline parallel: forward/backward time per stage, observed vs "
                "theoretical bubble, microbatches per step.", __name__.replace(".", "/") + ".py",
                (stages, schedule), variables=(RANK, STAGE))
