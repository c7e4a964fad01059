"""Fabric cases: 12 ranks, 4 per host (3 hosts), each host sending 12 GB/s over 4 HCAs
while its ranks train (node_exporter counters in bytes), NCCL link recoveries counted per
rank by the sidecar from 0 with each process."""
from obsgen.contract import L
from obsgen.synth import Job, Restart
from obsgen.synth_hw import Fleet, IbDegraded, LinkRecoveries

from ..support import At, Case, Fired, Never

LR, IB = "Train_NCCL_LinkRecovery", "Train_IB_Asymmetry"
JOB = "llm-pretrain-a"
MIN = 60


def job(**kw) -> Job:
    return Job(job_id=JOB, ranks=12, **kw)


def recoveries(n: int) -> tuple:
    return (Fired({L.job_id.key: JOB}, n),)


CASES = {
    "a healthy job of three hosts fires nothing": Case(
        [Fleet([job()], dcgm=False)], 60, [Never(LR), Never(IB)]),
    "a host sending 40% of its peers' InfiniBand during all-reduce fires IB_Asymmetry for "
    "that host": Case(
        [Fleet([job()], dcgm=False, faults=(IbDegraded("gpu-node-002", 0.4, start=10 * MIN),))],
        40, [Never(IB, end=14), At(30, IB, (Fired({L.job_id.key: JOB, L.node.key: "gpu-node-002"}, 0.4),)),
             Never(LR)]),
    "hosts a restarted job left behind, idle, are not compared with the new ones": Case(
        [Fleet([job(faults=(Restart(at=30 * MIN, gap=3 * MIN),))], dcgm=False)], 70,
        [Never(IB), Never(LR)]),
    "link recoveries of one rank fire LinkRecovery from the second within an hour": Case(
        [Fleet([job()], dcgm=False, faults=(LinkRecoveries(5, (10 * MIN, 20 * MIN, 25 * MIN)),))],
        40, [Never(LR, end=19.5), At(21, LR, recoveries(2)), At(26, LR, recoveries(3)),
             Never(IB)]),
    "a single link recovery in an hour fires nothing": Case(
        [Fleet([job()], dcgm=False, faults=(LinkRecoveries(5, (10 * MIN,)),))], 40, [Never(LR)]),
    "recoveries before and after a restart (counters from zero) add up": Case(
        [Fleet([job(faults=(Restart(at=20 * MIN, gap=3 * MIN),))], dcgm=False,
               faults=(LinkRecoveries(1, (10 * MIN, 35 * MIN)),))], 45,
        [Never(LR, end=34.5), At(36, LR, recoveries(2)), Never(IB)]),
}
