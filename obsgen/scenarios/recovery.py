"""Recovery scenarios (obsgen.synth_hw: checkpoint bytes beside the job), sized from
``restart_loop_restarts``, ``windows.restart_loop`` and ``checkpoint_write_bytes_per_second``:
8 ranks checkpointing every 10 minutes, 5 GB per rank.

Restarts every 5 minutes that never reach the checkpoint due 10 minutes after each start
fire RestartLoop within two evaluations of the last checkpoint growing older than the
restart-loop window; checkpoints written at half the floor's rate fire
CheckpointStorage_Slow within the throughput window and two evaluations."""
from __future__ import annotations

from ..synth import Job, Restart
from ..synth_hw import Fleet
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

RL, CS = "Train_RestartLoop", "Train_CheckpointStorage_Slow"
JOB = "scenario-recovery"
MIN = 60.0
BYTES = 8 * 5e9  # a checkpoint of the job


def scenarios(s: Setting) -> list:
    every = s.every("recovery")
    quiet = [Quiet(a) for a in (RL, CS) if s.has(a)]
    out: list = [
        Scenario("a healthy job fires no recovery alert", [Fleet([Job(job_id=JOB)])], 70, quiet),
        Scenario("a single restart with a 3-minute gap fires no recovery alert",
                 [Fleet([Job(job_id=JOB, faults=(Restart(at=30 * MIN, gap=3 * MIN),))])], 70, quiet)]
    if s.has(RL):
        k, loop = s.t("restart_loop_restarts"), s.w("restart_loop")
        onset = 10 + 20 / 60 + loop  # the last checkpoint (10m20s) is a window old
        if 15 + 5 * (k - 1) > onset - 1 or loop > 6 * 60:
            out.append(NotStated(f"a restart loop fires {RL}", f"restart_loop_restarts {k} "
                                 "restarts 5 minutes apart do not fit in windows.restart_loop "
                                 f"({words(loop)}) of the scenario, or it would run over 6h"))
        else:
            w = 2 * every + 1
            restarts = tuple(Restart(at=(15 + 5 * i) * MIN, gap=2 * MIN)
                             for i in range(int((onset + w - 15) // 5) + 1))
            out.append(Scenario(
                f"restarts every 5 minutes that never reach a checkpoint fire {RL} within two "
                f"evaluations and a minute ({words(w)}) of the last checkpoint being "
                f"{words(loop)} old", [Fleet([Job(job_id=JOB, faults=restarts)])], onset + w + 1,
                [Fires(RL, onset, w, ({"job_id": JOB},), words(w))]))
    if s.has(CS):
        floor = s.t("checkpoint_write_bytes_per_second")
        cost = round(2 * BYTES / floor, 1)
        if cost > 300 or cost < 1:
            out.append(NotStated(f"slow checkpoint storage fires {CS}",
                                 f"checkpoint_write_bytes_per_second {floor:g}: a 40 GB checkpoint "
                                 f"written at half of it takes {cost:g} s, not a checkpoint of a "
                                 "job stepping every 1.5 s and checkpointing every 10 minutes"))
        else:
            w = s.w("checkpoint_throughput") + 2 * every
            out.append(Scenario(
                f"checkpoints written at half of {floor:g} bytes/s fire {CS} within the "
                f"throughput window and two evaluations ({words(w)})",
                [Fleet([Job(job_id=JOB, checkpoint_cost=cost)])], w + 2,
                [Fires(CS, 0, w, ({"job_id": JOB},), words(w)),
                 *[Quiet(a) for a in (RL,) if s.has(a)]]))
    return out
