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

**Baseline: the rest of the stage.** Each rank's mean busy time over ``windows.rate`` is
compared with the median of its pipeline stage (stages do different work: a heavier last
stage, or the stages holding the embedding or the loss, are not stragglers; ranks of one
stage do the same work) with the stage's slowest rank left out. A slow rank is never
part of the baseline it is compared with: in a stage of two ranks it is compared with
the other one (a median of two is their mean, which would halve the signal), and in a
stage of one there is nothing to compare with. A rank whose busy time is more than
``thresholds.straggler_ratio`` times that baseline is *straggling*.

Ranks are grouped by rank and the host they run on (the ``node`` label every series of
``obsgen.instrument`` carries), never by instance or pod: a rank restarted on its host is
one series across its old and new processes, and the alert names the host without a join.
Only ranks that export their compute time now are judged (a rate window outlives its
series, and a lost rank would be judged on its last minutes), and nothing is judged
before the stage has two rate windows behind it (in a series' first window rate()
extrapolates differently with each rank's scrape phase, and a rank whose first minutes
were slower, compiling or warming up, would still be flagged in the second window). A rank
is judged in the stage it is in now: an elastic resize renumbers the ranks into new
stages and groups, and the rate window of a rank's old place, which outlives its series,
is left out like that of its old host.

