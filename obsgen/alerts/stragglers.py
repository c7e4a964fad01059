"""Stragglers: one slow rank holds every other rank back at each collective.

In synchronous training every rank's *step* time is the same, because each step ends at
the gradient collective (a barrier). Comparing step times therefore finds nothing, and
comparing time *inside* the collective points at the wrong rank: the late rank waits
least. The slow rank is found from its local compute time before the collective
(``train_compute_seconds``): each rank's mean over the rate window is compared with the
median of the ranks of the same pipeline stage (stages do different work, ranks of one
stage do the same work). A rank whose mean is above ``thresholds.straggler_ratio`` times
that median is *straggling*. Ranks are grouped by rank and the host they run on (the
``node`` label every series of ``obsgen.instrument`` carries), never by instance or pod:
a rank restarted on its host is one series across its old and new processes, and the
alert names the host without a join over every rank at each evaluation. A rank moved to
another host starts anew there: the slowness it had belonged to the old host.

Detection latency: a rank that turns 20% slower straggles once more than half of the
rate window is slow (about 2.6 minutes with 5m) and is persistent once it straggled in
more than half of the 30-minute persistence window, so Train_Straggler_Persistent fires
18.5 minutes after the onset with the defaults (measured by the fixtures; 15 minutes is
the floor that "most of 30 minutes" allows, a shorter ``windows.rate`` trims the rest).
A rank must also have been measured at the start of the window, so a job younger than the
persistence window (whose warm-up would fill "most" of a half-empty window) cannot raise
it: a rank slow from the first minute fires about 27 minutes in.

Only ranks that export their compute time now are judged: a rate window outlives its
series, and a lost rank would otherwise be compared for five more minutes on its last
steps (a warm-up the others have left behind makes it look slow). Nothing is judged
before the stage has a full rate window behind it: in a series' first window rate()
extrapolates the histogram's sum and count differently when the first steps were slower,
by an error that depends on each rank's scrape phase.

## Train_Straggler_Persistent

The same rank has been slower than its stage's median compute time by at least the
straggler threshold in most of the persistence window. Every step of the job runs at
that rank's speed, so the whole job is slowed by about the same share. A rank that is
slow on every step is almost always hardware or placement: a throttled or degraded GPU,
a bad NVLink, CPU affinity, a noisy neighbour on the host.

Check first:
1. The GPU of that rank in DCGM: clocks and throttle reasons (thermal, power), XID and ECC errors, SM-active against its peers.
2. Whether the slowness follows the host: other jobs' ranks on the same node, the node's NIC and CPU load; a controlled swap of the rank to another node settles hardware against workload.
3. Drain the node and open an RMA when the hardware is at fault; restart the job from its last checkpoint without that node.

## Train_Straggler_Transient

Ranks keep straggling, but a different rank each time: at least the configured number of
distinct ranks straggled within the persistence window and none of them persistently.
A straggler that moves between ranks follows the workload, not the hardware.

Check first:
1. The data pipeline: dataloader workers, prefetch depth, storage read latency, uneven sequence lengths or packing between batches.
2. Routing balance in MoE models: tokens per expert and capacity-factor overflow on the ranks that straggled.
3. Shared resources: host CPU contention, checkpoint or logging work done on some ranks only, network jitter from other jobs.
"""
from __future__ import annotations

from ..model import Alert, Family, Record, expr
from ..config import duration, seconds
from ..contract import L, M, R
from ..promql import Ctx

NAME = "stragglers"


