"""Late-arrival cases: 8 ranks, 4 per node; each node's exporter aligns its node's TP
communicator in 4 collectives per step (the TP groups themselves in the mesh cases).
Per-collective compute noise of 3% decides the last arrival between equally fast ranks;
1% persistent differences between ranks."""
from obsgen.synth import (ExporterRestart, Job, NcclExporter, Restart, RotatingSlow, SlowRank,
                          WarmRank)

from ..support import At, Case, Fired, Never

LA = "Train_Straggler_LateArrival"
JOB = "llm-pretrain-a"
MIN = 60
NCCL = NcclExporter()


def late(rank: int, share: float, per_node: int = 4, group: str = "tp") -> Fired:
    return Fired({"job_id": JOB, "rank": str(rank), "group": group,
                  "node": f"gpu-node-{rank // per_node:03d}"}, share)


def moved(rank: int, share: float, per_node: int = 4, hosts: int = 2) -> Fired:
    """The alert for a rank whose job restarted once: its processes run on the next hosts."""
    return Fired({"job_id": JOB, "rank": str(rank), "group": "tp",
                  "node": f"gpu-node-{rank // per_node + hosts:03d}"}, share)


slow = (SlowRank(rank=3, factor=1.2, start=30 * MIN),)

CASES = {
    "a healthy job whose ranks differ by about 1% names no late arrival": Case(
        [Job(job_id=JOB, nccl=NCCL)], 75, [Never(LA)]),
    "one rank 20% slower in compute from minute 30 is the late arrival of its TP group "
    "within 5 minutes of the onset, and no other rank": Case(
        [Job(job_id=JOB, nccl=NCCL, faults=slow)], 60,
        [Never(LA, end=32), At(35, LA, (late(3, 1.0),)),
         At(60, LA, (late(3, 1.0),))]),
    "one rank 10% slower from minute 30 is the late arrival of its TP group within 5 "
    "minutes too: the order of arrival counts, not by how much": Case(
        [Job(job_id=JOB, nccl=NCCL, faults=(SlowRank(rank=6, factor=1.1, start=30 * MIN),))], 50,
        [Never(LA, end=32), At(35, LA, (late(6, None),)), At(50, LA, (late(6, None),))]),
    "a last arrival rotating every 2 minutes (shorter than a spell) names no rank": Case(
        [Job(job_id=JOB, nccl=NCCL,
             faults=(RotatingSlow(factor=1.5, period=2 * MIN, start=10 * MIN),))], 75,
        [Never(LA)]),
    "a rank 3x slower for 2.9 minutes, once, is no late arrival: no spell shorter than 3 "
    "minutes pages on its own": Case(
        [Job(job_id=JOB, nccl=NCCL,
             faults=(SlowRank(rank=2, factor=3.0, start=20 * MIN + 17, end=22.9 * MIN + 17),))],
        45, [Never(LA)]),
    "a rank 2x slower for 6 minutes is its group's late arrival within 5 minutes, once, and "
    "resolves within 15 minutes of its end": Case(
        [Job(job_id=JOB, nccl=NCCL,
             faults=(SlowRank(rank=2, factor=2.0, start=20 * MIN, end=26 * MIN),))], 50,
        [Never(LA, end=23), *[At(m, LA, (late(2, None),)) for m in range(25, 38)],
         Never(LA, start=41)]),
    "a rank that warms up 5 minutes at 1.5x after a restart is no late arrival": Case(
        [Job(job_id=JOB, nccl=NCCL,
             faults=(Restart(at=20 * MIN, gap=3 * MIN, moves=False),
                     WarmRank(rank=1, factor=1.5, seconds=5 * MIN)))], 45, [Never(LA)]),
    "in a TP2 x PP2 x DP2 job the slow GPU is the late arrival of its own TP pair, named "
    "alone": Case(
        [Job(job_id=JOB, tp=2, pp=2, microbatches=8, reports_mesh=True, nccl=NCCL,
             faults=(SlowRank(rank=5, factor=1.2, start=30 * MIN),))], 50,
        [Never(LA, end=32), At(35, LA, (late(5, 1.0),)), At(50, LA, (late(5, 1.0),))]),
    "the same TP position late in every TP group follows the mesh: no late arrival names "
    "any of its GPUs": Case(
        [Job(job_id=JOB, tp=2, reports_mesh=True, nccl=NCCL,
             faults=tuple(SlowRank(rank=r, factor=1.2, start=30 * MIN) for r in (1, 3, 5, 7)))],
        50, [Never(LA)]),
    "in a TP4 job whose ranks report no wait inside compute, the late arrivals name the "
    "slow GPU that busy time cannot tell from its peers": Case(
        [Job(job_id=JOB, tp=4, reports_mesh=True, reports_wait=False, nccl=NCCL,
             faults=(SlowRank(rank=2, factor=1.2, start=30 * MIN),))], 50,
        [Never(LA, end=32), At(35, LA, (late(2, 1.0),)), At(50, LA, (late(2, 1.0),))]),
    "in a two-rank group, a rank 1.5% slower (last in about two thirds of the collectives, "
    "where chance gives half) does not fire": Case(
        [Job(job_id=JOB, ranks=4, ranks_per_node=2, nccl=NCCL,
             faults=(SlowRank(rank=1, factor=1.015),))], 60, [Never(LA)]),
    "an exporter restart without its state (counters from zero) keeps the alert firing": Case(
        [Job(job_id=JOB, nccl=NCCL, faults=slow + (ExporterRestart(at=55 * MIN, gap=MIN),))], 70,
        [At(50, LA, (late(3, 1.0),)), At(57, LA, (late(3, 1.0),)), At(70, LA, (late(3, 1.0),))]),
    "a late rank that a restart moves to another host is named with that host, and only "
    "that host, once the window holds only its collectives there": Case(
        [Job(job_id=JOB, nccl=NCCL, faults=slow + (Restart(at=50 * MIN, gap=3 * MIN),))], 80,
        [At(49, LA, (late(3, 1.0),)), At(80, LA, (moved(3, 1.0),))]),
    "an exporter restart and a job restart with new instances fire nothing in a healthy job": Case(
        [Job(job_id=JOB, nccl=NCCL,
             faults=(ExporterRestart(at=20 * MIN, gap=2 * MIN), Restart(at=40 * MIN, gap=3 * MIN)))],
        75, [Never(LA)]),
    "fewer than 20 aligned collectives in the window judge nobody, even a straggler": Case(
        [Job(job_id=JOB, step_seconds=60.0, nccl=NcclExporter(aligned_per_step=1),
             faults=(SlowRank(rank=3, factor=1.2, start=5 * MIN),))], 45, [Never(LA)]),
}
