"""Panels: the spreads and job totals the slowest dashboard panels compute, recorded.

Rendered only with ``dashboards.records: true``; the panels then read these series
instead of every rank's, GPU's or host's raw series. A panel over the last hour is a
range query that pays, at each of its 121 steps, for every series' label set in every
aggregation and join: at 16,384 ranks the spread of TP collective time across ranks takes
about 37 s to draw, whatever the query looks like. Read from one series per rank (the
spreads, so the rank variable still selects) or one per job (the totals), the same
panels draw in about a second.

The ruler pays instead, on every evaluation, whether anyone looks or not, and an
evaluation reads every selected series once, which costs about what ten steps of a range
query cost; so the family is evaluated every 5m (``family_intervals.panels``). At 16,384
ranks that is about 37 s of CPU an hour, against about 178 s to draw these panels once
without it: on a large job it pays for itself as soon as someone opens the dashboards. It
is off by default because on small jobs the raw queries are cheap and show 30 s steps. The
records' windows are the rate window (5m), so at the default interval they tile time and
every collective and error counts once; the panels show them as 5m steps.

Each view's records are a group of their own (``obsgen-panels-tp``, ``-dp``, ``-gpus``,
``-errors``, ``-fsdp``, ``-stragglers`` for the overview's straggler score of every rank,
and ``-comm`` for the collective time per step of every group, the costliest): none reads
another, so the ruler evaluates them side by side, and at 16,384 ranks one group of all of them would take seconds per evaluation.

The means are _sum / _count per rank (time per collective, never a bucket quantile),
GPUs are matched to ranks by ``train_rank_gpu_info`` (the UUID each rank runs on), and the
InfiniBand line rate is the fastest host of the job's (node_exporter per host, summed over
its ports).
"""
from __future__ import annotations

from ..contract import L, M, R
from ..model import Family, Record, expr
from ..promql import Ctx, quote
from .stragglers import over_baseline

NAME = "panels"
# gpus: the job's hosts and the GPUs' sparse ECC and XID records; ranks: the jobs;
# stragglers: the busy time and its baseline
REQUIRES = ("gpus", "ranks", "stragglers")
TP, DP, ALLREDUCE = "tp", "dp", "AllReduce"


def build(c: Ctx) -> Family:
    rate = c.w("rate")
    rank = (L.job_id, L.rank)
    info = c.m(M.train_rank_gpu_info)

    def mean(match: dict) -> str:
        """Mean time per collective of each rank, over the ops ``match`` selects."""
        def part(suffix: str) -> str:
            return f"sum {c.by(*rank)} ({c.rate(M.nccl_collective_duration_seconds, suffix, rate, match=match)})"
        return f"{part('_sum')}\n/\n({part('_count')} > 0)"

    def on_gpus(e: str) -> str:
        """``e`` (dcgm-exporter, per GPU) of each GPU a rank of a job runs on, labelled with
        the rank's job_id, rank, node and UUID; one value per UUID first, so a GPU two
        exporters report, or a rank's old and new series, cannot break the join."""
        return (f"max {c.by(L.UUID)} (\n  {e}\n)\n* {c.on(L.UUID)} group_right ()\n{info}")

    def per_gpu(e: str) -> str:
        return f"max {c.by(L.job_id, L.rank, L.node)} (\n{on_gpus(e)}\n)"

    def job_total(e: str, agg: str = "sum") -> str:
        """``e`` summed over the job's GPUs (``agg`` count: the GPUs that have it)."""
        return f"{agg} {c.by(L.job_id)} (\n{on_gpus(e)}\n)"

    def increase(metric) -> str:
        return f"increase({c.m(metric)}[{rate}])"

    zero = f"{c.r(R.world_size)} * 0"  # 0 for a job whose GPUs had no event, not no data
    uname = f"max {c.by(L.instance, L.nodename)} ({c.m(M.node_uname_info)})"
    line = (f"sum {c.by(L.node)} (label_replace(sum {c.by(L.nodename)} ("
            f"{c.m(M.node_infiniband_rate_bytes_per_second)} * {c.join((L.instance,), (L.nodename,))} "
            f"{uname}), {quote(c.l(L.node))}, \"$1\", {quote(c.l(L.nodename))}, \"(.+)\"))")
    exposed = (f"sum {c.by(L.job_id)} ({c.rate(M.train_exposed_comm_seconds, '_sum', rate)})\n/\n"
               f"(sum {c.by(L.job_id)} ({c.rate(M.train_exposed_comm_seconds, '_count', rate)}) > 0)")
    comm = (f"sum {c.by(L.job_id)} ({c.rate(M.nccl_collective_duration_seconds, '_sum', rate)})\n"
            f"/ {c.on(L.job_id)}\n"
            f"(sum {c.by(L.job_id)} ({c.rate(M.train_step_seconds, '_count', rate)}) > 0)")
    rules = (
        Record(c.rname(R.tp_time_rank), expr(mean({L.group: TP})), group="tp"),
        Record(c.rname(R.dp_allreduce_rank), expr(mean({L.op: ALLREDUCE, L.group: DP})), group="dp"),
        Record(c.rname(R.sm_active_rank), expr(per_gpu(c.m(M.DCGM_FI_PROF_SM_ACTIVE))), group="gpus"),
        Record(c.rname(R.nvlink_rank), expr(per_gpu(
            f"({c.m(M.DCGM_FI_PROF_NVLINK_TX_BYTES)} + {c.m(M.DCGM_FI_PROF_NVLINK_RX_BYTES)})")),
               group="gpus"),
        # from the GPU family's sparse records (only GPUs with an event): every GPU's raw
        # counter read again cost about 4x as much
        Record(c.rname(R.gpu_dbe_job), expr(f"{job_total(c.r(R.gpu_dbe_recent))}\nor\n{zero}"),
               group="errors"),
        Record(c.rname(R.gpu_sbe_job), expr(job_total(increase(M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL))),
               group="errors"),
        Record(c.rname(R.gpu_xid_job), expr(f"{job_total(c.r(R.gpu_xid_changed), 'count')}\nor\n{zero}"),
               group="errors"),
        Record(c.rname(R.nvlink_recovery_job), expr(job_total(
            increase(M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL))), group="errors"),
        Record(c.rname(R.exposed_comm_job), expr(exposed), group="fsdp"),
        Record(c.rname(R.comm_per_step_job), expr(comm), group="comm"),  # every group's collectives
        # the straggler score of every rank, for the overview's heatmap (the stragglers
        # family records it for the straggling ranks only)
        Record(c.rname(R.busy_ratio), over_baseline(c), group="stragglers"),
        Record(c.rname(R.ib_line_rate_job), expr(f"""
            max {c.by(L.job_id)} (
              {line}
              * {c.on(L.node)} group_right ()
              ({c.r(R.job_nodes)} * 0 + 1)
            )
        """), group="dp"),
    )
    return Family(NAME, __doc__, rules, requires=REQUIRES)
