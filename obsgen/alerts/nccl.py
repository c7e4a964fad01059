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

A rank that is last in more than ``thresholds.late_arrival_fraction`` (nine tenths) of
its group's aligned collectives over ``windows.late_arrival`` (1m) is *late*: the
persistent straggler the StragglAR paper describes, whose group runs at its pace. It
arrives last in nearly every collective, whether it is 10% or 50% slower, since the order
is what counts. Chance gives each of n equally fast ranks 1/n, and healthy GPUs that
differ a little move that: with 3% noise per collective, of two GPUs 4% apart (as healthy
GPUs within 2% of nominal can be) the slower is last in about 83% of a two-rank group's
collectives, where a rank 10% slower is last in 99%. Three quarters would name healthy
GPUs of two-rank TP groups. Fewer than ``late_arrival_min_collectives`` aligned
collectives in the window judge nobody.

**A page means a fault, not a spell** (obsgen/alerts/persistence.py, as for busy time): a
kind of group is judged once its alignment has run through ``windows.straggler_warmup``
after a start or a restart (a rank that warms up last arrives last); a rank pages once it
was late at every evaluation for ``windows.straggler_spell`` and what the window remembers
of a spell (the flag needs nearly all of the window late, so a few seconds: the span is
rounded up to an evaluation); the page holds for ``windows.straggler_hold`` through quiet
spells, an exporter restart or a restart on the same hosts. A last arrival that moves on
before a spell ends names nobody (Train_Straggler_Transient speaks for the workload).

Ranks late at the same TP, CP or EP position in at least half of the stage's groups of
that kind (and in two or more), or that busy time shows as such a pattern, follow the
mesh, not a GPU: they are Train_Straggler_Mapping's, not one late arrival each.

In a job with tensor parallelism the TP groups are the communicators that matter: the
peers wait for the slowest member in every per-layer collective, so its last arrivals
name the GPU even where the ranks report no wait inside compute (Train_Straggler_TPGroup).

The exporter counts per rank and group, every op of the group together, and labels the
counters with the host the rank's records name; a rank moved to another host starts a
new series there, judged on its own collectives.

Detection latency: a rank that starts arriving last in every collective is late once
nine tenths of the window are behind the onset (under a minute) and pages 3.5 minutes
later: about 5 minutes after the onset (``python -m tests.promtool.latency``,
benchmarks/DETECTION.md). While Train_Straggler_Persistent fires for the same rank,
Alertmanager suppresses this alert: one fault, two signals.

## Train_Straggler_LateArrival

One rank was the last to arrive in most collectives of one of its parallel groups over
the window: every other rank of that group waited for it each time, and the whole job
runs at its pace. The collective is not slow; the rank arrives late. The description
gives the share of aligned collectives it was last in; the arrival skew of the group
(``nccl_collective_arrival_skew_seconds``) says how long the others waited.

Fires after the fault, with the default windows: 4.5 min (p95 4.7) at 20% slower, also
in a TP pair.

