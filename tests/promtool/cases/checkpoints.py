"""Checkpoint cases: 8 ranks, a checkpoint every 10 minutes costing 20 s unless stated,
steps paused while a checkpoint is written, every rank reporting its checkpoint time."""
from obsgen.synth import CheckpointStall, Job, RankLoss, Restart

from ..support import At, Case, Fired, Never

NC, CO = "Train_NoCheckpoints", "Train_CheckpointOverhead"
MIN = 60

CASES = {
    "a healthy job checkpointing every 10 minutes fires nothing": Case(
        [Job(job_id="job-a")], 90, [Never(NC), Never(CO)]),
    "two jobs where only one stops checkpointing fire for that job only": Case(
        [Job(job_id="job-a"),
         Job(job_id="job-b", subnet=1, seed=2, faults=(CheckpointStall(start=15 * MIN),))], 60,
        # job-b's last checkpoint completed at 10:20; the age passes 30m at 40:20, +2m for
        [Never(NC, end=42), At(45, NC, (Fired({"job_id": "job-b"}, 45 * MIN - 620),)),
         At(60, NC, (Fired({"job_id": "job-b"}, 60 * MIN - 620),)), Never(CO)]),
    "checkpoints costing 70 s every 10 minutes fire CheckpointOverhead": Case(
        # 6 checkpoints of 70 s per hour against 3180 s of steps: 13%
        [Job(job_id="job-a", checkpoint_cost=70)], 90,
        [At(85, CO, (Fired({"job_id": "job-a"}, 100 * 420 / 3180),)), Never(NC)]),
    "checkpoints costing 20 s every 10 minutes (3.4%) do not fire": Case(
        [Job(job_id="job-a", checkpoint_cost=20)], 90, [Never(CO), Never(NC)]),
    "a restart with a 3-minute gap, counter resets and new instances fires no checkpoint alert": Case(
        [Job(job_id="job-a", faults=(Restart(at=40 * MIN, gap=3 * MIN),))], 80,
        [Never(NC), Never(CO)]),
    "a hung job (no rank progressing) is not reported as missing checkpoints": Case(
        [Job(job_id="job-a", faults=(RankLoss(ranks=(), at=20 * MIN),))], 70, [Never(NC)]),
}
