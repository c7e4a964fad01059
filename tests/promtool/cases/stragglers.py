"""Straggler cases: 8 ranks, per-step compute noise of 3%, 1% persistent differences
between ranks, a 3-minute warm-up at 1.4x, checkpoints every 10 minutes."""
from statistics import median

from obsgen.synth import Job, RankLoss, Restart, RotatingSlow, SlowRank

from ..support import At, Case, Fired, Never, Value

P, T = "Train_Straggler_Persistent", "Train_Straggler_Transient"
JOB = "llm-pretrain-a"
MIN = 60


def ratio(job: Job, rank: int, minute: float) -> float:
    """Ground truth: the rank's compute time over its stage's median (noise-free)."""
    means = job.compute_means(minute * MIN)
    stage = [m for r, m in enumerate(means) if r * job.pp // job.ranks == rank * job.pp // job.ranks]
    return means[rank] / median(stage)


def straggler(job: Job, rank: int, minute: float) -> Fired:
    node = f"gpu-node-{rank // job.ranks_per_node:03d}"
    return Fired({"job_id": job.job_id, "rank": str(rank), "stage": "0", "node": node},
                 ratio(job, rank, minute))


SLOW3 = f'{{job_id="{JOB}", rank="3", stage="0", node="gpu-node-000"}}'
persistent = Job(job_id=JOB, faults=(SlowRank(rank=3, factor=1.2, start=30 * MIN),))
from_start = Job(job_id=JOB, faults=(SlowRank(rank=3, factor=1.2, start=0),))
lost = Job(job_id=JOB, faults=(SlowRank(rank=3, factor=1.2, start=0),
                               RankLoss(ranks=(3,), at=45 * MIN, hang=False)))
# rank 7 is lost as its warm-up ends, its last 5 minutes all warm-up; rank 3 is slow later
lost_warm = Job(job_id=JOB, faults=(RankLoss(ranks=(7,), at=3.5 * MIN, hang=False),
                                    SlowRank(rank=3, factor=1.2, start=15 * MIN)))
slow_start = Job(job_id=JOB, faults=(SlowRank(rank=3, factor=1.2, start=0, end=3 * MIN),
                                     SlowRank(rank=5, factor=1.2, start=0, end=3 * MIN)))
# every rank comes back on another host at minute 43; rank 3 is 20% slower from then on
moved = Job(job_id=JOB, faults=(Restart(at=40 * MIN, gap=3 * MIN),
                                SlowRank(rank=3, factor=1.2, start=43 * MIN)))


def moved_straggler(minute: float) -> Fired:
    hosts = -(-moved.ranks // moved.ranks_per_node)  # the restart's hosts follow the first's
    node = f"gpu-node-{3 // moved.ranks_per_node + hosts:03d}"
    return Fired({"job_id": JOB, "rank": "3", "stage": "0", "node": node},
                 ratio(moved, 3, minute))


CASES = {
    "a healthy job with warm-up fires no straggler": Case(
        [Job(job_id=JOB)], 90, [Never(P), Never(T)]),
    "a synchronous job whose ranks differ by up to 4% in compute fires no straggler": Case(
        [Job(job_id=JOB, rank_spread=0.02, noise=0.05, seed=7)], 75, [Never(P), Never(T)]),
    "one rank 20% slower in compute from minute 30 fires Persistent for that rank only, "
    "within 20 minutes, and never Transient": Case(
        [persistent], 80,
        [Never(P, end=45), At(50, P, (straggler(persistent, 3, 50),)),
         At(80, P, (straggler(persistent, 3, 80),)), Never(T),
         # the flag and the share exist for the straggling rank only, not as a 0 per rank
         Value(80, "job_rank:train_straggler:flag5m", {f"job_rank:train_straggler:flag5m{SLOW3}": 1}),
         Value(80, "job_rank:train_straggler:share30m", {f"job_rank:train_straggler:share30m{SLOW3}": 1})]),
    "a slow rank rotating every 5 minutes fires Transient, never Persistent": Case(
        [Job(job_id=JOB, faults=(RotatingSlow(factor=1.2, period=5 * MIN, start=10 * MIN),))], 75,
        [Never(P), Never(T, end=20), At(40, T, (Fired({"job_id": JOB}, 6),)),
         At(70, T, (Fired({"job_id": JOB}, 7),))]),
    "a pipeline stage that computes 30% more than the others is not a straggler": Case(
        [Job(job_id=JOB, pp=4, microbatches=16, stage_compute=(1.0, 1.0, 1.0, 1.3))], 60,
        [Never(P), Never(T)]),
    "a rank 20% slower from the job's first minute fires Persistent only once the job is "
    "older than the 30-minute window, not on a half-filled window": Case(
        [from_start], 45,
        [Never(P, end=26), At(27.5, P, (straggler(from_start, 3, 27.5),)),
         At(32.5, P, (straggler(from_start, 3, 32.5),)), Never(T)]),
    "a persistent straggler whose rank is lost stops firing at once": Case(
        [lost], 60,
        [At(42.5, P, (straggler(lost, 3, 42.5),)), Never(P, start=45.5, every=0.5), Never(T)]),
    "a rank lost as its warm-up ends is not judged on its last rate window, so a persistent "
    "straggler elsewhere fires Persistent and never Transient": Case(
        [lost_warm], 45,
        [Never(P, end=30), At(40, P, (straggler(lost_warm, 3, 40),)), Never(T)]),
    "two ranks slower only in the job's first 3 minutes are not judged before the stage has "
    "a full rate window, and fire nothing": Case(
        [slow_start], 45, [Never(P), Never(T)]),
    "a rank slow from the restart that moved it to another host fires Persistent only once it "
    "straggled there for most of the window, not on its few minutes since": Case(
        [moved], 80,
        [Never(P, end=58), At(70, P, (moved_straggler(70),)),
         At(80, P, (moved_straggler(80),)), Never(T)]),
    "a restart with a 3-minute gap, counter resets and new instances fires no straggler": Case(
        [Job(job_id=JOB, faults=(Restart(at=40 * MIN, gap=3 * MIN),))], 80,
        [Never(P), Never(T)]),
}