def build(c: Ctx) -> Family:
    rank = (L.job_id, L.rank, L.stage, L.node)
    rate, persist = c.w("rate"), c.w("straggler_persistence")
    pct = f"{(c.cfg['thresholds']['straggler_ratio'] - 1) * 100:g}%"
    fraction = c.t("straggler_persistent_fraction")
    where = (f"rank {c.tl(L.rank)} (stage {c.tl(L.stage)}"
             "{{ with $labels.%s }}, node {{ . }}{{ end }})" % c.l(L.node))
    # The stage was measured at the start of the persistence window: a job younger than the
    # window has a half-filled window, and its warm-up would count as "most of it". Read
    # from the per-stage median (a few series per job), not per rank: at 16,384 ranks the
    # per-rank version costs as much as the share itself.
    slice_ = min(seconds(rate), seconds(persist))
    back = seconds(persist) - slice_  # promtool refuses "offset 0s"
    measured_since = (f"{c.on(L.job_id, L.stage)} count_over_time({c.r(R.compute_median)}"
                      f"[{duration(slice_)}]{f' offset {duration(back)}' if back else ''}) > 0")
    rules = (
        # Only ranks that export their compute time now, on the host they run on now: a
        # rate window outlives its series by the window, and a lost or moved rank's last
        # minutes (a warm-up the others left behind) would make it look slow for minutes.
        Record(c.rname(R.compute_mean), expr(f"""
            (
              sum {c.by(*rank)} ({c.rate(M.train_compute_seconds, '_sum', rate)})
              /
              (sum {c.by(*rank)} ({c.rate(M.train_compute_seconds, '_count', rate)}) > 0)
            )
            and {c.on(L.job_id, L.rank, L.node)} {c.m(M.train_compute_seconds, '_count')}
        """)),
        Record(c.rname(R.compute_median), expr(f"""
            quantile {c.by(L.job_id, L.stage)} (0.5, {c.r(R.compute_mean)})
        """)),
        Record(c.rname(R.compute_ratio), expr(f"""
            {c.r(R.compute_mean)}
            / {c.join((L.job_id, L.stage))}
            ({c.r(R.compute_median)} > 0)
        """)),
        # Judged once the stage has a full rate window behind it: in a series' first window
        # rate() extrapolates its _sum and _count differently when the first steps were
        # slower (compilation, warm-up), and each rank's scrape phase gives it another error.
        # Recorded for the straggling ranks only (1), not as a 0 for every other rank: what
        # reads the flag then reads the few ranks that straggled, not every rank of the job.
        Record(c.rname(R.straggler_flag), expr(f"""
            {c.r(R.compute_ratio)} > bool {c.t('straggler_ratio')} == 1
            and {c.on(L.job_id, L.stage)} {c.r(R.compute_median)} offset {rate}
        """)),
        # The window of the flags is read once per evaluation, here; the alerts and the
        # transient count read this share (a rank straggled at some point in the window
        # when it has one). The share is of the evaluations of the rank's stage in the
        # window, not of the rank's own: a rank that came up on another host minutes ago
        # has straggled there for those minutes, not for most of the window.
        Record(c.rname(R.straggler_share), expr(f"""
            count_over_time({c.r(R.straggler_flag)}[{persist}])
            / {c.join((L.job_id, L.stage))}
            count_over_time({c.r(R.compute_median)}[{persist}])
        """)),
        # Ranks that straggled at some point in the window but not in most of it, the share
        # read once (a rank moved between hosts counts once).
        Record(c.rname(R.straggler_ranks), expr(f"""
            count {c.by(L.job_id)} (
              max {c.by(L.job_id, L.rank)} ({c.r(R.straggler_share)}) <= {fraction}
            )
        """)),
        Alert(
            name="Train_Straggler_Persistent",
            expr=expr(f"""
                {c.r(R.compute_ratio)}
                and
                {c.r(R.straggler_share)} > {fraction}
                and {measured_since}
            """),
            for_="0s",
            severity="warning",
            role="platform",
            summary=f"Persistent straggler: rank {c.tl(L.rank)} of job {c.tl(L.job_id)}",
            description=(
                f"In job {c.tl(L.job_id)}, {where} has been at least {pct} slower in compute "
                f"than the median of its stage for most of the last {persist}; its compute "
                'now takes {{ printf "%.1f" $value }}x the median. Every collective waits for '
                "it, so the whole job runs at its speed."),
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
                f"slower in compute than their stage's median at some point in the last "
                f"{persist}, none of them persistently. A straggler that moves between ranks "
                "points at the data pipeline or shared resources, not at one GPU."),
        ),
    )
    return Family(NAME, __doc__, rules)
