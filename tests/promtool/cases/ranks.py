"""Rank cases: 8 ranks, staleness markers when a process's target disappears (as
Prometheus writes them), the remaining ranks of a synchronous job hanging in their next
collective unless stated."""
from obsgen.synth import Job, RankLoss, Restart

from ..support import At, Case, Fired, Never

RF = "Train_RankFailed"
MIN = 60


def failed(job_id: str, ranks: int) -> tuple:
    return (Fired({"job_id": job_id}, ranks),)


CASES = {
    "a healthy job fires nothing": Case([Job(job_id="job-a")], 60, [Never(RF)]),
    "two of eight ranks gone, the others hung, fires within 5 minutes for that job only": Case(
        [Job(job_id="job-a", faults=(RankLoss(ranks=(6, 7), at=30 * MIN),)),
         Job(job_id="job-b", subnet=1, seed=2)], 60,
        [Never(RF, end=34), At(35, RF, failed("job-a", 8)), At(60, RF, failed("job-a", 8))]),
    "two of eight ranks gone while the others keep stepping fires for the two": Case(
        [Job(job_id="job-a", faults=(RankLoss(ranks=(6, 7), at=30 * MIN, hang=False),))], 45,
        [Never(RF, end=34), At(35, RF, failed("job-a", 2))]),
    # the last full progress at 32 (the 2m window), then windows.restart_gap (15m), for
    "all ranks gone fires once it outlasts a restart, and keeps firing while the job is "
    "remembered": Case(
        [Job(job_id="job-a", stop=30 * MIN)], 100,
        [Never(RF, end=49), At(51, RF, failed("job-a", 8)), At(85, RF, failed("job-a", 8)),
         Never(RF, start=95)]),
    "all ranks hung in a collective fires": Case(
        [Job(job_id="job-a", faults=(RankLoss(ranks=(), at=30 * MIN),))], 45,
        [Never(RF, end=34), At(35, RF, failed("job-a", 8))]),
    "a job that completes its planned steps and exits fires nothing": Case(
        [Job(job_id="job-a", planned_steps=1000)], 60, [Never(RF)]),
    "a job initialising for 10 minutes before its first step fires nothing": Case(
        [Job(job_id="job-a", init=10 * MIN)], 30, [Never(RF)]),
    "a restart with a 3-minute gap, counter resets and new instances fires nothing": Case(
        [Job(job_id="job-a", faults=(Restart(at=40 * MIN, gap=3 * MIN),))], 80, [Never(RF)]),
    # rescheduled pods, NCCL init and a checkpoint load at scale: minutes without a step
    "a restart with a 14-minute gap fires nothing": Case(
        [Job(job_id="job-a", faults=(Restart(at=30 * MIN, gap=14 * MIN),))], 80, [Never(RF)]),
    "new processes that hang before their first step after a restart fire once it outlasts "
    "a restart": Case(
        [Job(job_id="job-a", faults=(Restart(at=30 * MIN, gap=2 * MIN),
                                     RankLoss(ranks=(), at=32 * MIN)))], 60,
        [Never(RF, end=49), At(51, RF, failed("job-a", 8))]),
    "a restarted job whose new processes stepped and then hung fires on the short wait": Case(
        [Job(job_id="job-a", faults=(Restart(at=30 * MIN, gap=2 * MIN),
                                     RankLoss(ranks=(), at=40 * MIN)))], 60,
        [Never(RF, end=44), At(45, RF, failed("job-a", 8))]),
}
