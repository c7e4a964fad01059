"""Stragglers: one slow GPU holds every other rank back at each collective.

In synchronous training every rank's *step* time is the same, because each step ends at
the gradient collective (a barrier). Comparing step times therefore finds nothing, and
comparing time *inside* the gradient collective points at the wrong rank: the late rank
waits least. The slow GPU is found from the time it spends computing.

**Busy time, not compute time.** A real job is a mesh. The ranks of a tensor-parallel
group run in lockstep: a per-layer all-reduce makes every member wait for the slowest
inside its compute, so a slow GPU's seven TP peers report its compute as theirs. A
pipeline runs at its slowest stage's pace: the other stages wait in recv inside their
compute. A rank's *busy time* is its compute (``train_compute_seconds``) minus the time
it waited inside it (``train_compute_wait_seconds``: its TP, CP and EP collectives and
pipeline send/recv, which obsgen.instrument measures with ``patch_distributed`` on). The
slow GPU's busy time is its own; its waiting peers' are theirs. Ranks that report no
wait are judged on their compute (a data-parallel job, whose compute has no waits).

**Baseline: the rest of the stage.** Each rank's mean busy time over the short window
``windows.straggler`` (1m: two scrapes) is compared with the median of its pipeline stage
(stages do different work: a heavier last stage, or the stages holding the embedding or
the loss, are not stragglers; ranks of one stage do the same work) with the stage's
slowest rank left out. A slow rank is never part of the baseline it is compared with: in
a stage of two ranks it is compared with the other one, and in a stage of one there is
nothing to compare with. A rank whose busy time is more than
``thresholds.straggler_ratio`` times that baseline is *flagged*. Ranks are grouped by rank
and the host they run on (the ``node`` label), never by instance or pod: a rank restarted
on its host is one series across its old and new processes, and the alert names the host
without a join. A rank is judged in the stage it is in now and while it is exported: a
rank lost, or renumbered by an elastic resize, drops out within one and a half
evaluations; one missed scrape does not end it.

**A page means a fault, not a spell.** Real clusters slow ranks down for a minute or two
all the time (a throttle blip, host contention, a dataloader worker restart), move
slowness between ranks (contention, sequence lengths), and warm up after every restart.
A short window sees a spell end within a minute, so persistence is judged on what
persists (obsgen/alerts/persistence.py):

* *Warm-up.* A stage is judged once its baseline has been recorded through
  ``windows.straggler_warmup`` (5m) after it starts or comes back from a restart gap: warm-up
  and compilation page nothing, on every rank or on one, and a restart gap is never read
  as ranks that recovered.
* *Unbroken.* A rank flagged at every evaluation for ``windows.straggler_spell`` (3m) and the
  window together pages. The window remembers a spell for at most its own length, so a
  slowdown shorter than a spell, of any size, never pages on its own.
* *Recurring.* A rank whose straggling costs the job ``thresholds.straggler_recurrence_cost``
  (0.1) of its step time over ``windows.straggler_recurrence`` (30m), as much as a steady
  GPU 10% slower, pages while it straggles: a throttle that comes back, a "lemon" GPU. Its
  cost is its excess over the baseline at each evaluation, capped so that one spell costs
  at most half of that; it must be the costliest rank of its stage and
  ``thresholds.straggler_recurrence_dominance`` (2) times the next one's, since a cost
  several ranks share is slowness that moves.
* *Held.* A page holds for ``windows.straggler_hold`` (12m) after its condition last held,
  while the rank is exported or its job is down for a restart: one alert through a
  throttle's quiet spells, a missed scrape or a restart on the same hosts, and a GPU that
  recovers resolves 12 to 14 minutes after its last slow minute.

**Classes.** Slowness that follows a place in the mesh (the same TP, CP or EP position in
at least half of the stage's groups of that kind, and in two or more) is a *mapping*
pattern: one Train_Straggler_Mapping alert, routed to the workload team, and no
Persistent alert for its ranks. Ranks that report no wait hold their TP group and the
other stages of their pipeline, which wait for them: one Train_Straggler_TPGroup alert per
pipeline names those TP groups. A whole stage slower than the others is never a straggler
here (each rank is compared within its stage); it is the pipeline's imbalance. Slowness
that moves between ranks, none of them slow for a spell or recurring, is
Train_Straggler_Transient's once it costs the job ``thresholds.straggler_transient_cost``
(15%) of its step time over the recurrence window; each data-parallel replica counts once,
its slowest rank, so noise common to a replica's ranks (its sequence lengths) is one cost.
The mesh comes from facts recorded every ``facts_interval`` (each rank's place in it, the
ranks at each position of a stage's groups, the pipeline of each TP group), so a job that
starts or resizes is classified on its new mesh within that interval.

**Causes before effects.** While a straggler alert fires for a job, Alertmanager suppresses
the job's Train_Bubble_Excess, Train_StepTime_Regression and Train_ETA_Slip: the idle time
of the other stages, the slower steps and the later finish are the straggler's
(alertmanager/obsgen-routes.yaml). Persistent also suppresses LateArrival for its rank.

**The threshold** (1.07 by default) sits between the spread of healthy GPUs and the
slowdowns worth a page. Healthy GPUs of one model differ persistently by a few percent
(within about 3% of nominal), and a 1m mean of a noisy step time moves by about a percent
more; a GPU 10% slower is what the targets ask to be named. A fleet whose healthy GPUs
spread wider raises it, at the cost of later detection.

**Every 30s** (``family_intervals.stragglers``): a rank pages once it was flagged at every
evaluation of a spell and a window, so evaluating every 1m would add up to a minute to
every page. Evaluate the family at least every 2 scrapes.

Detection latency with the defaults (30 s scrape, the family every 30s, a 1m window, a
threshold of 1.07): a rank 20% slower is flagged once a third of the window is slow, and
pages 4 minutes (a spell and the window) later: 4.5 to 5 minutes after the onset; a rank
10% slower is flagged once two thirds are, about 5 minutes. A spell of 3x for 2.9 minutes
pages nothing. The fixtures and ``make detect`` measure these
(``python -m tests.promtool.latency``, benchmarks/DETECTION.md).

## Train_Straggler_Persistent

One rank's busy time has been above its stage's baseline (the other ranks of its stage)
by at least the straggler threshold without a break for longer than a spell, or again and
again at the cost of a steady GPU 10% slower. Every step of the job runs at that rank's
speed, so the whole job is slowed by about the same share. Its TP peers and the other
stages of its pipeline wait for it and are not named: their busy time is their own. A
rank that is slow step after step, or that keeps coming back, is almost always hardware
or placement: a throttled or degraded GPU, a bad NVLink, CPU affinity, a noisy neighbour
on the host. The alert holds 12 minutes after the rank was last slow.

Fires after the fault, with the default windows: 4.5 to 5 min for a 20% slower GPU (p95
5.0 on 25 meshes), 5 min for 10%; a recurring throttle by its third spell.

Check first:
1. The GPU of that rank in DCGM: clocks and throttle reasons (thermal, power), XID and ECC errors, SM-active against its peers.
2. Whether the slowness follows the host: other jobs' ranks on the same node, the node's NIC and CPU load; a controlled swap of the rank to another node settles hardware against workload.
3. Drain the node and open an RMA when the hardware is at fault; restart the job from its last checkpoint without that node.

## Train_Straggler_TPGroup

Several ranks of one tensor-parallel group straggle together without a break, and they
report no wait inside compute (``train_compute_wait_seconds``): a slow GPU makes its TP
peers wait in every per-layer all-reduce, and the TP groups of the other stages of its
pipeline wait for it in recv, so from compute time alone all of them look slow and where
the slowness starts cannot be told. They are one alert for the pipeline (named by its
first rank, ``pp_group``) that lists the TP groups (each named by its lowest rank), never
one alert per rank or per group. Where the ranks report their wait,
Train_Straggler_Persistent names the GPU itself instead.

Fires after the fault, with the default windows: as Persistent.

Check first:
1. The GPUs of the group's ranks in DCGM (the overview's slowest-ranks table lists them with their TP position): clocks, throttle reasons, XID and ECC errors; the slow one differs from its peers.
2. The NCCL sidecar's last arrivals in the group's TP communicator (Train_Straggler_LateArrival): the slow GPU arrives last.
3. Turn on obsgen.instrument's patch_distributed (and use_cuda_events on GPUs) so the ranks report their waits and the next alert names the GPU.

## Train_Straggler_Mapping

The ranks at one position of their tensor-, context- or expert-parallel groups straggle
in at least half of the stage's groups of that kind (and in two or more), and the other
positions do not: the same TP position in every TP group, the same expert slot in every
EP group. A GPU failing at the same place of every group is not chance; the slowness
follows the mesh, so it is the partitioning or the mapping of ranks to GPUs, and the
alert goes to the workload team instead of one Persistent alert per GPU to the platform
team. Two GPUs of a stage that holds only two groups can be slow at the same position
by chance: check them too (step 3).

Fires after the fault, with the default windows: 4.5 to 5 min.

Check first:
1. What that position does that the others do not: uneven layer or vocabulary partitioning (a TP rank holding a larger shard of the embedding or the output layer), an expert slot that receives more tokens (routing imbalance pinned to one EP position), a CP rank holding a longer sequence chunk.
2. The placement: whether that position lands on the same GPU slot, PCIe switch, NIC or NUMA node of every host (the rank-to-GPU order of the launcher, CUDA_VISIBLE_DEVICES, the NCCL topology); a slot behind a slower link makes that position slow everywhere.
3. The GPUs of the named ranks in DCGM (the overview's slowest-ranks table lists them with their TP position and group): when only two are named and they also differ in clocks or errors from their peers, they are two hardware stragglers.

## Train_Straggler_Transient

Ranks keep straggling, but a different rank each time, none of them for a spell or
again and again: the stragglers that moved between at least two ranks cost the job
``thresholds.straggler_transient_cost`` of its step time or more over the recurrence
window. A straggler that moves between ranks follows the workload, not the hardware. A
single short spell, or a few, cost too little to page.

Fires after the fault, with the default windows: 35 to 40 min after a moving slowness
costing a fifth of the speed starts.

Check first:
1. The data pipeline: dataloader workers, prefetch depth, storage read latency, uneven sequence lengths or packing between batches.
2. Routing balance in MoE models: tokens per expert and capacity-factor overflow on the ranks that straggled.
3. Shared resources: host CPU contention, checkpoint or logging work done on some ranks only, network jitter from other jobs.
"""

