"""Hardware: the fabric and the GPUs under one job.

Hosts come from the job's ranks (their ``node`` label, ``job_node:train_ranks:count``),
so every panel shows the job's hosts only, on bare metal and Kubernetes alike.
dcgm-exporter's ``Hostname`` (``hostname`` on its main branch) and node_exporter's
``nodename`` are mapped to that host name. A GPU panel whose dcgm-exporter field is not
in the counters CSV says "not collected" and names the field; the GPU counters panel
counts, per field, the job's GPUs that report it. InfiniBand is shown during all-reduce windows (the hosts whose ranks all-reduce)
against the ports' line rate.
"""
from __future__ import annotations

from grafana_foundation_sdk.models import units as u

from ..contract import COUNTER, DCGM, L, M, R
from ..promql import number, quote
from .model import RANK, SLOW, STAT, TIMESERIES, Panel, Query, Row, Step, View
from .query import RATE
from ..alerts.gpus import HOST, to_node

KEY = "hardware"
# NVML clock event reasons (DCGM_FI_DEV_CLOCKS_EVENT_REASONS bits) worth a panel line.
# The dcgm-exporter fields obsgen reads, in the contract's order.
DCGM_FIELDS = tuple(m for m in M if m.emitter.startswith(DCGM))
REASONS = (("software power cap", 0x4), ("hardware slowdown", 0x8), ("software thermal", 0x20),
           ("hardware thermal", 0x40), ("power brake", 0x80))


