"""Overview: will this run finish on time? The panel the run owner reads at 3 AM.

Top: the ETA ((planned - current steps) x current mean step time) next to the planned end,
progress, firing alerts, checkpoints, restarts, missing ranks and hardware events. Then the
training curves (loss, gradient norm with the alert thresholds drawn), step time, the
spread of compute time across ranks, and the stragglers: a rank x time heatmap of each
rank's compute time over its stage's median and a table of the slowest ranks now.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..alerts.stragglers import over_baseline
from ..config import seconds
from ..contract import L, M, R
from ..promql import number
from .model import HEATMAP, RANK, STAGE, STAT, TABLE, TIMESERIES, Panel, Query, Row, Step, Style, View
from .query import RANGE, RATE

KEY = "overview"
RED, ORANGE, GREEN, YELLOW = "red", "orange", "green", "yellow"


def build(env) -> View:
    q, cfg = env.q, env.cfg
    job = (L.job_id,)
    on = q.on(L.job_id)
    t = cfg["thresholds"]
    top_n = env.dash("top_n")
    max_age = seconds(t["checkpoint_max_age"])

    planned, current, step = q.r(R.planned_steps), q.r(R.current_step), q.r(R.step_mean)
    eta = f"(clamp_min({planned} - {on} {current}, 0)\n * {on}\n {step})"
    planned_end = q.r(R.planned_end)
    # each rank's busy time over its stage's baseline: the panels family's series with
    # dashboards.records, else computed here (the stragglers family records the ratio of the
    # straggling ranks only)
    mean, baseline = q.r(R.busy_mean, rank=True, stage=True), q.r(R.busy_baseline, stage=True)
    if env.records:
        ratio = q.r(R.busy_ratio, rank=True, stage=True)
        peak = f"max_over_time({ratio}[{RANGE}] @ end())"
    else:
        ratio = f"({over_baseline(q.c, mean, baseline)})"
        # the rank's highest busy time of the range over its stage's highest baseline
        peak = over_baseline(q.c, f"max_over_time({mean}[{RANGE}] @ end())",
                             f"max_over_time({baseline}[{RANGE}] @ end())")
    top = f"topk({env.dash('heatmap_ranks')}, max {q.by(L.job_id, L.rank)} ({peak}))"
    # the heatmap's ranks chosen once for the range (@ end()); without the records only
    # theirs are divided by the baseline at each step, not every rank's (4x cheaper)
    heatmap = (f"{ratio}\nand {q.on(L.job_id, L.rank)}\n{top}" if env.records else
               over_baseline(q.c, f"({mean}\nand {q.on(L.job_id, L.rank)}\n{top})", baseline))
    firing = q.m(M.ALERTS, match={L.alertstate: "firing"},
                 regex={L.alertname: "|".join(env.alerts)})

    def gpu_increase(metric, window=RATE):
        return (f"sum {q.by(*job)} (\n  increase({q.m(metric)}[{window}])\n"
                f"  * {q.join((L.UUID,), (L.job_id, L.rank, L.node))}\n"
                f"  {q.m(M.train_rank_gpu_info)}\n)")

    # with dashboards.records, the GPU totals of the job are the panels family's, per rate
    # window (joining every GPU of the cluster to its rank at every step took seconds)
    if env.records:
        per = f"{cfg['windows']['rate']} (recorded)"
        dbe, sbe, xid, nvlink_recoveries = (q.r(r) for r in (
            R.gpu_dbe_job, R.gpu_sbe_job, R.gpu_xid_job, R.nvlink_recovery_job))
    else:
        per = "interval"
        dbe, sbe = (gpu_increase(m) for m in (M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
                                              M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL))
        xid = (f"count {q.by(*job)} (\n  (changes({q.m(M.DCGM_FI_DEV_XID_ERRORS)}[{RATE}]) > 0)\n"
               f"  * {q.join((L.UUID,), (L.job_id, L.rank, L.node))}\n"
               f"  {q.m(M.train_rank_gpu_info)}\n)")
        nvlink_recoveries = gpu_increase(M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL)

    def stat(title, desc, unit, queries, steps=(), width=4, **kw):
        return Panel(STAT, title, desc, unit, queries, width=width, height=4, steps=steps, **kw)

    finish = Row("Will it finish on time?", (
        stat("ETA", "Time to completion: (planned - current steps) x current mean step time. "
             "Healthy: ends before the planned end.", u.DurationSeconds, (Query(eta, "ETA", instant=True),)),
        stat("Projected end", "Now + ETA. Healthy: at or before the planned end.", u.DatetimeISO,
             (Query(f"(time() + {eta}) * 1000", "projected end", instant=True),)),
        stat("Planned end", "The run's deadline from its launch config "
             "(train_planned_end_timestamp_seconds). Healthy: after the projected end.",
             u.DatetimeISO, (Query(f"{planned_end} * 1000", "planned end", instant=True),),
             no_value="not set"),
        stat("Slack to the planned end", "Planned end - projected end. Healthy: positive; "
             "negative means the run finishes late at the current speed.", u.Seconds,
             (Query(f"{planned_end}\n- {on}\n(time() + {eta})", "slack", instant=True),),
             steps=(Step(None, RED), Step(0, GREEN)), no_value="no planned end"),
        stat("Progress", "Current step / planned steps. Healthy: rising steadily.", u.PercentUnit,
             (Query(f"{current} / {on} ({planned} > 0)", "progress", instant=True),), decimals=1),
        stat("obsgen alerts firing", "Alerts obsgen defines, firing for this job (table below). "
             "Healthy: none.", u.Short,
             (Query(f"count {q.by(*job)} ({firing})", "firing", instant=True),),
             steps=(Step(None, GREEN), Step(1, RED)), no_value="none"),
        stat("Checkpoints in the last hour", "Checkpoints completed in the last hour (the rank "
             "that saved most). Healthy: at least one every "
             f"{t['checkpoint_max_age']}.", u.Short,
             (Query(f"max {q.by(*job)} (increase({q.m(M.train_checkpoint_total)}[1h]))",
                    "checkpoints", instant=True),),
             steps=(Step(None, RED), Step(max(1, int(3600 // max_age)), GREEN)), decimals=0),
        stat("Since the last checkpoint", "Age of the last completed checkpoint: the work a "
             f"failure now would lose. Healthy: under {t['checkpoint_max_age']}.", u.Seconds,
             (Query(f"time() - {q.r(R.checkpoint_last)}", "age", instant=True),),
             steps=(Step(None, GREEN), Step(max_age / 2, YELLOW), Step(max_age, RED))),
        stat("Restarts in range", "Restarts of the job in the dashboard's time range (change "
             "of train_run_id across processes). Healthy: 0.", u.Short,
             (Query(f"max {q.by(*job)} (max_over_time({q.m(M.train_run_id)}[{RANGE}]))\n"
                    f"- {on}\nmin {q.by(*job)} (min_over_time({q.m(M.train_run_id)}[{RANGE}]))",
                    "restarts", instant=True),),
             steps=(Step(None, GREEN), Step(1, YELLOW), Step(3, RED)), decimals=0),
        stat("Ranks not progressing", "World size minus the ranks that completed a step "
             f"in the last {cfg['windows']['progress']}. Healthy: 0.", u.Short,
             (Query(f"{q.r(R.world_size)}\n- {on}\n({q.r(R.ranks_progressing)} or "
                    f"{q.r(R.world_size)} * 0)", "missing", instant=True),),
             steps=(Step(None, GREEN), Step(1, RED)), decimals=0),
        stat("Uncorrectable ECC errors in range", "Double-bit ECC errors on the job's GPUs in "
             "the time range (dcgm-exporter). Healthy: 0; any means drain that host.", u.Short,
             (Query(gpu_increase(M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, RANGE), "DBE", instant=True),),
             steps=(Step(None, GREEN), Step(1, RED)), no_value="0", decimals=0),
        stat("NCCL link recoveries in range", "Link failures NCCL recovered from in the time "
             "range (resilient collectives). Healthy: 0; a rising count means the fabric "
             "degrades.", u.Short,
             (Query(f"sum {q.by(*job)} (increase({q.m(M.nccl_link_recovery_total)}[{RANGE}]))",
                    "recoveries", instant=True),),
             steps=(Step(None, GREEN), Step(1, YELLOW)), no_value="0", decimals=0),
    ))

    factor = number(t["grad_explosion_factor"])
    fraction = number(t["grad_vanishing_fraction"])
    explode = f"explosion threshold ({factor}x {cfg['windows']['grad_baseline']} median)"
    vanish = (f"vanishing threshold ({t['grad_vanishing_fraction'] * 100:g}% of "
              f"{cfg['windows']['grad_long_baseline']} median)")
    curves = Row("Training", (
        Panel(TIMESERIES, "Loss", "Training loss of the last step. Healthy: falls steadily; a "
              "jump is a divergence, a gap is NaN.", u.NoUnit,
              (Query(f"max {q.by(*job)} ({q.m(M.train_loss)})", "loss"),)),
        Panel(TIMESERIES, "Gradient norm", "Finite gradient norm with the alert thresholds "
              "drawn (log scale). Healthy: between the dashed lines, no spikes.", u.NoUnit,
              (Query(q.r(R.grad_norm_finite), "grad norm"),
               Query(f"{factor} * {q.r(R.grad_norm_baseline)}", explode),
               Query(f"{fraction} * {q.r(R.grad_norm_long_baseline)}", vanish)),
              styles=(Style(explode, RED, dashed=True),
                      Style(vanish, ORANGE, dashed=True)), log_scale=True),
        Panel(TIMESERIES, "Step time", "Mean step wall time from the _sum/_count recording "
              "rule (not a p50 from the default buckets, too coarse to see a 10% change). "
              "Healthy: flat.", u.Seconds, (Query(step, "mean step time"),), min=0),
        Panel(TIMESERIES, "Busy time across ranks", "Slowest, median and fastest rank's "
              "mean busy time: compute before the gradient collective without the time it "
              "waited inside it for TP, CP, EP or pipeline peers. Healthy: close together.",
              u.Seconds, tuple(Query(e, f"{n} rank") for n, e in
                               q.spread(q.r(R.busy_mean, rank=True, stage=True))), min=0),
    ))

    ratio_limit = t["straggler_ratio"]
    mesh = (L.tp_rank, L.tp_group, L.dp_rank)
    stragglers = Row("Stragglers", (
        Panel(HEATMAP, "Straggler score per rank", "Each rank's busy time (compute without "
              "its waits for peers) / the median of the rest of its stage, the "
              f"{env.dash('heatmap_ranks')} highest ranks of the time range. "
              f"Healthy: all near 1; a hot row is a persistent straggler, hot cells that "
              f"move are transient ones.", u.NoUnit,
              (Query(heatmap, "{{%s}}" % q.rank),),
              width=16, height=10, min=1 - (ratio_limit - 1), max=1 + 2 * (ratio_limit - 1)),
        Panel(TABLE, f"Slowest {top_n} ranks now", "Ranks with the highest busy time / "
              "the rest of their stage, with their node and place in the mesh (TP position "
              "and group, DP replica, where the job reports its mesh). Healthy: all below "
              f"{number(ratio_limit)}.", u.NoUnit,
              # the ratio carries the node the rank runs on; the mesh of the top N only
              (Query(f"(\n  topk({top_n}, {ratio})\n  * {q.join((L.job_id, L.rank), mesh)}\n"
                     f"  {q.m(M.train_rank_mesh_info)}\n)\nor topk({top_n}, {ratio})",
                     instant=True, table=True),),
              width=8, height=10, decimals=3,
              steps=(Step(None, GREEN), Step(ratio_limit, ORANGE)),
              columns=((q.rank, "rank"), (q.stage, "stage"), (q.c.l(L.node), "node"),
                       (q.c.l(L.tp_rank), "TP position"), (q.c.l(L.tp_group), "TP group"),
                       (q.c.l(L.dp_rank), "DP replica"), ("Value", "busy / rest of stage")),
              sort_by="busy / rest of stage", sort_desc=True),
    ))

    health = Row("Hardware and alerts", (
        Panel(TIMESERIES, "GPU errors on the job's GPUs", "ECC errors and XID events per "
              f"{per} on the GPUs that run the job's ranks (dcgm-exporter). Healthy: zero.",
              u.Short,
              (Query(dbe, "uncorrectable ECC"), Query(sbe, "corrected ECC"),
               Query(xid, "GPUs with a new XID")), min=0),
        Panel(TIMESERIES, "Fabric recoveries", "NCCL link recoveries "
              + (f"per interval and NVLink recovery errors per {per}" if env.records else
                 "and NVLink recovery errors per interval")
              + " in the job. Healthy: zero; a trend up means the fabric "
              "degrades.", u.Short,
              (Query(f"sum {q.by(*job)} (increase({q.m(M.nccl_link_recovery_total)}[{RATE}]))",
                     "NCCL link recoveries"),
               Query(nvlink_recoveries, "NVLink recovery errors")), min=0),
        Panel(TABLE, "Firing obsgen alerts", "obsgen's alerts firing for this job now, from "
              "Prometheus' ALERTS series. Healthy: empty.", u.Short,
              (Query(firing, instant=True, table=True),), width=24, height=6,
              columns=tuple((n, n) for n in (q.c.l(L.alertname), q.c.l(L.severity),
                                             q.c.l(L.team), q.rank, q.stage, q.c.l(L.node),
                                             q.c.l(L.signal))),
              no_value="none firing", links=runbook_links(q)),
    ))
    return View(KEY, "Overview", "Will this run finish on time? ETA against the planned end, "
                "training curves, stragglers and hardware of one job.", __name__.replace(".", "/") + ".py",
                (finish, curves, stragglers, health), variables=(RANK, STAGE))


def runbook_links(q) -> tuple[tuple[str, str], ...]:
    """Each firing alert's row links its runbook, where links.base_url serves them."""
    from ..passes import runbook_url
    url = runbook_url(q.c.cfg, "${__data.fields.%s}" % q.c.l(L.alertname))
    return (("runbook", url),) if url else ()