from __future__ import annotations

import json
import math

from ..config import duration, group_interval, seconds
from ..model import Alert, Family, Inhibit, Record, expr
from ..contract import L, M, R
from ..promql import Ctx, number
from . import persistence

NAME = "stragglers"
# The effects of a straggler, suppressed in Alertmanager while it fires for their job: the
# idle time it gives the other stages, the slower steps, the later finish.
EFFECTS = ("Train_Bubble_Excess", "Train_StepTime_Regression", "Train_ETA_Slip")
AXES = (("tp", L.tp_rank), ("cp", L.cp_rank), ("ep", L.ep_rank))  # mesh_axis, its position label


def go_string(text: str) -> str:
    """A Go template string literal of ``text``: raw, in backticks, unless it holds a
    backtick (which would end it) or a carriage return (which a raw string drops); then
    quoted, with Go's escapes, which JSON's are."""
    if "`" in text or "\r" in text:
        return json.dumps(text, ensure_ascii=False)
    return f"`{text}`"


def build(c: Ctx) -> Family:
    rank = (L.job_id, L.rank, L.stage, L.node)
    stage = (L.job_id, L.stage)
    positions = (L.tp_rank, L.cp_rank, L.ep_rank)
    window, recur = c.w("straggler"), c.w("straggler_recurrence")
    pct = f"{(c.cfg['thresholds']['straggler_ratio'] - 1) * 100:g}%"
    every = interval(c)
    where = (f"rank {c.tl(L.rank)} (stage {c.tl(L.stage)}"
             "{{ with $labels.%s }}, node {{ . }}{{ end }})" % c.l(L.node))
    compute = c.rate(M.train_compute_seconds, "_sum", window)
    place = (f"max {c.by(L.job_id, L.rank, L.stage, L.tp_group, *positions, L.dp_rank)} "
             f"({c.m(M.train_rank_mesh_info)})")
    flag, held, cost = c.r(R.straggler_flag), c.r(R.straggler_held), c.r(R.straggler_cost)
    settled = c.r(R.straggler_settled)
    local = c.cfg["ruler"] == "prometheus"  # records read back at once (see config: ruler)
    # TP groups with several held ranks that report no wait
    lockstep_groups = (f"{c.r(R.straggler_lockstep)} and {c.on(L.job_id, L.tp_group)} "
                       f"(count {c.by(L.job_id, L.tp_group)} ({c.r(R.straggler_lockstep)}) > 1)")
    pipelines = (f"({lockstep_groups})\n* {c.join((L.job_id, L.tp_group), (L.pp_group,))} "
                 f"{c.r(R.tp_pipeline)}")
    # the TP groups of the pipeline an alert names, from the query of its description
    listed = ("{{ range query %s | sortByLabel \"%s\" }}{{ if and (eq "
              ".Labels.%s $labels.%s) (eq .Labels.%s $labels.%s) }} {{ .Labels.%s }}{{ end }}"
              "{{ end }}" % (
                  go_string(f"count by ({c.labels(L.job_id, L.pp_group, L.tp_group)}) "
                            f"({pipelines.replace(chr(10), ' ')})"),
                  c.l(L.tp_group), c.l(L.job_id), c.l(L.job_id),
                  c.l(L.pp_group), c.l(L.pp_group), c.l(L.tp_group)))
    top = f"topk {c.by(*stage)} (1, {cost})"
    evaluations = number(round(seconds(recur) / every))  # of the recurrence window
    # a rank's excess once it can no longer turn into an unbroken page: a spell, the window
    # and an evaluation old, of the ranks not paged in the recurrence window
    settle = math.ceil((seconds(c.w("straggler_spell")) + seconds(window)) / every - 1e-9) * every + every
    moving = (f"({c.r(R.straggler_excess)} offset {duration(settle)} unless {c.on(*rank)} "
              f"last_over_time({c.r(R.straggler_page)}[{recur}]))")
    # the moving excess of each rank with its data-parallel replica: the few moving ranks
    # joined once with every rank's place; a rank without a place is a replica of its own
    moving_placed = (c.r(R.straggler_placed, extra=(f'{c.l(L.obsgen_part)}="moving"',)) if local
                     else f"{moving}\n* {c.join((L.job_id, L.rank), (L.dp_rank,))} {c.r(R.rank_place)}")
    replicas = (f"{moving_placed}\n"
                f"or {c.on(L.job_id, L.rank)}\n"
                f'label_replace({moving}, "{c.l(L.dp_rank)}", "unplaced $1", "{c.l(L.rank)}", "(.*)")')
    rules = (
        # Busy time: compute minus the wait inside it, where the rank reports its wait;
        # its compute where it does not. One sum of compute and the negated wait (tagged, so
        # that no wait series meets a compute series of the same labels in the `or`):
        # compute is read once, where `(compute - wait) or compute` read it twice.
        Record(c.rname(R.busy_mean), expr(f"""
            sum {c.by(*rank)} (
              {compute}
              or label_replace({c.rate(M.train_compute_wait_seconds, '_sum', window)} * -1,
                               "{c.l(L.obsgen_part)}", "wait", "", "")
            )
            /
            (sum {c.by(*rank)} ({c.rate(M.train_compute_seconds, '_count', window)}) > 0)
            {"" if local else f"and {live(c)}"}
        """)),
        # The rest of the stage: its slowest rank left out, so a slow rank is never part of
        # what it is compared with (a stage of one has no baseline and is not judged). Of
        # the newest means, the flag's baseline: a range read of a record also costs less
        # than an instant one, which looks back through the whole lookback.
        Record(c.rname(R.busy_baseline), expr(baseline_of(c, newest_mean(c)))),
        # A stage is judged once its baseline has been recorded through the warm-up window
        # (one evaluation may be missing): after a start or a restart gap, warm-up and
        # compilation are over, and a restart gap is never a rank that recovered.
        Record(c.rname(R.straggler_settled),
               persistence.settled(c.r(R.busy_baseline), c.w("straggler_warmup"), every)),
        # Straggling now: recorded for the straggling ranks of settled stages only, valued as
        # their ratio to the baseline. For any ruler, the baseline is computed here from
        # the same read of the means, not read back from its record: a ruler on remote
        # storage reads a record one evaluation late, and a job-wide change of the means
        # (or, after a restart on new hosts, the old hosts' baseline) would divide the
        # new means by an old median. Prometheus (ruler: prometheus) reads the record the
        # rule above wrote at this evaluation, the same median. The means are their newest
        # evaluation (newest_mean), which also bridges one evaluation whose window missed a
        # scrape. No read of the raw counts: a mean is recorded only for a rank scraped
        # within the window (live, or the rate window itself on Prometheus), so its newest
        # evaluation ends one and a half intervals after the rank's.
        Record(c.rname(R.straggler_flag),
               f"{over_baseline(c, newest_mean(c), c.r(R.busy_baseline) if local else baseline_of(c, newest_mean(c)))} "
               f"> {c.t('straggler_ratio')}\n"
               f"and {c.on(*stage)} {settled}"),
        # Straggling without a break for a spell and the rate window: a slowdown shorter
        # than a spell is flagged for less than that (the window remembers it one window).
        Record(c.rname(R.straggler_unbroken), persistence.unbroken(
            c, flag, settled, rank, stage, seconds(c.w("straggler_spell")) + seconds(window),
            every)),
        # What a flagged rank costs its job now, capped so that one spell (flagged for at
        # most a spell and the window) costs at most half the recurrence cost; in full
        # once it is unbroken, longer than any spell (a throttle that comes back for
        # minutes at a time recurs at its cost).
        Record(c.rname(R.straggler_excess), expr(f"""
            clamp_max({flag} - 1, {number(excess_cap(c))})
            unless {c.on(*rank)} {c.r(R.straggler_unbroken)}
            or {c.r(R.straggler_unbroken)} - 1
        """)),
        # Over every evaluation of the window, not only those of a stage that started since:
        # a rank's first flags after a start are never most of its window.
        Record(c.rname(R.straggler_cost),
               f"sum_over_time({c.r(R.straggler_excess)}[{recur}]) / {evaluations}"),
        # A page: straggling now, and unbroken, or recurring: the costliest rank of its
        # stage, at the recurrence cost, and the dominance factor times the next rank's (a
        # cost several ranks share is slowness that moves).
        Record(c.rname(R.straggler_page), expr(f"""
            {c.r(R.straggler_unbroken)}
            or {c.on(*rank)} (
              {flag}
              and {c.on(*rank)} (
                {top} >= {c.t('straggler_recurrence_cost')}
                unless {c.on(*stage)}
                (
                  {top}
                  < {c.on(*stage)}
                  {c.t('straggler_recurrence_dominance')} * max {c.by(*stage)} ({cost} unless {c.on(*rank)} {top})
                )
              )
            )
        """)),
        # Held for the ranks whose newest mean is recent (the mean reads the rank's live
        # scrapes) and through a stop of the whole job (its baseline, of the same newest
        # means, ends with the last of them: no evaluation between the two).
        Record(c.rname(R.straggler_held), persistence.held(
            c, c.r(R.straggler_page), c.w("straggler_hold"), f"{c.on(*rank)} {newest_mean(c)}",
            f"{c.on(L.job_id)} {c.r(R.busy_baseline)}")),
        # The mesh as facts (they change only when a job starts or resizes): each rank's
        # place, and how many ranks of a stage sit at each position of its groups. The
        # rules below join the few held ranks with them, not with the mesh info of every
        # rank at every evaluation.
        Record(c.rname(R.rank_place), expr(f"""
            label_replace(
              {place}
              and {c.on(L.job_id, L.rank)} {c.m(M.train_compute_wait_seconds, '_count')},
              "{c.l(L.reports_wait)}", "true", "", "")
            or {c.on(L.job_id, L.rank)}
            label_replace({place}, "{c.l(L.reports_wait)}", "false", "", "")
        """), fact=True),
        # The pipeline of each TP group: that of its first rank, which the first ranks of
        # the TP groups of the replica's other stages share.
        Record(c.rname(R.tp_pipeline), expr(f"""
            max {c.by(L.job_id, L.tp_group, L.pp_group)} ({c.m(M.train_rank_mesh_info, match={L.tp_rank: "0"})})
        """), fact=True),
        # Every rank's place is read once, into the few combinations of positions (a stage
        # of TP x CP x EP of them), and each kind of position is counted from those.
        Record(c.rname(R.mesh_combos), expr(f"""
            count {c.by(L.job_id, L.stage, *positions)} ({c.r(R.rank_place)})
        """), fact=True),
        # counted per position first, then labelled: a label_replace of every rank's place
        # cost more than the counts
        Record(c.rname(R.mesh_positions), (
            f"sum {c.by(L.job_id, L.stage, L.mesh_axis, L.mesh_position)} (\n  "
            + tag(c, lambda position: f"sum {c.by(L.job_id, L.stage, position)} "
                                      f"({c.r(R.mesh_combos)})").replace("\n", "\n  ")
            + "\n)"), fact=True),
        # Held ranks that report no wait inside compute, with their TP group: their compute
        # includes waiting for a TP peer, so a slow GPU holds its whole group, which is one
        # alert, not one per rank.
        Record(c.rname(R.straggler_lockstep), expr(f"""
            {held}
            * {c.join((L.job_id, L.rank), (L.tp_group,))}
            {c.r(R.rank_place, extra=(f'{c.l(L.reports_wait)}="false"',))}
        """)),
        # On Prometheus (ruler: prometheus), the held ranks and the moving ones below joined
        # with every rank's place once, not once each: a record the next rule reads at once.
        *((Record(c.rname(R.straggler_placed), expr(f"""
            (
              label_replace({held}, "{c.l(L.obsgen_part)}", "held", "", "")
              or label_replace({moving}, "{c.l(L.obsgen_part)}", "moving", "", "")
            )
            * {c.join((L.job_id, L.rank), (*positions, L.dp_rank, L.reports_wait))}
            {c.r(R.rank_place)}
        """)),) if local else ()),
        # Held ranks that report their wait, with their positions in their TP, CP and EP
        # groups: where slowness follows a position, the mesh mapping is at fault.
        Record(c.rname(R.straggler_positions), expr(f"""
            sum without ({", ".join(c.l(k) for k in (L.obsgen_part, L.dp_rank, L.reports_wait))}) (
              {c.r(R.straggler_placed, extra=(f'{c.l(L.obsgen_part)}="held"', f'{c.l(L.reports_wait)}="true"'))}
            )
        """ if local else f"""
            {held}
            * {c.join((L.job_id, L.rank), positions)}
            {c.r(R.rank_place, extra=(f'{c.l(L.reports_wait)}="true"',))}
        """)),
        Record(c.rname(R.straggler_pattern), expr(mesh_pattern(c, c.r(R.straggler_positions)))),
        # Slowness that moves: what the job's stragglers cost it, of the ranks not paged in
        # the window (a GPU paged and since fixed is not slowness that moves), read a spell
        # and a window late (the first minutes of a GPU that then pages are not): the largest
        # excess of each data-parallel replica, summed over the replicas. Summed, as a
        # window that holds two moves shares their cost between two ranks; one per replica,
        # as a slow GPU holds its TP group and pipeline where they report no wait, and noise
        # common to a replica's ranks (its sequence lengths) is one cost, not one per rank.
        # Ranks without a place in the mesh are each their own replica.
        Record(c.rname(R.straggler_moving_excess),
               f"sum {c.by(L.job_id)} (\n  max {c.by(L.job_id, L.dp_rank)} (\n    "
               + replicas.replace("\n", "\n    ") + "\n  )\n)"),
        Record(c.rname(R.straggler_moving),
               f"sum_over_time({c.r(R.straggler_moving_excess)}[{recur}]) / {evaluations}"),
        Record(c.rname(R.straggler_moving_ranks), expr(f"""
            count {c.by(L.job_id)} (
              {cost}
              unless {c.on(*rank)} last_over_time({c.r(R.straggler_page)}[{recur}])
            )
        """)),
        Alert(
            name="Train_Straggler_Persistent",
            inhibits=(Inhibit(EFFECTS), Inhibit(("Train_Straggler_LateArrival",), same=(L.rank.key,)),),
            expr=expr(f"""
                {held}
                unless {c.on(L.job_id, L.rank)} ({lockstep_groups})
                unless {c.on(L.job_id, L.rank)} {c.r(R.straggler_pattern)}
            """),
            for_="0s",
            severity="warning",
            role="platform",
            summary=f"Persistent straggler: rank {c.tl(L.rank)} of job {c.tl(L.job_id)}",
            description=(
                f"In job {c.tl(L.job_id)}, {where} has been at least {pct} slower in busy "
                "time (compute without its waits for peers) than the other ranks of its "
                "stage without a break for longer than a spell, or again and again: it last "
                'took {{ printf "%.1f" $value }}x their median. '
                "Every collective waits for it, so the whole job runs at its speed."),
        ),
        Alert(
            name="Train_Straggler_TPGroup",
            inhibits=(Inhibit(EFFECTS),),
            expr=(f"count {c.by(L.job_id, L.pp_group)} (\n  "
                  + pipelines.replace("\n", "\n  ") + "\n)"),
            for_="0s",
            severity="warning",
            role="platform",
            summary=(f"Straggling TP groups in pipeline {c.tl(L.pp_group)} of job "
                     f"{c.tl(L.job_id)}"),
            description=(
                f"In job {c.tl(L.job_id)}, {{{{ $value }}}} ranks of the tensor-parallel groups"
                f"{listed} (named by their lowest rank; one pipeline, named by its first rank "
                f"{c.tl(L.pp_group)}) have been at least {pct} slower in compute than the rest "
                "of their stages without a break. Their ranks report no wait inside compute, so "
                "the slow GPU cannot be told from the peers that wait for it: its TP peers in "
                "the per-layer collectives, and the other stages of its pipeline in recv. One "
                "GPU of these groups holds the job back. Turn on obsgen.instrument's "
                "patch_distributed (and CUDA events on GPUs) to have it named."),
        ),
        Alert(
            name="Train_Straggler_Mapping",
            inhibits=(Inhibit(EFFECTS),),
            expr=expr(f"""
                count {c.by(L.job_id, L.stage, L.mesh_axis, L.mesh_position)} ({c.r(R.straggler_pattern)})
            """),
            for_="0s",
            severity="warning",
            role="workload",
            summary=(f"Stragglers at {c.tl(L.mesh_axis)} position {c.tl(L.mesh_position)} "
                     f"of job {c.tl(L.job_id)}"),
            description=(
                f"In job {c.tl(L.job_id)}, stage {c.tl(L.stage)}, the ranks at position "
                f"{c.tl(L.mesh_position)} of their {c.tl(L.mesh_axis)} groups straggle "
                f"({{{{ $value }}}} of them, at least {pct} slower in busy time than the rest "
                "of the stage), and the other positions do not. Slowness that follows a place "
                "in the mesh, not a GPU, points at how the model is partitioned or the ranks "
                "are mapped to GPUs: uneven work at that position, or that position on the "
                "same slow GPU slot or link of every node."),
        ),
        Alert(
            name="Train_Straggler_Transient",
            expr=expr(f"""
                {c.r(R.straggler_moving)} >= {c.t('straggler_transient_cost')}
                and {c.on(L.job_id)}
                {c.r(R.straggler_moving_ranks)} >= {c.t('straggler_transient_ranks')}
            """),
            for_="5m",
            severity="warning",
            role="workload",
            summary=f"Transient stragglers in job {c.tl(L.job_id)}",
            description=(
                f"In job {c.tl(L.job_id)}, stragglers that moved between ranks (none of them "
                f"slow for long, none recurring) cost the job "
                f"{{{{ $value | humanizePercentage }}}} of its step time over the last {recur}. "
                "A straggler that moves between ranks points at the data pipeline or shared "
                "resources, not at one GPU."),
        ),
    )
    return Family(NAME, __doc__, rules)


