"""Panel records cases (``dashboards.records``): 8 ranks, 4 per host on hosts of 8 GPUs
(GPUs 4-7 idle), each rank's ``train_rank_gpu_info`` naming the GPU it runs on. Every
value is computed here from the samples the fixture encodes, rounded to a millionth in
the query and here alike. The rate windows' cases take their scrapes half an interval after
the evaluations (``Case.offset``): a window then holds the same samples on Prometheus 2
(both ends included) and 3 (left end open), the scrapes of ``[t - 5m, t)``."""
import math

from obsgen.contract import L, M
from obsgen.synth import Job
from obsgen.synth_hw import EccErrors, Fleet, SlowGPU, Xid

from ..support import Case, Value
from ._hw import MIN, scrapes, series

JOB = "llm-pretrain-a"
WINDOW = 300
TO = 1e-6  # round(x, TO) in the query


def rounded(v: float) -> float:
    inv = 1.0 / TO
    return math.floor(v * inv + 0.5) / inv


def check(minute: float, record: str, samples: dict[tuple, float], **match) -> Value:
    """``round(record{match}, TO)`` at ``minute`` is ``samples`` ({label pairs: value})."""
    sel = ", ".join(f'{k}="{v}"' for k, v in match.items())
    return Value(minute, f"round({record}{{{sel}}}, {TO})" if sel else f"round({record}, {TO})",
                 {"{" + ", ".join(f'{k}="{v}"' for k, v in key) + "}": rounded(v)
                  for key, v in samples.items()})


def rises(scr: dict, minute: float, name: str, by: tuple[str, ...], **match) -> dict[tuple, float]:
    """Sum of each series' rise between the first and last sample of the window, per
    ``by``: of the scrapes of ``[t - 5m, t)``, which land half an interval later."""
    t = minute * MIN
    first: dict[tuple, float] = {}
    last: dict[tuple, tuple] = {}
    for tt in sorted(x for x in scr if t - WINDOW <= x < t):
        for labels, v in series(scr, tt, name, **match):
            key = tuple(sorted(labels.items()))
            first.setdefault(key, v)
            last[key] = (labels, v)
    out: dict[tuple, float] = {}
    for key, (labels, v) in last.items():
        group = tuple((k, labels[k]) for k in by)
        out[group] = out.get(group, 0.0) + v - first[key]
    return out


def mean(scr, minute, name, by, **match) -> dict[tuple, float]:
    num = rises(scr, minute, name + "_sum", by, **match)
    den = rises(scr, minute, name + "_count", by, **match)
    return {k: num[k] / den[k] for k in num if den.get(k, 0) > 0}


def on_rank_gpu(scr, minute, name, job: Job) -> dict[tuple, float]:
    """dcgm-exporter's ``name`` of the GPU each rank runs on: GPU rank % 4 of its host."""
    out = {}
    for labels, v in series(scr, minute * MIN, name):
        gpu, host = int(labels[L.gpu.key]), labels[L.Hostname.key]
        rank = int(host.rsplit("-", 1)[1]) * job.ranks_per_node + gpu
        if gpu < job.ranks_per_node:
            out[((L.job_id.key, JOB), (L.node.key, host), (L.rank.key, str(rank)))] = v
    return out


job = Job(job_id=JOB, gpu_info=True, exposed_share=0.5,
          collectives=(("AllGather", "tp", 1e6, 0.25), ("ReduceScatter", "tp", 1e6, 0.5),
                       ("ReduceScatter", "dp", 1e6, 0.125)))
healthy = Fleet([job], gpus_per_node=8)
slow = Fleet([job], gpus_per_node=8, faults=(SlowGPU("gpu-node-001", 2, start=5 * MIN),))
errors = Fleet([job], gpus_per_node=8, faults=(
    EccErrors("gpu-node-000", 1, at=20 * MIN, count=2), EccErrors("gpu-node-000", 6, at=20 * MIN),
    Xid("gpu-node-001", 3, 79, at=21 * MIN), Xid("gpu-node-001", 7, 79, at=21 * MIN)))
RANK = (L.job_id.key, L.rank.key)
ONE = ((L.job_id.key, JOB),)


def _collectives(fleet: Fleet, minute: float) -> list:
    scr = scrapes(fleet, minute)
    name = M.nccl_collective_duration_seconds.key
    return [
        check(minute, "job_rank:nccl_tp_collective_seconds:mean5m",
              {k: 0.375 for k in mean(scr, minute, name, RANK, group="tp")}),
        check(minute, "job_rank:nccl_dp_allreduce_seconds:mean5m",
              mean(scr, minute, name, RANK, group="dp", op="AllReduce")),
        check(minute, "job:train_exposed_comm_seconds:mean5m",
              mean(scr, minute, M.train_exposed_comm_seconds.key, (L.job_id.key,))),
        check(minute, "job:nccl_collective_seconds:per_step5m",
              {ONE: rises(scr, minute, name + "_sum", (L.job_id.key,))[ONE]
               / rises(scr, minute, M.train_step_seconds.key + "_count", (L.job_id.key,))[ONE]}),
    ]


def _gpus(fleet: Fleet, minute: float) -> list:
    scr = scrapes(fleet, minute)
    nvlink = on_rank_gpu(scr, minute, M.DCGM_FI_PROF_NVLINK_TX_BYTES.key, job)
    rx = on_rank_gpu(scr, minute, M.DCGM_FI_PROF_NVLINK_RX_BYTES.key, job)
    return [check(minute, "job_rank:dcgm_sm_active:max",
                  on_rank_gpu(scr, minute, M.DCGM_FI_PROF_SM_ACTIVE.key, job)),
            check(minute, "job_rank:dcgm_nvlink_bytes:sum", {k: v + rx[k] for k, v in nvlink.items()})]


CASES = {
    "each rank's mean time per TP collective is its TP _sum over its TP _count (ops of 0.25 "
    "and 0.5 s, one each per step: 0.375 s), and per DP all-reduce its own (its DP "
    "reduce-scatters left out); the job's "
    "exposed communication and collective time per step are sums over its ranks": Case(
        [healthy], 20, [*_collectives(healthy, 12), *_collectives(healthy, 20)], offset=True),
    "SM-active and NVLink are those of the GPU each rank runs on, a slow GPU's on its rank "
    "only; the idle GPUs of the hosts belong to no rank": Case(
        [slow], 20, [*_gpus(slow, 12), *_gpus(slow, 20)]),
    "ECC errors and XIDs of the job's GPUs count once per 5m window, and are 0 without "
    "any; the same errors on an idle GPU of the job's hosts do not count": Case(
        [errors], 30,
        [check(22, "job:dcgm_ecc_dbe:increase5m", {ONE: 2}),
         check(22, "job:dcgm_xid_changed_gpus:count5m", {ONE: 1}),
         check(22, "job:dcgm_ecc_sbe:increase5m", {ONE: 0}),
         check(22, "job:dcgm_nvlink_recovery:increase5m", {ONE: 0}),
         check(30, "job:dcgm_ecc_dbe:increase5m", {ONE: 0}),
         check(30, "job:dcgm_xid_changed_gpus:count5m", {ONE: 0})]),
    "the line rate is that of the job's fastest host, all its ports (4 x 50 GB/s)": Case(
        [healthy], 10, [check(10, "job:node_infiniband_rate_bytes_per_second:max", {ONE: 2e11})]),
}
