"""GPU scenarios (dcgm-exporter's series beside the job, obsgen.synth_hw), sized from
``tp_sm_active_stddev`` and the alerts' ``for``: 8 ranks, 4 per host, SM-active 0.92.

One GPU low enough that its host's spread is twice the threshold fires TP_Imbalance for
that host within the rate window, its ``for`` and two evaluations; an uncorrectable ECC
error fires ECC within two evaluations and a facts interval; hosts whose dcgm-exporter
names them otherwise fire Unmapped within its ``for``, a facts interval and two
evaluations."""
from __future__ import annotations

from ..synth import Job
from ..synth_hw import EccErrors, Fleet, SlowGPU, Xid, gpu_uuid
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

TP, ECC, UNMAPPED = "Train_TP_Imbalance", "Train_GPU_ECC", "Train_GPU_Unmapped"
JOB = "scenario-gpus"
MIN = 60.0


def scenarios(s: Setting) -> list:
    every, facts = s.every("gpus"), s.facts("gpus")
    quiet = [Quiet(a) for a in (TP, ECC, UNMAPPED) if s.has(a)]
    out: list = [Scenario("a healthy job on whole hosts fires no GPU alert",
                          [Fleet([Job(job_id=JOB)])], 45, quiet),
                 Scenario("a cluster without dcgm-exporter is not paged for GPUs",
                          [Fleet([Job(job_id=JOB)], dcgm=False)], 30, quiet)]
    onset = 10.0
    if s.has(TP):
        drop = 2 * s.t("tp_sm_active_stddev") * 4 / 3 ** 0.5  # one of 4: stddev = drop * sqrt(3) / 4
        if drop > 0.85:
            out.append(NotStated(f"a slow GPU fires {TP}", f"tp_sm_active_stddev "
                                 f"{s.t('tp_sm_active_stddev'):g}: no GPU's SM-active is that far "
                                 "from its peers'"))
        else:
            w = s.w("rate") + s.for_(TP) + 2 * every + facts
            out.append(Scenario(
                f"one GPU at {0.92 - drop:.2f} SM-active among 0.92 fires {TP} for its host only, "
                f"within the rate window, its for, a facts interval and two evaluations ({words(w)})",
                [Fleet([Job(job_id=JOB)], faults=(SlowGPU("gpu-node-001", 2, sm_active=round(0.92 - drop, 3),
                                                          start=onset * MIN),))],
                onset + w + 2,
                [Fires(TP, onset, w, ({"job_id": JOB, "node": "gpu-node-001"},), words(w)),
                 *[Quiet(a) for a in (ECC, UNMAPPED) if s.has(a)]]))
    if s.has(ECC):
        w = 2 * every + facts
        out.append(Scenario(
            f"a double-bit ECC error fires {ECC} with the GPU named within two evaluations and "
            f"a facts interval ({words(w)})",
            [Fleet([Job(job_id=JOB)], faults=(EccErrors("gpu-node-001", 3, at=onset * MIN),))],
            onset + w + 2,
            [Fires(ECC, onset, w, ({"job_id": JOB, "node": "gpu-node-001", "gpu": "3",
                                    "UUID": gpu_uuid("gpu-node-001", 3)},), words(w))]))
    if s.has(ECC):
        app = next(c for c in (13, 31, 43) if c not in s.t("gpu_ecc_xids"))
        out.append(Scenario(
            f"XID {app} (an application error, not a memory error) fires no {ECC}",
            [Fleet([Job(job_id=JOB)], faults=(Xid("gpu-node-000", 1, app, at=onset * MIN),))],
            onset + 15, [Quiet(ECC)]))
    if s.has(UNMAPPED):
        w = s.for_(UNMAPPED) + facts + 2 * every
        out.append(Scenario(
            f"dcgm-exporter naming one host by its fully qualified name fires {UNMAPPED} for the "
            f"job within its for, a facts interval and two evaluations ({words(w)})",
            [Fleet([Job(job_id=JOB)], dcgm_hostnames={"gpu-node-001": "gpu-node-001.cluster.local"})],
            w + 2, [Fires(UNMAPPED, 0, w, ({"job_id": JOB},), words(w))]))
    return out