def interval(c: Ctx) -> float:
    """Seconds between the family's evaluations: its group's interval, or Prometheus'
    default 1m where the config leaves it to the global interval."""
    return seconds(group_interval(c.cfg, NAME) or "1m")


def excess_cap(c: Ctx) -> float:
    """The most one evaluation adds to a rank's cost: a spell, flagged for at most a spell
    and the rate window, then costs at most half the recurrence cost."""
    t, w = c.cfg["thresholds"], c.cfg["windows"]
    span = seconds(w["straggler_spell"]) + seconds(w["straggler"])
    return round(t["straggler_recurrence_cost"] * seconds(w["straggler_recurrence"])
                 / (2 * span), 4)


def baseline_of(c: Ctx, mean: str | None = None) -> str:
    """The median busy time (``mean``, by default the record) of each stage with its
    slowest rank left out."""
    mean = mean or c.r(R.busy_mean)
    return (f"quantile {c.by(L.job_id, L.stage)} (0.5,\n  {mean}\n"
            f"  unless {c.on(L.job_id, L.rank, L.node)}\n"
            f"  topk {c.by(L.job_id, L.stage)} (1, {mean})\n)")


def live(c: Ctx) -> str:
    """The right side of an ``and`` that keeps the ranks exporting their compute time, on
    the host and in the stage they run in now: scraped within one and a half of the
    family's intervals. A rate window, and a recorded series read through a window,
    outlive the scrape whose staleness marker ended them; one missed scrape does not end
    a rank."""
    recent = duration(1.5 * interval(c))
    return (f"{c.on(L.job_id, L.rank, L.stage, L.node)} "
            f"present_over_time({c.m(M.train_compute_seconds, '_count')}[{recent}])")