def build(env) -> View:
    q, cfg = env.q, env.cfg
    node, nodename = q.c.l(L.node), q.c.l(L.nodename)
    hosts = f"({q.r(R.job_nodes)} * 0 + 1)"  # 1 per host of the job, labelled job_id, node

    def on_hosts(per_host: str) -> str:
        """A per-host expression (labelled node) for the job's hosts, labelled job_id."""
        return f"{per_host}\n* {q.join((L.node,), (L.job_id,))}\n{hosts}"

    # Each exporter's series are aggregated per host under the exporter's own host label
    # first, and only the per-host result is relabelled (then aggregated once more, per
    # host, to keep the node label alone): label_replace builds a label set per series
    # at every step, and relabelling every GPU before aggregating cost "Hottest GPU per
    # host" 2.8x its time at 4,096 ranks.
    def per_host(agg: str, by: tuple, e: str, relabel) -> str:
        outer = "sum" if agg == "count" else agg
        return f"{outer} {q.by(L.node)} ({relabel(f'{agg} {q.by(*by)} ({e})')})"

    def gpus(e: str, agg: str = "max") -> str:
        """dcgm-exporter ``e`` per host (``agg`` over its GPUs), for the job's hosts."""
        return on_hosts(per_host(agg, HOST, e, lambda x: to_node(q.c, x)))

    def nodes(e: str) -> str:
        """node_exporter ``e`` per host (summed over devices and ports), for the job's hosts."""
        uname = f"max {q.by(L.instance, L.nodename)} ({q.m(M.node_uname_info)})"
        return on_hosts(per_host(
            "sum", (L.nodename,), f"{e}\n * {q.join((L.instance,), (L.nodename,))} {uname}",
            lambda x: f'label_replace({x}, {quote(node)}, "$1", {quote(nodename)}, "(.+)")'))

    def reported(f) -> str:
        """A series per GPU that reports field ``f`` (a counter read as a counter)."""
        return f"increase({q.m(f)}[{RATE}]) >= 0" if f.type == COUNTER else q.m(f)

    by_node = "{{%s}}" % node
    line_rate = (q.r(R.ib_line_rate_job) if env.records else  # the panels family's
                 f"max {q.by(L.job_id)} (\n{nodes(q.m(M.node_infiniband_rate_bytes_per_second))}\n)")
    limit = cfg["thresholds"]["tp_sm_active_stddev"]
    ratio = cfg["thresholds"]["ib_asymmetry_ratio"]
    fabric = Row("Fabric", (
        Panel(TIMESERIES, "InfiniBand transmit per host during all-reduce", "Bytes per second "
              "each host of the job sends while its ranks all-reduce, and the hosts' line rate "
              f"(dashed). Healthy: close together and near line rate; a host below {number(ratio)}x "
              "the median fires Train_IB_Asymmetry.", u.BytesPerSecondSI,
              (Query(q.r(R.ib_tx_job_node), by_node), Query(line_rate, "line rate")),
              width=24, min=0, interval="" if env.records else SLOW),
        Panel(TIMESERIES, "NCCL link recoveries per rank", "Link failures NCCL recovered from "
              "per interval, by rank. Healthy: none; a trend up means the fabric degrades.",
              u.Short, (Query(f"sum {q.by(L.job_id, L.rank)} (increase({q.m(M.nccl_link_recovery_total, rank=True)}"
                              f"[{RATE}])) > 0", "rank {{%s}}" % q.rank),), min=0,
              interval=SLOW),
        Panel(TIMESERIES, "NVLink errors per host", "NVLink CRC and recovery errors per "
              "interval on the GPUs of each host of the job (dcgm-exporter). Healthy: zero.",
              u.Short,
              (Query(gpus(f"increase({q.m(M.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL)}[{RATE}])",
                          "sum"), "CRC " + by_node),
               Query(gpus(f"increase({q.m(M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL)}[{RATE}])",
                          "sum"), "recovery " + by_node)), min=0, interval=SLOW,
              no_value=q.not_collected(M.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
                                       M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL)),
    ))
    def held(bit: int) -> str:
        # bit set: value mod 2*bit at least bit. The GPUs below bit (most, at full clocks)
        # are dropped by the first comparison, so the arithmetic runs on the few others:
        # floor(x / bit) % 2 == 1 did four operations on every GPU at every step (27x the
        # time at 4,096 ranks).
        flag = f"({q.m(M.DCGM_FI_DEV_CLOCKS_EVENT_REASONS)} >= {bit}) % {2 * bit} >= {bit}"
        return f"sum {q.by(L.job_id)} (\n{gpus(flag, 'count')}\n)"

    reasons = tuple(Query(held(bit), name) for name, bit in REASONS)
    health = Row("GPU health", (
        Panel(TIMESERIES, "SM-active spread per host", "Standard deviation of SM-active across "
              "the job's GPUs of each host, as Train_TP_Imbalance reads it. Healthy: below "
              f"{number(limit)} (dashed).", u.PercentUnit,
              (Query(q.r(R.sm_active_spread), by_node),),
              steps=(Step(None, "green"), Step(limit, "red")), draw_steps=True, min=0,
              no_value=q.not_collected(M.DCGM_FI_PROF_SM_ACTIVE)),
        Panel(TIMESERIES, "ECC errors per host", "Uncorrectable (double-bit) and corrected "
              "ECC errors, and memory rows remapped after uncorrectable errors, per interval "
              "on each host of the job. Healthy: zero uncorrectable and no remaps; any means "
              "drain the host.", u.Short,
              (Query(gpus(f"increase({q.m(M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)}[{RATE}])", "sum"),
                     "uncorrectable " + by_node),
               Query(gpus(f"increase({q.m(M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL)}[{RATE}])", "sum"),
                     "corrected " + by_node),
               Query(gpus(f"increase({q.m(M.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)}[{RATE}])",
                          "sum"), "remapped rows " + by_node)), min=0, interval=SLOW,
              no_value=q.not_collected(M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
                                       M.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)),
        Panel(TIMESERIES, "Last XID code per host", "The highest last-XID code of the GPUs of "
              "each host (dcgm-exporter's gauge holds the last code, not a count). Healthy: 0; "
              "48, 64, 94, 95 are memory errors, 79 a GPU off the bus.", u.NoUnit,
              (Query(gpus(q.m(M.DCGM_FI_DEV_XID_ERRORS)), by_node),), min=0, decimals=0,
              no_value=q.not_collected(M.DCGM_FI_DEV_XID_ERRORS)),
        Panel(TIMESERIES, "Hottest GPU per host", "Highest GPU temperature of each host of the "
              "job. Healthy: steady and below the slowdown temperature (about 85 C).",
              u.Celsius, (Query(gpus(q.m(M.DCGM_FI_DEV_GPU_TEMP)), by_node),),
              no_value=q.not_collected(M.DCGM_FI_DEV_GPU_TEMP)),
        Panel(TIMESERIES, "GPUs held below full clocks, by reason", "GPUs of the job's hosts "
              "whose clocks are held down, by NVML clock event reason. Healthy: none; thermal "
              "or power brake on one GPU makes a straggler.", u.Short, reasons, min=0, decimals=0,
              interval=SLOW),
        Panel(TIMESERIES, "Power per host", "Power draw of all GPUs of each host of the job. "
              "Healthy: steady and alike across hosts.", u.Watt,
              (Query(gpus(q.m(M.DCGM_FI_DEV_POWER_USAGE), "sum"), by_node),), min=0,
              no_value=q.not_collected(M.DCGM_FI_DEV_POWER_USAGE)),
        # one number per field obsgen reads: the panels above cannot tell a field nobody
        # collects from a quiet one where they filter (clock reasons), and the alerts not at all
        Panel(STAT, "GPU counters collected", "GPUs of the job's hosts that report each "
              "dcgm-exporter field obsgen reads. Healthy: every field on every GPU; \"not "
              "collected\" means the counters CSV leaves the field out (run dcgm-exporter "
              "with examples/dcgm-exporter/obsgen-counters.csv) and the alerts that read it "
              "are blind.", u.Short,
              tuple(Query(f"sum(\n{gpus(reported(f), 'count')}\n) or vector(0)",
                          cfg.metric(f.key), instant=True) for f in DCGM_FIELDS),
              width=24, height=6, decimals=0, steps=(Step(None, "red"), Step(1, "green")),
              mappings=(("0", "not collected", "red"),)),
    ))
    return View(KEY, "Hardware", "Fabric and GPUs of one job: InfiniBand per host during "
                "all-reduce against line rate, NCCL link recoveries, NVLink errors, ECC, XID, "
                "temperature, clock reasons and power.", __name__.replace(".", "/") + ".py",
                (fabric, health), variables=(RANK,))
