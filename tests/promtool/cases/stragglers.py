"""Straggler cases: 8 ranks by default, per-step compute noise of 3%, 1% persistent
differences between ranks, a 3-minute warm-up at 1.4x, checkpoints every 10 minutes; and
real meshes (TP groups in lockstep, pipelines that run at their slowest stage, two DP
replicas, two-rank stages) whose ranks report their wait inside compute."""
from statistics import median

from obsgen.synth import (HostWork, Job, Pauses, RankLoss, Restart, RotatingSlow, SlowRank,
                          elastic)

from ..support import At, Case, Fired, Never, Value

P, T = "Train_Straggler_Persistent", "Train_Straggler_Transient"
G = "Train_Straggler_TPGroup"
MAP = "Train_Straggler_Mapping"
JOB = "llm-pretrain-a"
MIN = 60


def ratio(job: Job, rank: int, minute: float) -> float:
    """Ground truth: the rank's busy time over the median of the rest of its stage, its
    slowest rank left out (noise-free)."""
    busy = job.compute_means(minute * MIN)
    stage = [b for r, b in enumerate(busy) if r * job.pp // job.ranks == rank * job.pp // job.ranks]
    stage.remove(max(stage))
    return busy[rank] / median(stage)


def straggler(job: Job, rank: int, minute: float, node_offset: int = 0) -> Fired:
    node = f"gpu-node-{rank // job.ranks_per_node + node_offset:03d}"
    stage = str(rank * job.pp // job.ranks)
    return Fired({"job_id": job.job_id, "rank": str(rank), "stage": stage, "node": node},
                 ratio(job, rank, minute))


def mesh(**kw) -> Job:
    return Job(**{"job_id": JOB, "reports_mesh": True, **kw})


def pattern(stage: int, axis: str, position: int, ranks: int) -> Fired:
    return Fired({"job_id": JOB, "stage": str(stage), "mesh_axis": axis,
                  "mesh_position": str(position)}, ranks)


# TP4 x PP2 x DP2: stage 0 holds the TP groups 0-3 and 4-7; TP position 1 is ranks 1 and 5
tp_position = mesh(ranks=16, ranks_per_node=8, tp=4, pp=2, microbatches=8,
                   faults=tuple(SlowRank(rank=r, factor=1.2, start=20 * MIN) for r in (1, 5)))
two_gpus = mesh(ranks=16, ranks_per_node=8, tp=4, pp=2, microbatches=8,
                faults=tuple(SlowRank(rank=r, factor=1.2, start=20 * MIN) for r in (1, 6)))

# The same GPU (host 0's sixth) slow before and after an elastic resize of TP2 x PP2 x DP4
# to DP2 at minute 30: rank 5 of stage 0, then rank 5 of stage 1.
resize_before = mesh(ranks=16, ranks_per_node=8, tp=2, pp=2, microbatches=8, stop=30 * MIN,
                     faults=(SlowRank(rank=5, factor=1.2, start=10 * MIN),))
resize_after = mesh(ranks=8, ranks_per_node=8, tp=2, pp=2, microbatches=8, start=32 * MIN,
                    subnet=1, seed=2, faults=(SlowRank(rank=5, factor=1.2, start=32 * MIN),))

SLOW3 = f'{{job_id="{JOB}", rank="3", stage="0", node="gpu-node-000"}}'
persistent = Job(job_id=JOB, faults=(SlowRank(rank=3, factor=1.2, start=30 * MIN),))
ten = Job(job_id=JOB, faults=(SlowRank(rank=5, factor=1.1, start=30 * MIN),))
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
# the user's job: TP=8 / PP=2 / DP=2, so each stage holds two TP groups of 8
tp8 = mesh(ranks=32, ranks_per_node=8, tp=8, pp=2, microbatches=8,
           faults=(SlowRank(rank=9, factor=1.2, start=20 * MIN),))
tp8_nowait = mesh(ranks=32, ranks_per_node=8, tp=8, pp=2, microbatches=8, reports_wait=False,
                  faults=(SlowRank(rank=9, factor=1.2, start=20 * MIN),))
tp2 = mesh(ranks=4, tp=2, pp=2, microbatches=8, faults=(SlowRank(rank=1, factor=1.2, start=20 * MIN),))
pp2 = mesh(ranks=4, pp=2, microbatches=8, faults=(SlowRank(rank=3, factor=1.25, start=20 * MIN),))
tp4_ten = mesh(ranks=16, ranks_per_node=8, tp=4, pp=2, microbatches=8,
               faults=(SlowRank(rank=6, factor=1.1, start=20 * MIN),))

CASES = {
    "a healthy job with warm-up fires no straggler": Case(
        [Job(job_id=JOB)], 90, [Never(P), Never(T), Never(G), Never(MAP)]),
    "an elastic resize of TP2 x PP2 x DP4 to DP2 (16 ranks to 8, which move to other "
    "stages and groups) fires no straggler": Case(
        elastic(mesh(ranks=16, ranks_per_node=8, tp=2, pp=2, microbatches=8), at=30 * MIN,
                gap=2 * MIN, ranks=8), 70,
        [Never(P), Never(T), Never(G), Never(MAP)]),
    "the slow GPU of a job resized from 16 to 8 ranks is named before and after, with its "
    "new stage, and no other rank": Case(
        [resize_before, resize_after], 60,
        [At(29, P, (straggler(resize_before, 5, 29),)),
         At(60, P, (straggler(resize_after, 5, 60),)), Never(T), Never(G), Never(MAP)]),
    "TP position 1 slower in both TP groups of a stage is one Mapping alert for that "
    "position, to the workload team, and no Persistent for its GPUs": Case(
        [tp_position], 45,
        [Never(MAP, end=21), At(25, MAP, (pattern(0, "tp", 1, 2),)),
         At(45, MAP, (pattern(0, "tp", 1, 2),)), Never(P), Never(T), Never(G)]),
    "two slow GPUs at different TP positions of one stage are two Persistent alerts, "
    "no Mapping": Case(
        [two_gpus], 45,
        [At(25, P, (straggler(two_gpus, 1, 25), straggler(two_gpus, 6, 25))),
         At(45, P, (straggler(two_gpus, 1, 45), straggler(two_gpus, 6, 45))), Never(MAP),
         Never(T)]),
    "a synchronous job whose GPUs run up to 4% off nominal speed, with 5% jitter, fires no "
    "straggler": Case(
        [Job(job_id=JOB, rank_spread=0.02, noise=0.05, seed=7)], 75, [Never(P), Never(T)]),
    "one GPU 4% slower than the others for an hour, below the 7% ratio, fires no straggler": Case(
        [Job(job_id=JOB, rank_spread=0.005, seed=11,
             faults=(SlowRank(rank=2, factor=1.04, start=10 * MIN),))], 75,
        [Never(P), Never(T), Never(G)]),
    "one rank 20% slower in compute from minute 30 fires Persistent for that rank only, "
    "within 5 minutes, and never Transient": Case(
        [persistent], 80,
        [Never(P, end=31.5), At(35, P, (straggler(persistent, 3, 35),)),
         At(80, P, (straggler(persistent, 3, 80),)), Never(T),
         # the flag and the share exist for the straggling rank only, not as a 0 per rank;
         # the flag is valued as the rank's busy time over its stage's baseline
         Value(80, "job_rank:train_straggler:flag5m == bool on (job_id, rank, stage, node) "
                   "(job_rank:train_busy_seconds:mean5m / on (job_id, stage) group_left () "
                   "job_stage:train_busy_seconds:baseline5m)", {SLOW3: 1}),
         Value(80, "job_rank:train_straggler:share30m", {f"job_rank:train_straggler:share30m{SLOW3}": 1})]),
    "one rank 10% slower from minute 30 fires Persistent for that rank within 10 minutes": Case(
        [ten], 60, [Never(P, end=32), At(40, P, (straggler(ten, 5, 40),)), Never(T)]),
    "a rank 25% slower rotating every 2 minutes is Persistent only until the first rank it slowed "
    "recovers, then Transient, counting the ranks that straggled and recovered": Case(
        [Job(job_id=JOB, faults=(RotatingSlow(factor=1.25, period=2 * MIN, start=10 * MIN,
                                              end=30 * MIN),))], 45,
        [Never(P, end=12), Never(P, start=17), Never(T, end=20),
         # the rotation stopped at minute 30: all 8 ranks straggled in the window and recovered
         At(40, T, (Fired({"job_id": JOB}, 8),))]),
    "a pipeline stage that computes 30% more than the others is not a straggler": Case(
        [Job(job_id=JOB, pp=4, microbatches=16, stage_compute=(1.0, 1.0, 1.0, 1.3))], 60,
        [Never(P), Never(T)]),
    "a rank 20% slower from the job's first minute fires Persistent once its stage has two "
    "rate windows behind it": Case(
        [from_start], 30,
        [Never(P, end=11), At(14, P, (straggler(from_start, 3, 14),)),
         At(30, P, (straggler(from_start, 3, 30),)), Never(T)]),
    "a persistent straggler whose rank is lost stops firing at once": Case(
        [lost], 60,
        [At(42.5, P, (straggler(lost, 3, 42.5),)), Never(P, start=45.5, every=0.5), Never(T)]),
    "a rank lost as its warm-up ends is not judged on its last rate window, so a persistent "
    "straggler elsewhere fires Persistent and never Transient": Case(
        [lost_warm], 45,
        [Never(P, end=16), At(20, P, (straggler(lost_warm, 3, 20),)), Never(T)]),
    "two ranks slower only in the job's first 3 minutes are not judged before the stage has "
    "two rate windows behind it, and fire nothing": Case(
        [slow_start], 45, [Never(P), Never(T)]),
    "a rank slow from the restart that moved it to another host fires Persistent there, "
    "named with its new host": Case(
        [moved], 70,
        [Never(P, end=44), At(55, P, (straggler(moved, 3, 55, node_offset=2),)),
         At(70, P, (straggler(moved, 3, 70, node_offset=2),)), Never(T)]),
    "a restart with a 3-minute gap, counter resets and new instances fires no straggler": Case(
        [Job(job_id=JOB, faults=(Restart(at=40 * MIN, gap=3 * MIN),))], 80,
        [Never(P), Never(T)]),
    # real meshes: the slow GPU is named alone, its waiting peers are not
    "TP=8 / PP=2 / DP=2: one GPU 20% slower fires Persistent for it alone within 5 minutes, "
    "not for the 7 TP peers or the pipeline stage that wait for it": Case(
        [tp8], 45,
        [Never(P, end=21.5), At(25, P, (straggler(tp8, 9, 25),)),
         At(45, P, (straggler(tp8, 9, 45),)), Never(T)]),
    "TP=8 / PP=2 / DP=2 without the wait inside compute: the slow GPU's TP group fires one "
    "TPGroup alert, and so does the next stage's TP group of its pipeline, which waits for "
    "it in recv; no rank fires Persistent": Case(
        [tp8_nowait], 45,
        [Never(P), Never(T), Never(G, end=21.5),
         At(25, G, (Fired({"job_id": JOB, "stage": "0", "tp_group": "8"}, 8, tuple(range(8, 16))),
                    Fired({"job_id": JOB, "stage": "1", "tp_group": "24"}, 8, tuple(range(24, 32))))),
         At(45, G, (Fired({"job_id": JOB, "stage": "0", "tp_group": "8"}, 8, tuple(range(8, 16))),
                    Fired({"job_id": JOB, "stage": "1", "tp_group": "24"}, 8, tuple(range(24, 32)))))]),
    "TP=2 / PP=2 / DP=1: the slow GPU is one of its stage's two ranks, and its TP peer waits "
    "for it; it is named alone": Case(
        [tp2], 45, [Never(P, end=21.5), At(25, P, (straggler(tp2, 1, 25),)), Never(T)]),
    "PP=2 / DP=2: one slow rank of a two-rank stage, whose pipeline peer waits for it in recv, "
    "is named alone": Case(
        [pp2], 45, [Never(P, end=21.5), At(25, P, (straggler(pp2, 3, 25),)), Never(T)]),
    "TP=4 / PP=2 / DP=2: one GPU 10% slower, in a TP group that is half its stage, is named "
    "within 10 minutes": Case(
        [tp4_ten], 45, [Never(P, end=22), At(30, P, (straggler(tp4_ten, 6, 30),)), Never(T)]),
    # healthy meshes and workloads that must page nobody
    "a healthy TP=8 / PP=2 / DP=2 job with a heavier last stage fires no straggler": Case(
        [mesh(ranks=32, ranks_per_node=8, tp=8, pp=2, stage_compute=(1.0, 1.25))], 60,
        [Never(P), Never(T)]),
    "rank 0 logging, evaluating and checkpointing outside its compute fires no straggler": Case(
        [Job(job_id=JOB, faults=(HostWork(rank=0, seconds=0.4, start=10 * MIN),))], 60,
        [Never(P), Never(T)]),
    "one rank's dataloader stalling for 2 minutes fires no straggler": Case(
        [Job(job_id=JOB, faults=(HostWork(rank=4, seconds=30.0, start=20 * MIN, end=22 * MIN),))],
        60, [Never(P), Never(T)]),
    "GC pauses of 300 ms on random ranks and 5% jitter fire no straggler": Case(
        [Job(job_id=JOB, noise=0.05, faults=(Pauses(seconds=0.3, per_minute=2.0),))], 60,
        [Never(P), Never(T)]),
}