def newest_mean(c: Ctx) -> str:
    """The busy-time record as its newest evaluation wrote it: the last sample within one
    and a half of the family's intervals. A store that loses a recorded series' staleness
    marker (vmalert writes it at the last value's timestamp, and VictoriaMetrics keeps the
    value) returns an ended series to an instant read for the whole lookback; a window of
    one interval and a half holds the newest evaluation, read late or not, lets an ended
    mean go after one more, and bridges one evaluation whose rate window missed a scrape."""
    return f"last_over_time({c.r(R.busy_mean)}[{duration(1.5 * interval(c))}])"


def over_baseline(c: Ctx, mean: str | None = None, baseline: str | None = None) -> str:
    """Each rank's busy time (``mean``, by default the record) over its stage's baseline:
    the straggler score the flag, the panels family and the overview compute."""
    return (f"{mean or c.r(R.busy_mean)}\n/ {c.join((L.job_id, L.stage))}\n"
            f"({baseline or c.r(R.busy_baseline)} > 0)")


def tag(c: Ctx, vector) -> str:
    """``vector(position)`` (a vector with that position label, e.g. tp_rank) once per kind
    of group, labelled with the kind (mesh_axis) and the position in it (mesh_position)."""
    return "\nor ".join(
        f'label_replace(label_replace({vector(position)}, "{c.l(L.mesh_axis)}", "{axis}", '
        f'"", ""), "{c.l(L.mesh_position)}", "$1", "{c.l(position)}", "(.*)")'
        for axis, position in AXES)


