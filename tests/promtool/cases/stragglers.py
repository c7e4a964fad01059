"""Straggler cases: 8 ranks by default, per-step compute noise of 3%, 1% persistent
differences between ranks, a 3-minute warm-up at 1.4x, checkpoints every 10 minutes; and
real meshes (TP groups in lockstep, pipelines that run at their slowest stage, two DP
replicas, two-rank stages) whose ranks report their wait inside compute. Then what real
clusters do beside a slow GPU: spells of one to three minutes up to 3x, contention that
moves between ranks, restarts and warm-up, throttles that recur, missed scrapes."""
from statistics import median

from obsgen.synth import (HostWork, Job, MovingSlow, Pauses, RankLoss, Recurring, Restart,
                          RotatingSlow, ScrapeMisses, SeqImbalance, SlowRank, WarmRank, elastic)

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
pp2 = mesh(ranks=4, pp=2, microbatches=8, faults=(SlowRank(rank=3, factor=1.3, start=20 * MIN),))
tp4_ten = mesh(ranks=16, ranks_per_node=8, tp=4, pp=2, microbatches=8,
               faults=(SlowRank(rank=6, factor=1.1, start=20 * MIN),))

def always(alert: str, start: float, end: float, fired: tuple, every: float = 1.0) -> list:
    """``alert`` fires exactly ``fired`` at every minute from ``start`` to ``end``: one
    episode, never closed and opened again."""
    n = int(round((end - start) / every))
    return [At(start + i * every, alert, fired) for i in range(n + 1)]


def place(rank: int, node: int = 0, stage: int = 0) -> Fired:
    """An alert on ``rank`` checked by its labels only (its printed ratio moves)."""
    return Fired({"job_id": JOB, "rank": str(rank), "stage": str(stage),
                  "node": f"gpu-node-{node:03d}"}, None)


QUIET = (Never(P), Never(T), Never(G), Never(MAP))
lemon = Job(job_id=JOB, faults=(Recurring(rank=3, factor=2.0, on=4 * MIN, every=10 * MIN,
                                          start=20 * MIN, end=140 * MIN),))
short_lemon = Job(job_id=JOB, faults=(Recurring(rank=3, factor=3.0, on=2.5 * MIN, every=8 * MIN,
                                                start=20 * MIN, end=100 * MIN),))
same_hosts = Job(job_id=JOB, faults=(SlowRank(rank=3, factor=1.3, start=20 * MIN),
                                     Restart(at=40 * MIN, gap=3 * MIN, moves=False)))

