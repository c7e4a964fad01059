"""GPU health cases: 8 ranks, 4 per host (GPUs 0-3 of gpu-node-000 and -001), SM-active
0.92 with noise while training, as dcgm-exporter scrapes it; bare metal (the ranks' node
label maps hosts to the job) unless the case runs on Kubernetes (dcgm-exporter's pod labels
and kube-state-metrics' kube_pod_labels map each GPU)."""
from obsgen.contract import L
from obsgen.synth import Job, Restart
from obsgen.synth_hw import EccErrors, Fleet, RowRemap, SlowGPU, Xid, gpu_uuid

from ..support import At, Case, Fired, Never
from ._hw import MIN, scrapes, sm_stddev

TP, ECC, UNMAPPED = "Train_TP_Imbalance", "Train_GPU_ECC", "Train_GPU_Unmapped"
JOB = "llm-pretrain-a"


def tp(fleet: Fleet, minute: float, node: str, gpus=range(4)) -> Fired:
    return Fired({L.job_id.key: JOB, L.node.key: node},
                 sm_stddev(scrapes(fleet, minute), minute, node, gpus))


def ecc(node: str, gpu: int, signal: str, value: float) -> Fired:
    return Fired({L.job_id.key: JOB, L.node.key: node, L.gpu.key: str(gpu),
                  L.UUID.key: gpu_uuid(node, gpu), L.signal.key: signal}, value)


slow_bare = Fleet([Job(job_id=JOB)], faults=(SlowGPU("gpu-node-001", 2, start=10 * MIN),))
slow_main = Fleet([Job(job_id=JOB)], dcgm_host_label=L.hostname.key,
                  faults=(SlowGPU("gpu-node-001", 2, start=10 * MIN),))
slow_main_k8s = Fleet([Job(job_id=JOB)], kubernetes=True, pod_per_rank=True, gpus_per_node=8,
                      dcgm_host_label=L.hostname.key,
                      faults=(SlowGPU("gpu-node-000", 1, start=10 * MIN),))
# dcgm-exporter in a container without NODE_NAME: it names the host by the container's ID
containers = {"gpu-node-000": "3f2a9c1b7d4e", "gpu-node-001": "b81e0f5a2c93"}
slow_k8s = Fleet([Job(job_id=JOB)], kubernetes=True, pod_per_rank=True, gpus_per_node=8,
                 faults=(SlowGPU("gpu-node-000", 1, start=10 * MIN),))