def mesh_pattern(c: Ctx, pos: str) -> str:
    """The ranks of ``pos`` (one series per rank, with its stage and its tp_rank, cp_rank
    and ep_rank) at a position of their TP, CP or EP groups where at least the pattern
    share of the stage's groups of that kind, and two or more, have their rank there in
    ``pos``; only where the stage has more than one position of that kind. Each is
    labelled with the axis and position (a rank may follow two). The stage's groups are
    counted from the mesh facts, not from the mesh info of every rank."""
    at = (L.job_id, L.stage, L.mesh_axis, L.mesh_position)
    tagged = tag(c, lambda _: pos).replace("\n", "\n    ")
    flagged = f"count {c.by(*at)} (\n    {tagged}\n  )"
    groups = c.r(R.mesh_positions)
    return "\n".join((
        f"(\n    {tagged}\n)",
        f"and {c.on(*at)} (",
        f"  {flagged} >= 2",
        f"  and {c.on(*at)}",
        f"  {flagged}",
        f"  >= {c.on(*at)} {c.t('straggler_pattern_share')} * {groups}",
        ")",
        f"and {c.on(L.job_id, L.stage, L.mesh_axis)}",
        f"(count {c.by(L.job_id, L.stage, L.mesh_axis)} ({groups}) > 1)"))