CASES = {
    # what real clusters do beside a slow GPU: spells, moving slowness, restarts, recurrence
    "one rank 2x slower for 2 minutes, once (a throttle blip), fires nothing": Case(
        [Job(job_id=JOB, faults=(SlowRank(rank=3, factor=2.0, start=20 * MIN, end=22 * MIN),))],
        50, list(QUIET)),
    "one rank 3x slower for 2.9 minutes, once, fires nothing: no spell shorter than 3 minutes "
    "pages on its own": Case(
        [Job(job_id=JOB, faults=(SlowRank(rank=5, factor=3.0, start=20 * MIN + 13,
                                          end=22.9 * MIN + 13),))], 50, list(QUIET)),
    "one rank 2x slower for 6 minutes fires Persistent within 5 minutes, once, and resolves "
    "within 15 minutes of its end": Case(
        [Job(job_id=JOB, faults=(SlowRank(rank=3, factor=2.0, start=20 * MIN, end=26 * MIN),))],
        60, [Never(P, end=23), *always(P, 25, 37, (place(3),)), Never(P, start=41),
             Never(T), Never(G), Never(MAP)]),
    "contention moving to a random rank every 30 s, 19% slower (a fifth of the job's speed), "
    "fires Transient within 40 minutes, once, and never Persistent": Case(
        [Job(job_id=JOB, faults=(MovingSlow(factor=1.19, period=30, start=10 * MIN, seed=3),))],
        75, [Never(P), Never(G), Never(MAP), Never(T, end=30),
             *always(T, 50, 75, (Fired({"job_id": JOB}, None),), every=2.5)]),
    "contention moving to a random rank every 30 s, 8% slower, costs the job too little to "
    "page": Case(
        [Job(job_id=JOB, faults=(MovingSlow(factor=1.08, period=30, start=10 * MIN, seed=4),))],
        60, list(QUIET)),
    "a GPU 2x slower 4 minutes in every 10 for two hours fires Persistent by its third spell "
    "(a spell of 4 minutes is a spell and the window: unbroken on some windows, recurring on "
    "all), once, open while it recurs, and resolves within 15 minutes of the last spell": Case(
        [lemon], 160,
        [Never(P, end=23), *always(P, 45, 140, (place(3),), every=2.5), Never(P, start=151),
         Never(T), Never(G), Never(MAP)]),
    "a GPU 3x slower for 2.5 minutes in every 8, each spell shorter than 3 minutes, pages as "
    "recurring once its cost is a steady 10% GPU's, once": Case(
        [short_lemon], 110,
        [Never(P, end=27), *always(P, 47.5, 100, (place(3),), every=2.5), Never(P, start=112),
         Never(T), Never(G), Never(MAP)]),
    "a GPU 1.2x slower for 1.5 minutes in every 15 costs its job too little to page": Case(
        [Job(job_id=JOB, faults=(Recurring(rank=3, factor=1.2, on=1.5 * MIN, every=15 * MIN,
                                           start=20 * MIN),))], 100, list(QUIET)),
    "a restart on the same hosts with a rank that warms up 5 minutes at 1.5x fires nothing": Case(
        [Job(job_id=JOB, faults=(Restart(at=30 * MIN, gap=3 * MIN, moves=False),
                                 WarmRank(rank=6, factor=1.5, seconds=5 * MIN)))], 60,
        list(QUIET)),
    "one rank warming up 5 minutes at 1.5x after the job starts fires nothing": Case(
        [Job(job_id=JOB, faults=(WarmRank(rank=2, factor=1.5, seconds=5 * MIN),))], 30,
        list(QUIET)),
    "a GPU 30% slower before and after a restart on the same hosts is one Persistent alert "
    "through the restart": Case(
        [same_hosts], 70,
        [*always(P, 25, 70, (place(3),), every=2.5), Never(T), Never(G), Never(MAP)]),
    "one rank 20% slower with 2% of scrapes missed fires Persistent within 5 minutes, once": Case(
        [Job(job_id=JOB, seed=5, faults=(ScrapeMisses(share=0.02),
                                         SlowRank(rank=3, factor=1.2, start=20 * MIN)))], 50,
        [Never(P, end=23), *always(P, 25, 50, (place(3),), every=2.5), Never(T)]),
    "a healthy job with 5% of scrapes missed fires nothing": Case(
        [Job(job_id=JOB, seed=6, faults=(ScrapeMisses(share=0.05),))], 60, list(QUIET)),
    "sequence-length imbalance up to 1.34x a step, moving between data-parallel replicas, "
    "fires nothing": Case(
        [mesh(ranks=16, ranks_per_node=8, tp=2, pp=2, microbatches=8,
              faults=(SeqImbalance(worst=1.34),))], 60, list(QUIET)),

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
        [Never(P, end=34), At(35, P, (straggler(persistent, 3, 35),)),
         At(80, P, (straggler(persistent, 3, 80),)), Never(T),
         # the flag and the share exist for the straggling rank only, not as a 0 per rank;
         # the flag is valued as the rank's busy time over its stage's baseline
         Value(80, "job_rank:train_straggler:flag1m == bool on (job_id, rank, stage, node) "
                   "(job_rank:train_busy_seconds:mean1m / on (job_id, stage) group_left () "
                   "job_stage:train_busy_seconds:baseline1m)", {SLOW3: 1}),
         # its cost over the recurrence window: its excess, capped, at every evaluation
         Value(80, "job_rank:train_straggler:cost30m > bool 0.18",
               {SLOW3: 1})]),
    "one rank 10% slower from minute 30 fires Persistent for that rank within 10 minutes": Case(
        [ten], 60, [Never(P, end=32), At(40, P, (straggler(ten, 5, 40),)), Never(T)]),
    "a rank 25% slower rotating every 2 minutes through the ranks is Transient, never "
    "Persistent: the job's cost of the moving straggler, a quarter of its step time": Case(
        [Job(job_id=JOB, faults=(RotatingSlow(factor=1.25, period=2 * MIN, start=10 * MIN,
                                              end=50 * MIN),))], 60,
        [Never(P), Never(T, end=27.5), *always(T, 40, 55, (Fired({"job_id": JOB}, None),),
                                               every=2.5)]),
    "a pipeline stage that computes 30% more than the others is not a straggler": Case(
        [Job(job_id=JOB, pp=4, microbatches=16, stage_compute=(1.0, 1.0, 1.0, 1.3))], 60,
        [Never(P), Never(T)]),
    "a rank 20% slower from the job's first minute fires Persistent within 5 minutes of the "
    "warm-up window's end, not before": Case(
        [from_start], 30,
        [Never(P, end=9), At(10.5, P, (straggler(from_start, 3, 10.5),)),
         At(30, P, (straggler(from_start, 3, 30),)), Never(T)]),
    "a persistent straggler whose rank is lost stops firing within a minute": Case(
        [lost], 60,
        [At(44.5, P, (straggler(lost, 3, 44.5),)), Never(P, start=46, every=0.5), Never(T)]),
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
    "TP=8 / PP=2 / DP=2 without the wait inside compute: the slow GPU's TP group and the next "
    "stage's TP group of its pipeline, which waits for it in recv, are one TPGroup alert for "
    "the pipeline that names both; no rank fires Persistent": Case(
        [tp8_nowait], 45,
        [Never(P), Never(T), Never(G, end=21.5),
         At(25, G, (Fired({"job_id": JOB, "pp_group": "8"}, 16, (8, 24)),)),
         At(45, G, (Fired({"job_id": JOB, "pp_group": "8"}, 16, (8, 24)),))]),
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