Check first:
1. What the rank does before the collective: its compute time against its peers (Train_Straggler_Persistent for the same rank), and its GPU in DCGM: clocks and throttle reasons, XID and ECC errors, SM activity.
2. Whether the lateness follows the node or the work: other ranks on the same node (late in their own groups?), CPU affinity and host load, a controlled swap of the rank to another node; in MoE models the tokens routed to its experts.
3. The group's post-last-arrival tail (``nccl_collective_tail_seconds``) against its usual value: a normal tail with a large skew rules out the network; drain the node and restart from the last checkpoint when the hardware is at fault.
"""
from __future__ import annotations

import math

from ..config import duration, group_interval, seconds
from ..model import Alert, Family, Inhibit, Record, expr
from ..contract import L, M, R
from ..promql import Ctx
from . import persistence
from .stragglers import EFFECTS, mesh_pattern

NAME = "nccl"
REQUIRES = ("stragglers",)  # reads its mesh facts and pattern record (Train_Straggler_Mapping's ranks)


def build(c: Ctx) -> Family:
    # the exporter names the host of each rank's records on its alignment counters, so the
    # ratio carries it and the alert needs no join over every rank to say where a rank runs
    rank_group = (L.job_id, L.rank, L.group, L.node)
    kind = (L.job_id, L.group)
    window = c.w("late_arrival")
    every = seconds(group_interval(c.cfg, NAME) or "1m")
    ratio, flag = c.r(R.late_arrival_ratio), c.r(R.late_arrival_flag)
    settled = c.r(R.late_arrival_settled)
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
        # The sidecar's alignment runs for the job's groups of a kind: judged once it has
        # run through the warm-up window (a rank that warms up last arrives last).
        Record(c.rname(R.late_arrival_ranks), f"count {c.by(*kind)} ({ratio})"),
        Record(c.rname(R.late_arrival_settled),
               persistence.settled(c.r(R.late_arrival_ranks), c.w("straggler_warmup"), every)),
        # Recorded for the late ranks only, valued as their share (the alert reads it),
        # not for every rank and group.
        Record(c.rname(R.late_arrival_flag), expr(f"""
            {ratio} > {c.t('late_arrival_fraction')}
            and {c.on(*kind)} {settled}
        """)),
        # Late without a break for longer than a spell and what the window remembers of it.
        Record(c.rname(R.late_arrival_unbroken), persistence.unbroken(
            c, flag, settled, rank_group, kind, seconds(c.w("straggler_spell")) + smear(c, every),
            every)),
        Record(c.rname(R.late_arrival_held), persistence.held(
            c, c.r(R.late_arrival_unbroken), c.w("straggler_hold"),
            f"{c.on(*rank_group)} present_over_time({ratio}[{duration(1.5 * every)}])",
            f"{c.on(*kind)} {c.r(R.late_arrival_ranks)}")),
        # Late ranks (held, or flagged now) with their positions in the mesh: the same TP,
        # CP or EP position late in the stage's groups follows the mesh
        # (Train_Straggler_Mapping), not a GPU. Flagged ones count, so the first rank of a
        # pattern to be held is not named alone while the others are a few seconds behind.
        Record(c.rname(R.late_arrival_positions), expr(f"""
            max {c.by(L.job_id, L.rank, L.stage, L.tp_rank, L.cp_rank, L.ep_rank)} (
              {c.r(R.rank_place)}
              and {c.on(L.job_id, L.rank)} ({c.r(R.late_arrival_held)} or {flag})
            )
        """)),
        Record(c.rname(R.late_arrival_pattern), expr(mesh_pattern(c, c.r(R.late_arrival_positions)))),
        Alert(
            name="Train_Straggler_LateArrival",
            inhibits=(Inhibit(EFFECTS),),
            expr=expr(f"""
                {c.r(R.late_arrival_held)}
                unless {c.on(L.job_id, L.rank)} {c.r(R.straggler_pattern)}
                unless {c.on(L.job_id, L.rank)} {c.r(R.late_arrival_pattern)}
            """),
            for_="0s",
            severity="warning",
            role="platform",
            summary=(f"Rank {c.tl(L.rank)} of job {c.tl(L.job_id)} arrives last in its "
                     f"{c.tl(L.group)} group"),
            description=(
                f"In job {c.tl(L.job_id)}, {where} has been the last rank to enter most of the "
                f"{c.tl(L.group)} collectives aligned across its communicator without a break "
                f"for longer than a spell ({{{{ $value | humanizePercentage }}}} of them in its "
                f"last {window}). Every other rank of the group waited for it each time, so the "
                "job runs at its pace."),
        ),
    )
    return Family(NAME, __doc__, rules, requires=REQUIRES)


def smear(c: Ctx, every: float) -> float:
    """Seconds a spell's late arrivals stay flagged after it ends, rounded up to whole
    evaluations: the flag needs nearly all of the window late (in a group of two, a share
    f of the collectives needs a share 2f - 1 of the window inside the spell, the rest of
    it late by chance half the time), so it ends when less than that is, (2 - 2f) of the
    window after the spell."""
    left = seconds(c.w("late_arrival")) * max(0.0, min(1.0, 2 - 2 * c.cfg["thresholds"]["late_arrival_fraction"]))
    return every * max(1, math.ceil(left / every - 1e-9))
