"""Fabric: NCCL recovering from link failures, and hosts whose InfiniBand falls behind.

NCCL 2.27+ (resilient collectives) recovers from a single link failure without aborting
the job; the NCCL sidecar or obsgen.instrument counts each recovery per rank
(``nccl_link_recovery_total``). One recovery is an event; several within the window mean
the fabric under the job is degrading, before it fails outright.

InfiniBand is read from node_exporter (``node_infiniband_port_data_transmitted_bytes_total``
per HCA port, in bytes), summed per host and mapped to the host's name through
``node_uname_info``, then to the job through the hosts its ranks report in their own
``node`` label. Only hosts whose ranks of the job all completed all-reduces in the rate
window count (the all-reduce windows, read from the collective counts, which
obsgen.instrument and the NCCL sidecar both label with the rank's host): a host that is
idle, checkpointing or restarting is not compared, and a host the job left leaves with
its last scrape of the ranks' collective counts. In a ring all-reduce every host sends the same bytes per step, so one
host far below the job's median sends its share some other way: NCCL fell back to TCP
sockets because it could not open the HCA, a rail is down and the traffic crosses fewer
ports, or the link trained at a lower speed.

The reference document (section 9) multiplies the port rate by
``rate(nccl_collective_duration_seconds_count[1m]) > 0`` ``on(Hostname)``: the NCCL
series have no Hostname label (and node_exporter's none either), so every series matches
every other, which Prometheus refuses ("many-to-many matching not allowed") as soon as a
job has two ranks; and multiplying by a rate of collective counts scales bytes by
all-reduces per second. Here the all-reduce windows are a filter per host, and the join
runs on the host name both sides actually carry.

## Train_NCCL_LinkRecovery

NCCL recovered from link failures in the job several times within the window. Each
recovery costs a stall of the collective and means a link (NVLink, InfiniBand port, cable
or switch port) flapped; a rising count usually precedes a hard failure that aborts the
job.

Fires after the fault, with the default windows: the next evaluation.

Check first:
1. Which ranks and hosts recover (the per-rank counter and the NCCL sidecar's log lines naming the device and peer), and whether they share a switch or rail.
2. The hosts' InfiniBand port error counters (node_infiniband_link_error_recovery_total, link_downed_total, port_errors_received_total) and DCGM NVLink CRC and recovery errors.
3. Plan a drain of the worst host at the next checkpoint rather than waiting for the abort; ask the network team to check the switch ports and cables on that path.

## Train_IB_Asymmetry

During all-reduce windows, one host of the job sent InfiniBand traffic at less than the
threshold share of the median of the job's hosts. The host's traffic is going elsewhere
or its links are slow, and the all-reduce waits for it.

Fires after the fault, with the default windows: 13 min.

Check first:
1. The NCCL init log of the ranks on that host (NCCL_DEBUG=INFO, NET/IB lines): did NCCL pick every HCA (NCCL_IB_HCA), or fall back to sockets (NET/Socket) because the device is not visible in the container?
2. The host's ports: node_infiniband_state_id and physical_state_id (every port active and linked up), node_infiniband_rate_bytes_per_second against its peers (a link trained at a lower speed), port error counters.
3. ibstat / ibdiagnet on the host and its leaf switch; if a port or cable is bad, drain the host and restart the job from its last checkpoint without it.
"""
from __future__ import annotations

from ..contract import L, M, R
from ..model import Alert, Family, Record, expr
from ..promql import Ctx, number, quote

NAME = "fabric"
ALLREDUCE = "AllReduce"


def build(c: Ctx) -> Family:
    t = c.cfg["thresholds"]
    rate, recovery_window = c.w("rate"), c.w("link_recovery")
    job, node = c.tl(L.job_id), c.tl(L.node)
    allreduces = (f"rate({c.m(M.nccl_collective_duration_seconds, '_count', match={L.op: ALLREDUCE})}"
                  f"[{rate}])")
    uname = f"max {c.by(L.instance, L.nodename)} ({c.m(M.node_uname_info)})"
    ratio = number(t["ib_asymmetry_ratio"])
    live = f"{c.m(M.nccl_collective_duration_seconds, '_count', match={L.op: ALLREDUCE})}"
    rules = (
        Record(c.rname(R.link_recoveries), expr(f"""
            sum {c.by(L.job_id)} ({c.rate(M.nccl_link_recovery_total, '', recovery_window, fn='increase')})
        """)),
        Record(c.rname(R.ib_tx_node), expr(f"""
            sum {c.by(L.node)} (
              label_replace(
                {c.rate(M.node_infiniband_port_data_transmitted_bytes_total, '', rate)}
                * {c.join((L.instance,), (L.nodename,))}
                {uname},
                {quote(c.l(L.node))}, "$1", {quote(c.l(L.nodename))}, "(.+)"
              )
            )
        """)),
        # The job's hosts read from the collective counts here, not from a record of
        # them: a host is left at its last scrape, not when a record of it ends (a store
        # that loses a recorded series' staleness marker keeps it for its lookback).
        Record(c.rname(R.ib_tx_job_node), expr(f"""
            (
              (
                min {c.by(L.job_id, L.node)} (
                  sum {c.by(L.job_id, L.rank, L.node)} ({allreduces})
                ) > 0
                and {c.on(L.job_id, L.node)} {live}
              ) > bool 0
            )
            * {c.join((L.node,))}
            {c.r(R.ib_tx_node)}
        """)),
        Record(c.rname(R.ib_tx_job_median), expr(f"""
            quantile {c.by(L.job_id)} (0.5, {c.r(R.ib_tx_job_node)})
        """)),
        Alert(
            name="Train_NCCL_LinkRecovery",
            expr=expr(f"""
                round({c.r(R.link_recoveries)}) >= {number(t['nccl_link_recoveries'])}
            """),
            for_="0s",
            severity="warning",
            role="platform",
            summary=f"NCCL keeps recovering from link failures in job {job}",
            description=(
                f"NCCL recovered from {{{{ $value }}}} link failures in the collectives of "
                f"job {job} in the last {recovery_window} (limit "
                f"{number(t['nccl_link_recoveries'])}): a link under the job is flapping and "
                "the fabric is degrading toward a failure that aborts the job."),
        ),
        Alert(
            name="Train_IB_Asymmetry",
            expr=expr(f"""
                {c.r(R.ib_tx_job_node)}
                / {c.join((L.job_id,))}
                ({c.r(R.ib_tx_job_median)} > 0)
                < {ratio}
            """),
            for_="10m",
            severity="warning",
            role="platform",
            summary=f"InfiniBand of node {node} lags the other hosts of job {job}",
            description=(
                f"During all-reduce, node {node} of job {job} sends "
                '{{ printf "%.2f" $value }} of the InfiniBand rate of the median host of the '
                f"job (limit {ratio}): its traffic goes over TCP or fewer ports, or its links "
                "are slow, and every all-reduce waits for it."),
        ),
    )
    return Family(NAME, __doc__, rules)