**Classes.** Slowness that follows a place in the mesh (the same TP, CP or EP position in
at least half of the stage's groups of that kind, and in two or more) is a *mapping*
pattern: one Train_Straggler_Mapping alert, routed to the workload team, and no
Persistent alert for its ranks. A whole stage slower than the others is never a
straggler here (each rank is compared within its stage); it is the pipeline's
imbalance (Train_Bubble_Excess on the stages that wait for it, the per-stage busy
panel). The mesh comes from facts recorded every ``facts_interval`` (each rank's
place in it and the number of ranks at each position of a stage's groups), so a job that
starts or resizes is classified on its new mesh within that interval. A rank that
straggles for ``for`` (1m: two evaluations in a row, the family runs every 1m) is a persistent straggler: the same GPU slow step after step is hardware or placement, routed to the platform team. Ranks
that straggled in the persistence window and have since *recovered* make stragglers
transient: slowness that moves between ranks follows the workload. A straggler that is
starting up is straggling now, so it never counts towards Transient, and neither do the
peers that wait for it. Once a rank of the job has recovered, Persistent is withheld for
the window: the slowness moves. A rate window remembers a slow spell for its whole
length, so a slowness that dwells a minute or two on one rank flags it for minutes and
cannot be told from a persistent straggler until it moves: Persistent fires for the
first rank it dwells on until that rank recovers, then Transient takes over.

**The threshold** (1.07 by default) sits between the spread of healthy GPUs and the
slowdowns worth a page. Healthy GPUs of one model differ persistently by a few percent
(within about 3% of nominal), and a 5m mean of a noisy step time moves by under a
percent more; a GPU 10% slower is what the targets ask to be named. A fleet whose
healthy GPUs spread wider raises it, at the cost of later detection.

**Every 1m** (``family_intervals.stragglers``): the per-rank busy time and the stage
baselines read every rank's series at each evaluation, the costliest rules of the suite
when evaluated every 30 s. A 5m mean moves little in 30 s, so evaluating it every 1m and
confirming for one evaluation (``for`` 1m) names a straggler as soon as evaluating it every
30 s and confirming for 1m30s did, at half the ruler time.

Detection latency with the defaults (30 s scrape, the family every 1m, a 5m rate window,
a threshold of 1.07): a rank 20% slower crosses the threshold once 35% of the rate window
is slow (under 2 minutes), is flagged at the next evaluation and fires 1m later; a rank
10% slower crosses after about 3.5 minutes.
The fixtures and ``make detect`` measure both (``python -m tests.promtool.latency``, benchmarks/DETECTION.md).

## Train_Straggler_Persistent

One rank's busy time has been above its stage's baseline (the other ranks of its stage)
by at least the straggler threshold for the alert's ``for``. Every step of the job runs at
that rank's speed, so the whole job is slowed by about the same share. Its TP peers and
the other stages of its pipeline wait for it and are not named: their busy time is their
own. A rank that is slow on every step is almost always hardware or placement: a
throttled or degraded GPU, a bad NVLink, CPU affinity, a noisy neighbour on the host.

Check first:
1. The GPU of that rank in DCGM: clocks and throttle reasons (thermal, power), XID and ECC errors, SM-active against its peers.
2. Whether the slowness follows the host: other jobs' ranks on the same node, the node's NIC and CPU load; a controlled swap of the rank to another node settles hardware against workload.
3. Drain the node and open an RMA when the hardware is at fault; restart the job from its last checkpoint without that node.

## Train_Straggler_TPGroup

Several ranks of one tensor-parallel group straggle together, and they report no wait
inside compute (``train_compute_wait_seconds``): a slow GPU makes its TP peers wait in
every per-layer all-reduce, so from compute time alone the whole group looks slow. The
group is one alert, named by its lowest rank, never one alert per rank. Where the ranks
report their wait, Train_Straggler_Persistent names the GPU itself instead.

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

Check first:
1. What that position does that the others do not: uneven layer or vocabulary partitioning (a TP rank holding a larger shard of the embedding or the output layer), an expert slot that receives more tokens (routing imbalance pinned to one EP position), a CP rank holding a longer sequence chunk.
2. The placement: whether that position lands on the same GPU slot, PCIe switch, NIC or NUMA node of every host (the rank-to-GPU order of the launcher, CUDA_VISIBLE_DEVICES, the NCCL topology); a slot behind a slower link makes that position slow everywhere.
3. The GPUs of the named ranks in DCGM (the overview's slowest-ranks table lists them with their TP position and group): when only two are named and they also differ in clocks or errors from their peers, they are two hardware stragglers.

## Train_Straggler_Transient

Ranks keep straggling, but a different rank each time: at least the configured number of
distinct ranks straggled within the persistence window and recovered. A straggler that
moves between ranks follows the workload, not the hardware.

Check first:
1. The data pipeline: dataloader workers, prefetch depth, storage read latency, uneven sequence lengths or packing between batches.
2. Routing balance in MoE models: tokens per expert and capacity-factor overflow on the ranks that straggled.
3. Shared resources: host CPU contention, checkpoint or logging work done on some ranks only, network jitter from other jobs.
"""

from __future__ import annotations

from ..config import duration, group_interval, seconds
from ..model import Alert, Family, Record, expr
from ..contract import L, M, R
from ..promql import Ctx

NAME = "stragglers"
AXES = (("tp", L.tp_rank), ("cp", L.cp_rank), ("ep", L.ep_rank))  # mesh_axis, its position label


def build(c: Ctx) -> Family:
    rank = (L.job_id, L.rank, L.stage, L.node)
    positions = (L.tp_rank, L.cp_rank, L.ep_rank)
    rate, persist = c.w("rate"), c.w("straggler_persistence")
    two = duration(2 * seconds(rate))
    pct = f"{(c.cfg['thresholds']['straggler_ratio'] - 1) * 100:g}%"
    where = (f"rank {c.tl(L.rank)} (stage {c.tl(L.stage)}"
             "{{ with $labels.%s }}, node {{ . }}{{ end }})" % c.l(L.node))
    compute = c.rate(M.train_compute_seconds, "_sum", rate)
    place = (f"max {c.by(L.job_id, L.rank, L.stage, L.tp_group, *positions)} "
             f"({c.m(M.train_rank_mesh_info)})")
    # ranks of TP groups with several straggling ranks that report no wait
    # the group's straggling ranks, from the query of the alert's description
    listed = ("{{ range query `%s` | sortByLabel \"%s\" }}{{ if and (eq .Labels.%s $labels.%s) "
              "(eq .Labels.%s $labels.%s) }} {{ .Labels.%s }}{{ end }}{{ end }}" % (
                  c.r(R.straggler_lockstep), c.l(L.rank), c.l(L.job_id), c.l(L.job_id),
                  c.l(L.tp_group), c.l(L.tp_group), c.l(L.rank)))
    lockstep_groups = (f"{c.r(R.straggler_lockstep)} and {c.on(L.job_id, L.tp_group)} "
                       f"(count {c.by(L.job_id, L.tp_group)} ({c.r(R.straggler_lockstep)}) > 1)")
    rules = (
        # Busy time: compute minus the wait inside it, where the rank reports its wait;
        # its compute where it does not. Only ranks that export their compute time now, on
        # the host and in the stage they run in now: a rate window outlives its series.
        # One sum of compute and the negated wait (tagged, so that no wait series meets a
        # compute series of the same labels in the `or`): compute is read once, where
        # `(compute - wait) or compute` read it twice.
        Record(c.rname(R.busy_mean), expr(f"""
            sum {c.by(*rank)} (
              {compute}
              or label_replace({c.rate(M.train_compute_wait_seconds, '_sum', rate)} * -1,
                               "{c.l(L.obsgen_part)}", "wait", "", "")
            )
            /
            (sum {c.by(*rank)} ({c.rate(M.train_compute_seconds, '_count', rate)}) > 0)
            and {scraped_now(c)}
        """)),
        # The rest of the stage: its slowest rank left out, so a slow rank is never part of
        # what it is compared with (a stage of one has no baseline and is not judged).
        Record(c.rname(R.busy_baseline), expr(baseline_of(c))),
        # Judged once the stage has two rate windows behind it: in a series' first window
        # rate() extrapolates its _sum and _count differently when the first steps were
        # slower (compilation, warm-up), each rank's scrape phase gives it another error,
        # and a rank whose first minutes were slower would still be flagged in the second.
        # Recorded for the straggling ranks only, valued as their ratio to the baseline
        # (the alerts read it, not a ratio of every rank; the dashboards compute that).
        # The baseline is computed here from the same read of the means, not read back
        # from its record: a ruler on remote storage reads a record one evaluation late,
        # and at a restart that divided the new processes' warm-up by the old median.
        # The means are their newest evaluation (newest_mean), and only the ranks scraped
        # now are flagged: the compute count is read once, for the few over the threshold.
        Record(c.rname(R.straggler_flag),
               f"{over_baseline(c, newest_mean(c), baseline_of(c, newest_mean(c)))} "
               f"> {c.t('straggler_ratio')}\n"
               f"and {scraped_now(c)}\n"
               f"and {c.on(L.job_id, L.stage)} {c.r(R.busy_baseline)} offset {two}"),
        # The mesh as facts (they change only when a job starts or resizes): each rank's
        # place, and how many ranks of a stage sit at each position of its groups. The
        # rules below join the few straggling ranks with them, not with the mesh info of
        # every rank at every evaluation.
        Record(c.rname(R.rank_place), expr(f"""
            label_replace(
              {place}
              and {c.on(L.job_id, L.rank)} {c.m(M.train_compute_wait_seconds, '_count')},
              "{c.l(L.reports_wait)}", "true", "", "")
            or {c.on(L.job_id, L.rank)}
            label_replace({place}, "{c.l(L.reports_wait)}", "false", "", "")
        """), fact=True),
        # Every rank's place is read once, into the few combinations of positions (a stage
        # of TP x CP x EP of them), and each kind of position is counted from those: three
        # counts of every rank's place were most of the facts' time at 16,384 ranks.
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
        # Straggling ranks that report no wait inside compute, with their TP group: their
        # compute includes waiting for a TP peer, so a slow GPU flags its whole group,
        # which is one alert, not one per rank.
        Record(c.rname(R.straggler_lockstep), expr(f"""
            {c.r(R.straggler_flag)}
            * {c.join((L.job_id, L.rank), (L.tp_group,))}
            {c.r(R.rank_place, extra=(f'{c.l(L.reports_wait)}="false"',))}
        """)),
        # Straggling ranks that report their wait, with their positions in their TP, CP
        # and EP groups: where slowness follows a position, the mesh mapping is at fault.
        Record(c.rname(R.straggler_positions), expr(f"""
            {c.r(R.straggler_flag)}
            * {c.join((L.job_id, L.rank), positions)}
            {c.r(R.rank_place, extra=(f'{c.l(L.reports_wait)}="true"',))}
        """)),
        Record(c.rname(R.straggler_pattern), expr(mesh_pattern(c, c.r(R.straggler_positions)))),
        # The window of the flags is read once per evaluation, here: the share of the
        # stage's evaluations in the window in which the rank straggled.
        Record(c.rname(R.straggler_share), expr(f"""
            count_over_time({c.r(R.straggler_flag)}[{persist}])
            / {c.join((L.job_id, L.stage))}
            count_over_time({c.r(R.busy_baseline)}[{persist}])
        """)),
        # Ranks that straggled in the window and recovered: straggling then, not now, in a
        # stage that still trains (a straggler starting up is straggling now; a job that
        # stopped did not recover). A rank lost from a stage that trains on counts as
        # recovered: the rank family speaks for it, and one rank is not Transient.
        Record(c.rname(R.straggler_ranks), expr(f"""
            count {c.by(L.job_id)} (
              max {c.by(L.job_id, L.rank)} (
                {c.r(R.straggler_share)}
                and {c.on(L.job_id, L.stage)} {c.r(R.busy_baseline)}
                unless {c.on(L.job_id, L.rank)} {c.r(R.straggler_flag)}
              )
            )
        """)),
        Alert(
            name="Train_Straggler_Persistent",
            expr=expr(f"""
                {c.r(R.straggler_flag)}
                unless {c.on(L.job_id)} {c.r(R.straggler_ranks)}
                unless {c.on(L.job_id, L.rank)} ({lockstep_groups})
                unless {c.on(L.job_id, L.rank)} {c.r(R.straggler_pattern)}
            """),
            for_="1m",
            severity="warning",
            role="platform",
            summary=f"Persistent straggler: rank {c.tl(L.rank)} of job {c.tl(L.job_id)}",
            description=(
                f"In job {c.tl(L.job_id)}, {where} has been at least {pct} slower in busy "
                "time (compute without its waits for peers) than the other ranks of its "
                'stage for minutes; it now takes {{ printf "%.1f" $value }}x their median. '
                "Every collective waits for it, so the whole job runs at its speed."),
        ),
        Alert(
            name="Train_Straggler_TPGroup",
            expr=expr(f"""
                count {c.by(L.job_id, L.stage, L.tp_group)} ({c.r(R.straggler_lockstep)}) > 1
                unless {c.on(L.job_id)} {c.r(R.straggler_ranks)}
            """),
            for_="1m",
            severity="warning",
            role="platform",
            summary=(f"Straggling TP group {c.tl(L.tp_group)} of job {c.tl(L.job_id)}"),
            description=(
                f"In job {c.tl(L.job_id)}, {{{{ $value }}}} ranks of the tensor-parallel group "
                f"{c.tl(L.tp_group)} (named by its lowest rank; stage {c.tl(L.stage)}; ranks"
                f"{listed}) have "
                f"been at least {pct} slower in compute than the rest of their stage for "
                "minutes. Its ranks report no wait inside compute, so the slow GPU cannot be "
                "told from the peers that wait for it in the per-layer collectives: one GPU "
                "of the group holds the job back. Turn on obsgen.instrument's "
                "patch_distributed (and CUDA events on GPUs) to have it named."),
        ),
        Alert(
            name="Train_Straggler_Mapping",
            expr=expr(f"""
                count {c.by(L.job_id, L.stage, L.mesh_axis, L.mesh_position)} ({c.r(R.straggler_pattern)})
                unless {c.on(L.job_id)} {c.r(R.straggler_ranks)}
            """),
            for_="1m",
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
                {c.r(R.straggler_ranks)} >= {c.t('straggler_transient_ranks')}
            """),
            for_="10m",
            severity="warning",
            role="workload",
            summary=f"Transient stragglers in job {c.tl(L.job_id)}",
            description=(
                f"In job {c.tl(L.job_id)}, {{{{ $value }}}} different ranks were at least {pct} "
                f"slower in busy time than the rest of their stage at some point in the last "
                f"{persist} and recovered. A straggler that moves between ranks points at the "
                "data pipeline or shared resources, not at one GPU."),
        ),
    )
    return Family(NAME, __doc__, rules)


