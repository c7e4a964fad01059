"""NCCL: which rank every collective of a parallel group waits for.

The NCCL sidecar (``obsgen nccl-exporter``, ``obsgen.nccl``) joins the NCCL Inspector
records of one collective from every rank of its communicator and counts, per rank and
group, the collectives it took part in (``nccl_collective_aligned_total``) and those it
arrived last in (``nccl_collective_last_arrival_total``). Arrival order comes from each
rank's kernel time, measured by its own GPU timer, so host clock offsets do not change
who is last; a rank counts as last only when it arrived at least the exporter's
arrival resolution after the next-to-last, so a group that arrives together names
nobody. Alignment needs the files of every rank of a communicator: one node's ranks
for node-local groups (TP within a node), a shared filesystem for groups across nodes.

A rank that is last in more than ``thresholds.late_arrival_fraction`` (three quarters) of
its group's aligned collectives over ``windows.late_arrival`` (15 minutes) is the
persistent straggler the StragglAR paper describes: the whole group runs at its pace.
It arrives last in nearly every collective; chance gives each of n equally fast ranks
1/n, and a rank that is naturally a little slower (a persistent 1-2%) is last in up to
about half of a four-rank group's collectives. "More than half" is not enough: such a
rank plus one five-minute burst of a rotating slowdown crosses it, and a last arrival
that moves between ranks follows the workload, not the hardware. Fewer than
``late_arrival_min_collectives`` aligned collectives in the window judge nobody.

The exporter counts per rank and group, every op of the group together, and labels the
counters with the host the rank's records name; a rank moved to another host starts a
new series there, judged on its own collectives.

Detection latency: a rank that starts arriving last in every collective of a four-rank
group crosses three quarters of the window after two thirds of it (10 minutes), and the
rate extrapolation adds about one more: 11.5 minutes in the fixtures with the defaults.

## Train_Straggler_LateArrival

One rank was the last to arrive in most collectives of one of its parallel groups over
the window: every other rank of that group waited for it each time, and the whole job
runs at its pace. The collective is not slow; the rank arrives late. The description
gives the share of aligned collectives it was last in; the arrival skew of the group
(``nccl_collective_arrival_skew_seconds``) says how long the others waited.

Check first:
1. What the rank does before the collective: its compute time against its peers (Train_Straggler_Persistent for the same rank), and its GPU in DCGM: clocks and throttle reasons, XID and ECC errors, SM activity.
2. Whether the lateness follows the node or the work: other ranks on the same node (late in their own groups?), CPU affinity and host load, a controlled swap of the rank to another node; in MoE models the tokens routed to its experts.
3. The group's post-last-arrival tail (``nccl_collective_tail_seconds``) against its usual value: a normal tail with a large skew rules out the network; drain the node and restart from the last checkpoint when the hardware is at fault.
"""
from __future__ import annotations

from ..model import Alert, Family, Record, expr
from ..contract import L, M, R
from ..promql import Ctx

NAME = "nccl"


def build(c: Ctx) -> Family:
    # the exporter names the host of each rank's records on its alignment counters, so the
    # ratio carries it and the alert needs no join over every rank to say where a rank runs
    rank_group = (L.job_id, L.rank, L.group, L.node)
    window = c.w("late_arrival")
    ratio = c.r(R.late_arrival_ratio)
    where = ("rank %s{{ with $labels.%s }} (node {{ . }}){{ end }}"
             % (c.tl(L.rank), c.l(L.node)))
    rules = (
        Record(c.rname(R.late_arrival_ratio), expr(f"""
            sum {c.by(*rank_group)} (increase({c.m(M.nccl_collective_last_arrival_total)}[{window}]))
            /
            (
              sum {c.by(*rank_group)} (increase({c.m(M.nccl_collective_aligned_total)}[{window}]))
              >= {c.t('late_arrival_min_collectives')}
            )
        """)),
        Alert(
            name="Train_Straggler_LateArrival",
            expr=expr(f"""
                {ratio} > {c.t('late_arrival_fraction')}
            """),
            for_="0s",
            severity="warning",
            role="platform",
            summary=(f"Rank {c.tl(L.rank)} of job {c.tl(L.job_id)} arrives last in its "
                     f"{c.tl(L.group)} group"),
            description=(
                f"In job {c.tl(L.job_id)}, {where} was the last rank to enter "
                f"{{{{ $value | humanizePercentage }}}} of the {c.tl(L.group)} collectives "
                f"aligned across its communicator in the last {window}. Every other rank of "
                "the group waited for it each time, so the job runs at its pace."),
        ),
    )
    return Family(NAME, __doc__, rules)
