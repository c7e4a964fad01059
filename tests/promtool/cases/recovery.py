"""Recovery cases: 8 ranks, a checkpoint every 10 minutes writing 5 GB per rank in 20 s
(2 GB/s for the job) unless stated; after a restart the job resumes from its last
checkpoint and its first checkpoint comes 10 minutes after the new processes start."""
from obsgen.contract import L, M
from obsgen.synth import Job, Restart
from obsgen.synth_hw import Fleet

from ..support import At, Case, Fired, Never
from ._hw import MIN, scrapes, series

RL, CS = "Train_RestartLoop", "Train_CheckpointStorage_Slow"
JOB = "llm-pretrain-a"


def restarts(fleet: Fleet, minute: float, window: float = 60) -> Fired:
    """Rise of the restart generation over the samples of the last hour."""
    scr = scrapes(fleet, minute)
    gens = [max(v for _, v in s) for t in sorted(scr) if minute * MIN - window * MIN <= t
            if (s := series(scr, t, M.train_run_id.key))]
    return Fired({L.job_id.key: JOB}, max(gens) - min(gens))


# Crashes every 7 minutes from minute 20, before the checkpoint due 10 minutes after start.
looping = Fleet([Job(job_id=JOB, faults=tuple(Restart(at=(20 + 7 * i) * MIN, gap=2 * MIN)
                                               for i in range(8)))])

CASES = {
    "a healthy job fires nothing": Case(
        [Fleet([Job(job_id=JOB)])], 70, [Never(RL), Never(CS)]),
    "restarts every 7 minutes that never reach a checkpoint fire RestartLoop once the last "
    "checkpoint is an hour old": Case(
        [looping], 80,
        [Never(RL, end=69.5), At(72, RL, (restarts(looping, 72),)),
         At(80, RL, (restarts(looping, 80),)), Never(CS)]),
    "restarts every 15 minutes that each write a new checkpoint fire nothing": Case(
        [Fleet([Job(job_id=JOB, checkpoint_every=5 * MIN,
                    faults=tuple(Restart(at=(15 + 15 * i) * MIN, gap=2 * MIN) for i in range(5)))])],
        90, [Never(RL), Never(CS)]),
    "a single restart with a 3-minute gap fires nothing": Case(
        [Fleet([Job(job_id=JOB, faults=(Restart(at=40 * MIN, gap=3 * MIN),))])], 80,
        [Never(RL), Never(CS)]),
    "checkpoints writing 40 GB in 80 s (0.5 GB/s) fire CheckpointStorage_Slow": Case(
        [Fleet([Job(job_id=JOB, checkpoint_cost=80)])], 40,
        [Never(CS, end=10), At(12, CS, (Fired({L.job_id.key: JOB}, 0.5e9),)),
         At(40, CS, (Fired({L.job_id.key: JOB}, 0.5e9),)), Never(RL)]),
}