def baseline_of(c: Ctx, mean: str | None = None) -> str:
    """The median busy time (``mean``, by default the record) of each stage with its
    slowest rank left out."""
    mean = mean or c.r(R.busy_mean)
    return (f"quantile {c.by(L.job_id, L.stage)} (0.5,\n  {mean}\n"
            f"  unless {c.on(L.job_id, L.rank, L.node)}\n"
            f"  topk {c.by(L.job_id, L.stage)} (1, {mean})\n)")


def scraped_now(c: Ctx) -> str:
    """The right side of an ``and`` that keeps the ranks exporting their compute time now,
    on the host and in the stage they run in now: a rate window, and a recorded series
    read through a window, outlive the scrape whose staleness marker ended it."""
    return (f"{c.on(L.job_id, L.rank, L.stage, L.node)} "
            f"{c.m(M.train_compute_seconds, '_count')}")


def newest_mean(c: Ctx) -> str:
    """The busy-time record as its newest evaluation wrote it: the last sample within one
    and a half of the family's intervals (Prometheus' default 1m where the config leaves
    it to the global interval). A store that loses a recorded series' staleness marker
    (vmalert writes it at the last value's timestamp, and VictoriaMetrics keeps the value)
    returns an ended series to an instant read for the whole lookback: after a restart on
    other hosts, the old processes' means beside the new ones. A window of one interval
    and a half holds the newest evaluation, read late or not, and lets an ended mean go
    after one more. Cheaper than joining every rank's mean with its compute count, which
    three reads of the means cost at every evaluation."""
    every = seconds(group_interval(c.cfg, NAME) or "1m")
    return f"last_over_time({c.r(R.busy_mean)}[{duration(1.5 * every)}])"


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
