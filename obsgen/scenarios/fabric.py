"""Fabric scenarios (node_exporter's InfiniBand counters and the NCCL sidecar's link
recoveries beside the job, obsgen.synth_hw), sized from ``ib_asymmetry_ratio``,
``nccl_link_recoveries``, ``windows.link_recovery`` and the alerts' ``for``: 12 ranks on
3 hosts, each sending 12 GB/s while its ranks train.

A host sending half the ratio of its peers' rate fires IB_Asymmetry for it within the
rate window, its ``for`` and two evaluations; as many link recoveries as the threshold,
a minute apart, fire LinkRecovery within two evaluations of the last."""
from __future__ import annotations

from ..synth import Job, Restart
from ..synth_hw import Fleet, IbDegraded, LinkRecoveries
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

LR, IB = "Train_NCCL_LinkRecovery", "Train_IB_Asymmetry"
JOB = "scenario-fabric"
MIN = 60.0


def job(**kw) -> Job:
    return Job(job_id=JOB, ranks=12, **kw)


def scenarios(s: Setting) -> list:
    every = s.every("fabric")
    quiet = [Quiet(a) for a in (LR, IB) if s.has(a)]
    out: list = [
        Scenario("a healthy job of three hosts fires no fabric alert",
                 [Fleet([job()], dcgm=False)], 45, quiet),
        Scenario("hosts a restarted job left behind, idle, are not compared with the new ones",
                 [Fleet([job(faults=(Restart(at=20 * MIN, gap=3 * MIN),))], dcgm=False)], 50, quiet)]
    onset = 10.0
    if s.has(IB):
        share = round(s.t("ib_asymmetry_ratio") / 2, 3)
        w = s.w("rate") + s.for_(IB) + 2 * every
        out.append(Scenario(
            f"a host sending {share:.0%} of its peers' InfiniBand rate during all-reduce fires "
            f"{IB} for that host within the rate window, its for and two evaluations ({words(w)})",
            [Fleet([job()], dcgm=False, faults=(IbDegraded("gpu-node-002", share, start=onset * MIN),))],
            onset + w + 2, [Fires(IB, onset, w, ({"job_id": JOB, "node": "gpu-node-002"},), words(w)),
                            *[Quiet(a) for a in (LR,) if s.has(a)]]))
    if s.has(LR):
        n = s.t("nccl_link_recoveries")
        if n > 30 or n > s.w("link_recovery") - 2:
            out.append(NotStated(f"link recoveries fire {LR}", f"nccl_link_recoveries {n}: that "
                                 "many recoveries a minute apart do not fit in "
                                 "windows.link_recovery"))
        else:
            at = tuple((onset + i) * MIN for i in range(n))
            last = onset + n - 1
            w = 2 * every
            out.append(Scenario(
                f"{n} NCCL link recoveries of one rank, a minute apart, fire {LR} within two "
                f"evaluations ({words(w)}) of the last",
                [Fleet([job()], dcgm=False, faults=(LinkRecoveries(5, at),))], last + w + 2,
                [Fires(LR, last, w, ({"job_id": JOB},), words(w))]))
            if n > 1:
                out.append(Scenario(
                    f"{n - 1} NCCL link recoveries fire nothing",
                    [Fleet([job()], dcgm=False, faults=(LinkRecoveries(5, at[:-1]),))], last + 10,
                    [Quiet(LR)]))
    return out
