"""Scenarios of ``obsgen simulate``: a healthy job and one job per fault the alerts exist
for, built on ``obsgen.synth`` (the same model as the promtool fixtures).

Times are in the job's own seconds (model time) from its start; ``--speed`` maps them to
the wall clock. Faults start after the 3-minute warm-up and early enough that the alert's
window and ``for`` have elapsed within about 90 model minutes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from ..synth import (CheckpointStall, GradNaN, GradSpike, GradVanish, Job, RankLoss, Restart,
                     RotatingSlow, SlowRank, StageBubble)

MIN = 60.0


@dataclass(frozen=True)
class Scenario:
    help: str
    build: Callable[[Job], Job]  # the fault applied to a healthy job of the requested size
    onset: float = 0.0  # model seconds at which the fault starts


def _faults(*faults):
    return lambda j: replace(j, faults=faults)


def _slow_rank(j: Job) -> int:
    return min(3, j.ranks - 1)


# No planned end: Train_ETA_Slip adds a duration (model seconds) to time() (wall clock), so
# it is not invariant under time scaling (see obsgen/timescale.py); its fixtures test it.
MEGATRON = dict(  # per rank and step: (op, group, bytes, seconds)
    pp=2, microbatches=8, experts=16, exposed_share=0.3, gpu_info=True,
    collectives=(("AllReduce", "tp", 1.2e8, 0.05), ("AllGather", "tp", 6.0e7, 0.02),
                 ("ReduceScatter", "tp", 6.0e7, 0.02), ("Send", "pp", 3.2e7, 0.01),
                 ("Recv", "pp", 3.2e7, 0.012), ("AllToAll", "ep", 8.0e7, 0.04),
                 ("AllGather", "cp", 2.0e7, 0.01), ("AllGather", "fsdp", 1.4e8, 0.03),
                 ("ReduceScatter", "fsdp", 1.4e8, 0.035)))

SCENARIOS: dict[str, Scenario] = {
    "healthy": Scenario("a healthy job: warm-up, noise, checkpoints every 10 minutes",
                        lambda j: j),
    "megatron": Scenario(
        "a healthy Megatron-style job with every parallelism: TP (2, in lockstep, when the "
        "ranks allow), PP (p=2, m=8), EP (16 experts), CP and FSDP collectives, exposed "
        "communication, GPU info",
        lambda j: replace(j, **MEGATRON, tp=2 if j.ranks % 4 == 0 else 1)),
    "straggler": Scenario(
        "rank 3 (or the last rank) computes 20% slower from minute 30",
        lambda j: replace(j, faults=(SlowRank(rank=_slow_rank(j), factor=1.2, start=30 * MIN),)),
        30 * MIN),
    # 2 minutes a turn, shorter than a spell: no rank pages; the job pays a quarter of its
    # speed to a straggler that moves, Transient's.
    "rotating-straggler": Scenario(
        "a different rank computes 25% slower every 2 minutes from minute 10",
        _faults(RotatingSlow(factor=1.25, period=2 * MIN, start=10 * MIN)), 10 * MIN),
    # The other stage idles while the slow GPU's stage holds the pipeline up: its bubble is
    # the straggler's effect, paged by Prometheus and suppressed by Alertmanager.
    "pipeline-straggler": Scenario(
        "p=2 pipeline, m=8: rank 5 (stage 1) computes 2x slower from minute 10, so stage 0 "
        "idles beyond its bubble",
        lambda j: replace(j, pp=2, microbatches=8, ranks=max(j.ranks, 4),
                          faults=(SlowRank(rank=max(j.ranks, 4) - 3, factor=2.0,
                                           start=10 * MIN),)), 10 * MIN),
    # 5 minutes, not the fixtures' 2: Explosion (for 1m) then fires for 4 model minutes, 4
    # wall seconds at 60x, which leaves Alertmanager's group_wait (0.5 s) time to notify it
    # as firing on a loaded machine; 2 minutes left it a second, and a notification that
    # came late said only "resolved".
    "grad-explosion": Scenario(
        "the gradient norm jumps to 40x for 5 minutes at minute 20",
        _faults(GradSpike(factor=40, start=20 * MIN, duration=5 * MIN)), 20 * MIN),
    "nan": Scenario("the gradient norm turns NaN at minute 10",
                    _faults(GradNaN(start=10 * MIN)), 10 * MIN),
    # The 6 h median keeps the healthy norm until the collapse has lasted as long as the job
    # ran before it: from minute 60 the alert stays true to minute 120, half an hour more
    # than its 30m `for` needs, so a stall of a loaded test machine cannot run it out.
    "vanishing": Scenario("the gradient norm collapses to 1e-5 at minute 60",
                          _faults(GradVanish(start=60 * MIN, value=1e-5)), 60 * MIN),
    "bubble": Scenario(
        "p=4 pipeline, m=16: stage 2 idles 45% of each step from minute 5 (theory: 15.8%)",
        lambda j: replace(j, pp=4, microbatches=16, ranks=max(j.ranks, 4),
                          faults=(StageBubble(stage=2, bubble=0.45, start=5 * MIN),)), 5 * MIN),
    "checkpoint-stall": Scenario("no checkpoint completes after minute 5",
                                 _faults(CheckpointStall(start=5 * MIN)), 5 * MIN),
    "checkpoint-overhead": Scenario("every checkpoint takes 70 s (13% of training time)",
                                    lambda j: replace(j, checkpoint_cost=70.0)),
    "rank-loss": Scenario(
        "the last two ranks vanish at minute 10; the others hang in their next collective",
        lambda j: replace(j, faults=(RankLoss(ranks=tuple(range(max(j.ranks - 2, 1), j.ranks)),
                                              at=10 * MIN),)), 10 * MIN),
    "rank-loss-straggler": Scenario(
        "rank 3 computes 20% slower from minute 10 while the last rank vanished at minute 5 and "
        "the others keep training (elastic): Alertmanager tells only of the lost rank",
        lambda j: replace(j, faults=(SlowRank(rank=_slow_rank(j), factor=1.2, start=10 * MIN),
                                     RankLoss(ranks=(j.ranks - 1,), at=5 * MIN, hang=False))),
        5 * MIN),
    "completion": Scenario("the job reaches its 400 planned steps and exits",
                           lambda j: replace(j, planned_steps=400)),
    "restart": Scenario(
        "every process exits at minute 10 and the job restarts from its checkpoint a minute "
        "later: new processes, counters from zero",
        # A minute, not the fixtures' 3: Train_RankFailed fires 4 to 4.5 minutes after the
        # last step, and in a live Prometheus the new processes' first scrapes and the rule
        # evaluation add up to a minute before progress is seen. At 20x a stall of a few
        # wall seconds on a loaded machine is another minute or two of model time: a
        # 2-minute gap left too little and fired once in a CI run with three Prometheus
        # servers beside it. The boundary itself is the promtool fixtures' (exact time).
        _faults(Restart(at=10 * MIN, gap=1 * MIN)), 10 * MIN),
    # With no process left that has stepped, RankFailed waits windows.restart_gap (15m)
    # before it pages: rescheduled pods, NCCL init and a checkpoint load take minutes.
    "slow-restart": Scenario(
        "every process exits at minute 10 and the job restarts 10 minutes later "
        "(rescheduled, its checkpoint loaded): new processes, counters from zero",
        _faults(Restart(at=10 * MIN, gap=10 * MIN)), 10 * MIN),
    "crash": Scenario("every process exits at minute 10 and nothing restarts the job",
                      lambda j: replace(j, stop=10 * MIN), 10 * MIN),
}


def job(scenario: str, job_id: str | None = None, ranks: int = 8, seed: int = 1,
        subnet: int = 0) -> Job:
    """The synthetic job of a scenario."""
    if scenario not in SCENARIOS:
        raise KeyError(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
    # Every rank names its place in the mesh and reports its wait inside compute, as a job
    # instrumented with obsgen.instrument (its mesh declared, patch_distributed on) does.
    base = Job(job_id=job_id or f"sim-{scenario}", ranks=ranks, seed=seed, subnet=subnet,
               stop=math.inf, reports_mesh=True)
    return SCENARIOS[scenario].build(base)