CASES = {
    "a healthy job on whole hosts fires nothing": Case(
        [Fleet([Job(job_id=JOB)])], 60, [Never(TP), Never(ECC), Never(UNMAPPED)]),
    "dcgm-exporter's main branch (hostname, not Hostname): the slow GPU fires TP_Imbalance "
    "for its host as with a release": Case(
        [slow_main], 45,
        [Never(TP, end=24), At(30, TP, (tp(slow_main, 30, "gpu-node-001"),)),
         Never(ECC), Never(UNMAPPED)]),
    "dcgm-exporter's main branch on Kubernetes: the slow GPU fires for the job's GPUs "
    "only": Case(
        [slow_main_k8s], 45,
        [Never(TP, end=24), At(30, TP, (tp(slow_main_k8s, 30, "gpu-node-000"),)),
         Never(UNMAPPED)]),
    "dcgm-exporter's main branch: a double-bit ECC error fires with the GPU named": Case(
        [Fleet([Job(job_id=JOB)], dcgm_host_label=L.hostname.key,
               faults=(EccErrors("gpu-node-001", 3, at=20 * MIN),))], 30,
        [Never(ECC, end=19.5), At(21, ECC, (ecc("gpu-node-001", 3, "ecc_dbe", 1),))]),
    "with dcgm-exporter's default counters CSV (no ECC totals), a row remapped after an "
    "uncorrectable error fires ECC for an hour as remapped_rows": Case(
        [Fleet([Job(job_id=JOB)], counters="default",
               faults=(RowRemap("gpu-node-000", 2, at=20 * MIN),))], 85,
        [Never(ECC, end=19.5), At(20.5, ECC, (ecc("gpu-node-000", 2, "remapped_rows", 1),)),
         At(78, ECC, (ecc("gpu-node-000", 2, "remapped_rows", 1),)), Never(ECC, start=81),
         Never(UNMAPPED)]),
    "a DBE and a row remap of the same GPU fire once, as ecc_dbe": Case(
        [Fleet([Job(job_id=JOB)], faults=(EccErrors("gpu-node-000", 1, at=20 * MIN),
                                          RowRemap("gpu-node-000", 1, at=20 * MIN)))], 30,
        [At(21, ECC, (ecc("gpu-node-000", 1, "ecc_dbe", 1),))]),
    "dcgm-exporter in containers without NODE_NAME (host names are container IDs) fires "
    "Unmapped for the job's 2 hosts after 15 minutes, and nothing else can see its GPUs": Case(
        [Fleet([Job(job_id=JOB)], dcgm_hostnames=containers,
               faults=(SlowGPU("gpu-node-001", 2, start=10 * MIN),))], 40,
        [Never(UNMAPPED, end=15), At(20, UNMAPPED, (Fired({L.job_id.key: JOB}, 2),)),
         At(40, UNMAPPED, (Fired({L.job_id.key: JOB}, 2),)), Never(TP)]),
    "one host whose dcgm-exporter reports its fully qualified name fires Unmapped for that "
    "one host": Case(
        [Fleet([Job(job_id=JOB)], dcgm_hostnames={"gpu-node-001": "gpu-node-001.cluster.local"})], 30,
        [At(20, UNMAPPED, (Fired({L.job_id.key: JOB}, 1),)), Never(TP), Never(ECC)]),
    "a cluster without dcgm-exporter is not paged for unmapped GPUs": Case(
        [Fleet([Job(job_id=JOB)], dcgm=False)], 30, [Never(UNMAPPED), Never(TP), Never(ECC)]),
    "one GPU at 70% SM-active among 92% fires TP_Imbalance for its host only, after 15 "
    "minutes (bare metal: hosts from the ranks' node label)": Case(
        [slow_bare], 45,
        [Never(TP, end=24), At(30, TP, (tp(slow_bare, 30, "gpu-node-001"),)),
         At(45, TP, (tp(slow_bare, 45, "gpu-node-001"),)), Never(ECC)]),
    "on Kubernetes with one pod per GPU and idle GPUs on the host, the slow GPU fires for "
    "the job's GPUs only": Case(
        [slow_k8s], 45,
        [Never(TP, end=24), At(30, TP, (tp(slow_k8s, 30, "gpu-node-000"),)), Never(ECC)]),
    "on Kubernetes, idle GPUs beside a healthy job do not make it imbalanced": Case(
        [Fleet([Job(job_id=JOB)], kubernetes=True, gpus_per_node=8)], 45,
        [Never(TP), Never(ECC), Never(UNMAPPED)]),
    "a restart with a 3-minute gap onto other hosts fires nothing": Case(
        [Fleet([Job(job_id=JOB, faults=(Restart(at=30 * MIN, gap=3 * MIN),))])], 70,
        [Never(TP), Never(ECC), Never(UNMAPPED)]),
    "a double-bit ECC error on a GPU of the job fires at once and for an hour": Case(
        [Fleet([Job(job_id=JOB)], faults=(EccErrors("gpu-node-000", 1, at=20 * MIN),))], 85,
        [Never(ECC, end=19.5), At(20.5, ECC, (ecc("gpu-node-000", 1, "ecc_dbe", 1),)),
         At(78, ECC, (ecc("gpu-node-000", 1, "ecc_dbe", 1),)), Never(ECC, start=81),
         Never(TP)]),
    "an XID 48 raised during the job fires with its code; one held since before the job "
    "does not": Case(
        [Fleet([Job(job_id=JOB)], faults=(Xid("gpu-node-000", 2, 48, at=15 * MIN),
                                          Xid("gpu-node-001", 3, 48, at=-1)))], 40,
        [Never(ECC, end=14.5), At(16, ECC, (ecc("gpu-node-000", 2, "xid", 48),)),
         At(40, ECC, (ecc("gpu-node-000", 2, "xid", 48),))]),
    "XIDs that are not memory errors (13, 31, 43: application faults) fire nothing": Case(
        [Fleet([Job(job_id=JOB)], faults=(Xid("gpu-node-000", 0, 13, at=10 * MIN),
                                          Xid("gpu-node-000", 1, 31, at=12 * MIN),
                                          Xid("gpu-node-001", 0, 43, at=14 * MIN)))], 30,
        [Never(ECC)]),
    "on Kubernetes, a DBE with its XID 48 fires once for the job's GPU, not for an idle GPU "
    "of the host": Case(
        [Fleet([Job(job_id=JOB)], kubernetes=True, gpus_per_node=8,
               faults=(EccErrors("gpu-node-001", 6, at=10 * MIN),
                       EccErrors("gpu-node-001", 1, at=12 * MIN),
                       Xid("gpu-node-001", 1, 48, at=12 * MIN)))], 30,
        [Never(ECC, end=11.5), At(13, ECC, (ecc("gpu-node-001", 1, "ecc_dbe", 1),)),
         At(30, ECC, (ecc("gpu-node-001", 1, "ecc_dbe", 1),))]),
}
