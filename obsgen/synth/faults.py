"""Faults a synthetic job can be given (``Job.faults``): slow ranks, gradient trouble,
pipeline bubbles, stalled checkpoints, lost ranks, restarts, and the NCCL sidecar's own
restarts."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SlowRank:
    """``rank`` computes ``factor`` times slower from ``start`` until ``end``."""
    rank: int
    factor: float = 1.2
    start: float = 0.0
    end: float = math.inf


@dataclass(frozen=True)
class RotatingSlow:
    """A different rank is slow every ``period`` seconds (ranks in ``order``, cycling)."""
    factor: float = 1.2
    period: float = 300.0
    start: float = 0.0
    end: float = math.inf
    order: tuple[int, ...] = ()


@dataclass(frozen=True)
class GradSpike:
    factor: float = 40.0
    start: float = 0.0
    duration: float = 120.0


@dataclass(frozen=True)
class GradNaN:
    """The gradient norm (``grad``) and/or the loss (``loss``) become ``value`` (NaN, or
    Inf for an overflow) from ``start`` for ``duration`` seconds."""
    start: float = 0.0
    duration: float = math.inf
    value: float = math.nan
    grad: bool = True
    loss: bool = False


@dataclass(frozen=True)
class GradVanish:
    start: float = 0.0
    value: float = 1e-5


@dataclass(frozen=True)
class StageBubble:
    """Pipeline stage ``stage`` idles ``bubble`` of each step from ``start``."""
    stage: int
    bubble: float = 0.45
    start: float = 0.0


@dataclass(frozen=True)
class CheckpointStall:
    """No checkpoint completes after ``start``."""
    start: float = 0.0


@dataclass(frozen=True)
class RankLoss:
    """``ranks`` vanish at ``at``; the others hang in their next collective (``hang``) or
    keep training (an exporter failure or an elastic job)."""
    ranks: tuple[int, ...]
    at: float = 0.0
    hang: bool = True


@dataclass(frozen=True)
class Restart:
    """Every process exits at ``at`` and the job comes back ``gap`` seconds later from its
    last checkpoint: new processes, new instances, counters from zero; on the next hosts
    (``moves``, as a scheduler places new pods) or on the same ones (a bare-metal rerun)."""
    at: float
    gap: float = 180.0
    moves: bool = True


@dataclass(frozen=True)
class ExporterRestart:
    """The NCCL sidecar exits at ``at`` and comes back ``gap`` seconds later without its
    saved state: its counters start from zero (the training goes on)."""
    at: float
    gap: float = 60.0




@dataclass(frozen=True)
class HostWork:
    """``rank`` spends ``seconds`` per step outside its compute (rank 0's logging,
    evaluation and checkpoint bookkeeping; a dataloader that stalls) from ``start`` until
    ``end``: the step waits for it at the gradient collective, its compute does not grow."""
    rank: int
    seconds: float = 0.3
    start: float = 0.0
    end: float = math.inf


@dataclass(frozen=True)
class Pauses:
    """Garbage-collection pauses of ``seconds`` inside compute, on random ranks: each rank
    pauses ``per_minute`` times a minute on average (Poisson), from ``start``."""
    seconds: float = 0.3
    per_minute: float = 1.0
    start: float = 0.0


@dataclass(frozen=True)
class Recurring:
    """``rank`` computes ``factor`` times slower for ``on`` seconds in every ``every``
    seconds from ``start`` until ``end``: a thermal or power throttle that comes back, a
    "lemon" GPU."""
    rank: int
    factor: float = 2.0
    on: float = 240.0
    every: float = 600.0
    start: float = 0.0
    end: float = math.inf


@dataclass(frozen=True)
class MovingSlow:
    """Every ``period`` seconds from ``start`` until ``end`` another rank, drawn at random
    (``seed``) from ``ranks`` (default: all), computes ``factor`` times slower: contention
    that moves between hosts, a straggler that follows the data."""
    factor: float = 1.2
    period: float = 30.0
    start: float = 0.0
    end: float = math.inf
    ranks: tuple[int, ...] = ()
    seed: int = 0


@dataclass(frozen=True)
class WarmRank:
    """``rank`` warms up ``factor`` times slower for ``seconds`` after every start and
    restart, beside the job's own warm-up: a rank that compiles or fills its caches last."""
    rank: int
    factor: float = 1.5
    seconds: float = 300.0


@dataclass(frozen=True)
class ScrapeMisses:
    """Each scrape of each rank fails with probability ``share`` from ``start`` (its own
    random stream): Prometheus writes staleness markers for the target's series, and the
    next good scrape brings them back."""
    share: float = 0.02
    start: float = 0.0


@dataclass(frozen=True)
class SeqImbalance:
    """Sequence-length and packing imbalance from ``start``: on every step each
    data-parallel replica computes a factor drawn from 1 to ``worst`` (about 1.34 on a
    real step), a different replica the slowest each time; the step waits for the
    slowest replica."""
    worst: float = 1.34
    start: float = 0.0

