"""A synthetic distributed training job that emits the metric contract as scrapes would.

One model serves the promtool fixtures, ``obsgen simulate`` and the scale benchmark, so
they all see the same physics:

* Synchronous steps: every rank's step ends at the gradient collective, so step wall
  time is the same on every rank: the slowest rank's compute plus the transfer. A rank's
  time inside the collective is the step time minus its own compute, so the slow rank
  shows the *least* collective time (it arrives last and waits for nobody).
* Noise: per-step compute varies by ``noise`` (relative), ranks differ persistently by
  ``rank_spread``, the gradient norm by 10%, and warm-up steps after every (re)start are
  slower, with a large early gradient norm.
* Histograms have prometheus_client's default buckets, filled from the step-time
  distribution; counters reset on restart and the scrape labels (``job``, ``instance``)
  change with the new processes; vanished targets get staleness markers, as Prometheus
  writes them.

* With ``nccl`` set, the NCCL sidecar's series (``obsgen nccl-exporter``, one per node)
  come along: each node's ranks form one communicator, and in every aligned collective
  the rank whose compute finished last arrives last (noise decides between equals).

Time is in seconds from 0. ``Job.run()`` yields one ``Scrape`` per scrape interval.
"""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Iterator

from .contract import DEFAULT_BUCKETS, L, M, METRICS

STALE = "stale"


# Faults -------------------------------------------------------------------------------
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
    last checkpoint: new processes, new instances, counters from zero."""
    at: float
    gap: float = 180.0


@dataclass(frozen=True)
class ExporterRestart:
    """The NCCL sidecar exits at ``at`` and comes back ``gap`` seconds later without its
    saved state: its counters start from zero (the training goes on)."""
    at: float
    gap: float = 60.0


@dataclass(frozen=True)
class NcclExporter:
    """``obsgen nccl-exporter`` on every node, aligning the node's ranks (one ``group``
    communicator per node) in ``aligned_per_step`` collectives of each step."""
    group: str = "tp"
    op: str = "AllReduce"
    aligned_per_step: int = 4
    bytes_per_collective: float = float(64 << 20)
    resolution: float = 25e-6  # the exporter's --arrival-resolution-us, in seconds
    scrape_job: str = "nccl-exporter"
    port: int = 9410


def gpu_uuid(node: str, gpu: int) -> str:
    """A stable GPU UUID in NVML's format (GPU-8-4-4-4-12 hex digits) for GPU ``gpu`` of
    host ``node``: the job's ``train_rank_gpu_info`` and synth_hw's dcgm-exporter agree."""
    h = hashlib.md5(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# Job ----------------------------------------------------------------------------------
@dataclass
class Job:
    job_id: str = "job-a"
    ranks: int = 8
    ranks_per_node: int = 4
    pp: int = 1  # pipeline-parallel size; ranks are split into pp stages in order
    microbatches: int = 8
    stage_compute: tuple[float, ...] = ()  # relative compute of each stage (default equal)
    emit_pipeline: bool | None = None  # export pipeline_stage_seconds (default: when pp > 1)
    step_seconds: float = 1.5  # healthy step wall time
    compute_share: float = 0.8  # share of the healthy step spent in local compute
    noise: float = 0.03  # relative per-step compute noise
    rank_spread: float = 0.01  # persistent relative speed differences between ranks
    warmup: float = 180.0  # seconds of slower steps after every (re)start
    warmup_factor: float = 1.4
    grad_norm: float = 1.0
    grad_noise: float = 0.1
    loss: float = 2.2
    planned_steps: int = 1_000_000
    checkpoint_every: float = 600.0
    checkpoint_cost: float = 20.0
    grad_bytes: float = 2.8e8  # bytes each rank all-reduces per step in the dp group
    # Other parallelisms' collectives, per rank and step: (op, group, bytes, seconds), e.g.
    # ("AllToAll", "ep", 6e7, 0.02). Deterministic (no noise), so adding them changes
    # nothing else a job emits.
    collectives: tuple[tuple[str, str, float, float], ...] = ()
    experts: int = 0  # MoE experts, spread over the ranks; tokens_per_step routed per step
    tokens_per_step: float = 4.0e6
    exposed_share: float | None = None  # export exposed communication: this share of the wait
    planned_end: float | None = None  # export the planned end (seconds after start)
    gpu_info: bool = False  # export train_rank_gpu_info (one GPU UUID per rank)
    grad_from_all_ranks: bool = False  # like Megatron: only the last rank reports by default
    start: float = 0.0
    init: float = 0.0  # seconds after start before the first step (metrics already served)
    stop: float = math.inf  # the job (all ranks) exits at this time without completing
    subnet: int = 0  # keeps the pod addresses of several jobs apart
    scrape: float = 30.0
    scrape_job: str = "training"
    seed: int = 1
    faults: tuple = ()
    nccl: NcclExporter | None = None  # serve the NCCL sidecar's series too

    def run(self, until: float) -> Iterator["Scrape"]:
        return _Sim(self).run(until)

    def live(self) -> "_Sim":
        """A simulation to drive scrape by scrape: ``sim.scrape_at(t)`` with increasing t."""
        return _Sim(self)

    def physics(self) -> "_Sim":
        """The job's model without running it: rank speeds (``compute_mean``), stages
        (``stage_of``), the bubble, faults and the scrape labels of a rank (``labels``).
        For generators that stream far more ranks than ``run`` can hold, e.g.
        benchmarks/stream.py."""
        return _Sim(self)

    def compute_means(self, t: float) -> list[float]:
        """Noise-free mean compute time of every rank at ``t`` (no restart considered):
        the ground truth the straggler rules estimate."""
        sim = _Sim(self)
        return [sim.compute_mean(r, t) for r in range(self.ranks)]


@dataclass
class Scrape:
    """Samples of one scrape time: series labels (sorted tuple of pairs, with __name__)
    to a float, or to STALE for a series that vanished since the last scrape."""
    time: float
    samples: dict[tuple, float | str] = field(default_factory=dict)


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


class _Sim:
    def __init__(self, job: Job):
        self.j = job
        self.rng = random.Random(job.seed)
        self.offsets = [1.0 + self.rng.gauss(0, job.rank_spread) for _ in range(job.ranks)]
        self.gen = 0  # restart generation
        self.step = 0
        self.step_frac = 0.0
        self.proc_start = job.start
        self.last_ckpt_time = job.start
        self.last_ckpt_step = 0
        self.next_ckpt = job.start + job.checkpoint_every
        self.ckpt_busy_until = -1.0
        self.completed_at: float | None = None
        self.pending_ckpt: float | None = None
        self.counters: list[dict[tuple, float]] = [{} for _ in range(job.ranks)]
        self.live: set[tuple] = set()
        self._base: dict[tuple[int, int], dict[str, str]] = {}
        self._keys: dict[tuple, tuple] = {}
        # NCCL sidecar: its own random stream, so jobs without it draw exactly as before.
        self.nrng = random.Random(job.seed * 7919 + 17)
        self.ncounters: dict[tuple, float] = {}
        self.exporter_gen = 0
        self.t_prev: float | None = None  # time of the previous scrape

    # physics --------------------------------------------------------------------------
    def stage_of(self, rank: int) -> int:
        return rank * self.j.pp // self.j.ranks

    def slow_factor(self, rank: int, t: float) -> float:
        f = 1.0
        for fault in self.j.faults:
            if isinstance(fault, SlowRank) and fault.rank == rank and fault.start <= t < fault.end:
                f *= fault.factor
            elif isinstance(fault, RotatingSlow) and fault.start <= t < fault.end:
                order = fault.order or tuple(range(self.j.ranks))
                if order[int((t - fault.start) // fault.period) % len(order)] == rank:
                    f *= fault.factor
        return f

    def warm(self, t: float) -> float:
        first_step = self.proc_start + (self.j.init if self.gen == 0 else 0.0)
        return self.j.warmup_factor if t - first_step < self.j.warmup else 1.0

    def compute_mean(self, rank: int, t: float) -> float:
        j = self.j
        stage = j.stage_compute[self.stage_of(rank)] if j.stage_compute else 1.0
        return (j.step_seconds * j.compute_share * stage * self.offsets[rank]
                * self.slow_factor(rank, t) * self.warm(t))

    def bubble(self, stage: int, t: float) -> float:
        j = self.j
        b = (j.pp - 1) / (j.microbatches + j.pp - 1) if j.pp > 1 else 0.0
        for fault in j.faults:
            if isinstance(fault, StageBubble) and fault.stage == stage and t >= fault.start:
                b = fault.bubble
        return b

    def grad_norm(self, t: float) -> float:
        j = self.j
        v = j.grad_norm * (1 + 9 * math.exp(-(t - j.start) / 120.0))  # large early norm
        v *= max(0.5, 1 + self.rng.gauss(0, j.grad_noise))
        for fault in j.faults:
            if isinstance(fault, GradSpike) and fault.start <= t < fault.start + fault.duration:
                v = j.grad_norm * fault.factor * (1 + self.rng.gauss(0, 0.02))
            elif isinstance(fault, GradVanish) and t >= fault.start:
                v = fault.value * (1 + self.rng.gauss(0, j.grad_noise))
            elif (isinstance(fault, GradNaN) and fault.grad
                  and fault.start <= t < fault.start + fault.duration):
                v = fault.value
        return v

    def loss(self, t: float) -> float:
        j = self.j
        v = j.loss + 8.0 * math.exp(-(t - j.start) / 900.0) + self.rng.gauss(0, 0.02)
        for fault in j.faults:
            if isinstance(fault, GradNaN) and fault.loss and fault.start <= t < fault.start + fault.duration:
                v = fault.value
        return v

    # state ----------------------------------------------------------------------------
    def lost(self, rank: int, t: float) -> bool:
        return any(isinstance(f, RankLoss) and rank in f.ranks and t >= f.at for f in self.j.faults)

    def hung(self, t: float) -> bool:
        return any(isinstance(f, RankLoss) and f.hang and t >= f.at for f in self.j.faults)

    def down(self, t: float) -> bool:
        if t < self.j.start or t >= self.j.stop:
            return True
        if self.completed_at is not None and t > self.completed_at:
            return True
        return any(isinstance(f, Restart) and f.at <= t < f.at + f.gap for f in self.j.faults)

    def restart_if_due(self, t: float) -> None:
        # The latest due restart starts the new processes (with several restarts, not the
        # first one listed); restarts that came and went between two scrapes still count.
        due = [f for f in self.j.faults if isinstance(f, Restart) and f.at + f.gap <= t]
        if self.gen < len(due):
            f = max(due, key=lambda f: f.at + f.gap)
            self.gen = len(due)
            for c in self.counters:
                c.clear()
            self.ncounters.clear()
            self.proc_start = f.at + f.gap
            self.step = self.last_ckpt_step
            self.step_frac = 0.0
            self.next_ckpt = self.proc_start + self.j.checkpoint_every
            self.ckpt_busy_until = -1.0

    def _restarts_before(self, t: float) -> int:
        return sum(1 for f in self.j.faults if isinstance(f, Restart) and f.at + f.gap <= t)

    def stalled(self, t: float) -> bool:
        return any(isinstance(f, CheckpointStall) and t >= f.start for f in self.j.faults)

    # one scrape interval ----------------------------------------------------------------
    def advance(self, t0: float, t1: float) -> None:
        """Train from t0 to t1 and update every counter."""
        j = self.j
        if self.down(t0) or self.hung(t0):
            return
        avail = t1 - max(t0, j.start + j.init)
        if avail <= 0:
            return
        # Checkpoints stop training while they are written.
        if self.ckpt_busy_until > t0:
            avail -= min(self.ckpt_busy_until, t1) - t0
        if t0 <= self.next_ckpt < t1 and not self.stalled(self.next_ckpt):
            busy_end = self.next_ckpt + j.checkpoint_cost
            avail -= min(busy_end, t1) - self.next_ckpt
            self.ckpt_busy_until = busy_end
            self.pending_ckpt = busy_end
            self.next_ckpt += j.checkpoint_every
        elif t0 <= self.next_ckpt < t1:
            self.next_ckpt += j.checkpoint_every
        done = self.pending_ckpt
        if done is not None and done <= t1:
            self.pending_ckpt = None
            self.last_ckpt_time = done
            self.last_ckpt_step = self.step
            for r in range(j.ranks):
                self._inc(r, M.train_checkpoint_total.key, 1)
                self._inc(r, M.train_checkpoint_seconds_total.key, j.checkpoint_cost)
        avail = max(0.0, avail)
        tm = (t0 + t1) / 2
        means = [self.compute_mean(r, tm) for r in range(j.ranks)]
        comm = j.step_seconds * (1 - j.compute_share)
        wall = max(means) * (1 + 1.4 * j.noise) + comm  # the slowest rank sets the pace
        self.step_frac += avail / wall
        n = int(self.step_frac)
        self.step_frac -= n
        if n == 0:
            return
        if self.step + n >= j.planned_steps:
            n = j.planned_steps - self.step
            self.completed_at = t1
        self.step += n
        if j.nccl is not None and not self.exporter_down(t1):
            self.nccl_advance(n, means, tm)
        for r in range(j.ranks):
            if self.lost(r, tm):
                continue
            mean = means[r]
            noisy = lambda m: n * m * (1 + j.noise * self.rng.gauss(0, 1) / math.sqrt(n))
            self._observe(r, M.train_compute_seconds.key, n, noisy(mean), mean, mean * j.noise)
            self._observe(r, M.train_step_seconds.key, n, n * wall, wall, wall * 0.002)
            coll = max(wall - mean, 1e-4)
            self._observe(r, M.nccl_collective_duration_seconds.key, n, noisy(coll), coll,
                          coll * j.noise, op="AllReduce", group="dp")
            self._inc(r, M.nccl_collective_bytes_total.key, n * j.grad_bytes, op="AllReduce",
                      group="dp")
            self._other_parallelisms(r, n, coll)
            if j.emit_pipeline or (j.emit_pipeline is None and j.pp > 1):
                # Without pipeline parallelism the stage is busy for its compute only.
                busy = wall * (1 - self.bubble(self.stage_of(r), tm)) if j.pp > 1 else mean
                self._observe(r, M.pipeline_stage_seconds.key, n, noisy(busy / 3), busy / 3,
                              busy / 3 * j.noise, phase="forward")
                self._observe(r, M.pipeline_stage_seconds.key, n, noisy(2 * busy / 3), 2 * busy / 3,
                              2 * busy / 3 * j.noise, phase="backward")

    def labels(self, rank: int) -> dict[str, str]:
        """Scrape and contract labels of every series of ``rank`` (job, instance, job_id,
        rank, node), as ``run`` writes them."""
        return {k: v for k, v in self._make_key(rank, "_") if k != "__name__"}

    def _key(self, rank: int, name: str, **extra: str) -> tuple:
        cache_key = (rank, self.gen, name, *extra.items())
        key = self._keys.get(cache_key)
        if key is None:
            key = self._keys[cache_key] = self._make_key(rank, name, **extra)
        return key

    def _make_key(self, rank: int, name: str, **extra: str) -> tuple:
        base = self._base.get((rank, self.gen))
        if base is None:
            j = self.j
            node = self._host(rank)
            base = self._base[(rank, self.gen)] = {
                L.job.key: j.scrape_job,
                # New processes after a restart get new pod addresses, hence new instances.
                L.instance.key: (f"10.{j.subnet}.{self.gen * 16 + node // 250}.{node % 250 + 1}:"
                                 f"{9400 + rank % j.ranks_per_node}"),
                L.job_id.key: j.job_id,
                L.rank.key: str(rank),
                L.node.key: self._node_name(rank),
            }
        return tuple(sorted({"__name__": name, **base, **extra}.items()))

    def _inc(self, rank: int, name: str, by: float, **extra: str) -> None:
        key = self._key(rank, name, **extra)
        counters = self.counters[rank]
        counters[key] = counters.get(key, 0.0) + by

    def _observe(self, rank: int, base: str, n: int, total: float, mean: float, sd: float,
                 **extra: str) -> None:
        if base != M.nccl_collective_duration_seconds.key:
            extra = {L.stage.key: str(self.stage_of(rank)), **extra}
        self._inc(rank, base + "_count", n, **extra)
        self._inc(rank, base + "_sum", max(total, 0.0), **extra)
        sd = max(sd, 1e-9)
        for le, label in _BUCKETS:
            share = 1.0 if le == math.inf else _phi((le - mean) / sd)
            self._inc(rank, base + "_bucket", round(n * share), le=label, **extra)

    def _other_parallelisms(self, r: int, n: int, wait: float) -> None:
        j = self.j
        for op, group, nbytes, secs in j.collectives:
            self._observe(r, M.nccl_collective_duration_seconds.key, n, n * secs, secs,
                          secs * j.noise, op=op, group=group)
            self._inc(r, M.nccl_collective_bytes_total.key, n * nbytes, op=op, group=group)
        for e in range(r, j.experts, j.ranks):  # expert e lives on rank e % ranks
            share = 1.0 + 0.3 * math.sin(e)  # a fixed, uneven routing
            self._inc(r, M.moe_expert_tokens_total.key, n * j.tokens_per_step / j.experts * share,
                      expert=str(e))
        if j.exposed_share is not None:
            exposed = wait * j.exposed_share
            self._observe(r, M.train_exposed_comm_seconds.key, n, n * exposed, exposed,
                          exposed * j.noise)

    def gauges(self, rank: int, grad: float, loss: float) -> dict[tuple, float]:
        j = self.j
        out = {
            self._key(rank, M.train_world_size.key): float(j.ranks),
            self._key(rank, M.train_current_step.key): float(self.step),
            self._key(rank, M.train_planned_steps.key): float(j.planned_steps),
            self._key(rank, M.train_checkpoint_timestamp_seconds.key): self.last_ckpt_time,
            self._key(rank, M.train_run_id.key): float(self.gen),
            self._key(rank, M.train_pipeline_stages.key): float(j.pp),
            self._key(rank, M.train_microbatches_per_step.key): float(j.microbatches),
        }
        if j.planned_end is not None:
            out[self._key(rank, M.train_planned_end_timestamp_seconds.key)] = j.start + j.planned_end
        if j.gpu_info:  # GPU rank % ranks_per_node of its host, as dcgm-exporter names it
            uuid = gpu_uuid(self._node_name(rank), rank % j.ranks_per_node)
            out[self._key(rank, M.train_rank_gpu_info.key, UUID=uuid)] = 1.0
        if j.grad_from_all_ranks or rank == j.ranks - 1:
            out[self._key(rank, M.train_grad_norm.key)] = grad
            out[self._key(rank, M.train_loss.key)] = loss
        return out

    def init_counters(self) -> None:
        """Every counter and histogram series exists from process start with 0, as
        prometheus_client serves them once their labels are set."""
        j = self.j
        for r in range(j.ranks):
            if self.counters[r]:
                continue
            self._inc(r, M.train_checkpoint_total.key, 0)
            self._inc(r, M.train_checkpoint_seconds_total.key, 0)
            self._observe(r, M.train_compute_seconds.key, 0, 0.0, 1.0, 1.0)
            self._observe(r, M.train_step_seconds.key, 0, 0.0, 1.0, 1.0)
            self._observe(r, M.nccl_collective_duration_seconds.key, 0, 0.0, 1.0, 1.0,
                          op="AllReduce", group="dp")
            self._inc(r, M.nccl_collective_bytes_total.key, 0, op="AllReduce", group="dp")
            if j.emit_pipeline or (j.emit_pipeline is None and j.pp > 1):
                for phase in ("forward", "backward"):
                    self._observe(r, M.pipeline_stage_seconds.key, 0, 0.0, 1.0, 1.0, phase=phase)
            self._other_parallelisms(r, 0, 0.0)

    # NCCL sidecar ----------------------------------------------------------------------
    def exporter_down(self, t: float) -> bool:
        restarts = [f for f in self.j.faults if isinstance(f, ExporterRestart)]
        due = sum(1 for f in restarts if f.at + f.gap <= t)
        if due > self.exporter_gen:  # back without its state: counters from zero
            self.exporter_gen = due
            self.ncounters.clear()
        return any(f.at <= t < f.at + f.gap for f in restarts)

    def _nkey(self, rank: int, name: str, **extra: str) -> tuple:
        j = self.j
        node = self._host(rank)
        labels = {L.job.key: j.nccl.scrape_job,
                  L.instance.key: f"10.{j.subnet}.{self.gen * 16 + node // 250}.{node % 250 + 1}:{j.nccl.port}",
                  L.job_id.key: j.job_id, L.rank.key: str(rank), **extra}
        return tuple(sorted({"__name__": name, **labels}.items()))

    def _ninc(self, rank: int, name: str, by: float) -> None:
        nc = self.j.nccl
        labels = {L.op.key: nc.op, L.group.key: nc.group}
        if L.op.key not in METRICS[name].labels:  # the alignment counters: per group, on
            del labels[L.op.key]                  # the host of the rank's records
            labels[L.node.key] = self._node_name(rank)
        key = self._nkey(rank, name, **labels)
        self.ncounters[key] = self.ncounters.get(key, 0.0) + by

    def nccl_advance(self, steps: int, means: list[float], t: float) -> None:
        """``steps`` steps of aligned collectives on every node's communicator."""
        j, nc = self.j, self.j.nccl
        for first in range(0, j.ranks, j.ranks_per_node):
            members = [r for r in range(first, min(first + j.ranks_per_node, j.ranks))
                       if not self.lost(r, t)]
            if len(members) < 2:
                continue
            count = steps * nc.aligned_per_step
            last: dict[int, int] = {}
            for _ in range(count):
                arrive = sorted((means[r] * (1 + j.noise * self.nrng.gauss(0, 1)), r)
                                for r in members)
                if arrive[-1][0] - arrive[-2][0] >= nc.resolution:
                    last[arrive[-1][1]] = last.get(arrive[-1][1], 0) + 1
            for r in members:
                self._ninc(r, M.nccl_collective_aligned_total.key, count)
                self._ninc(r, M.nccl_collective_last_arrival_total.key, last.get(r, 0))
                self._ninc(r, M.nccl_collective_bytes_total.key, count * nc.bytes_per_collective)

    def nccl_samples(self) -> dict[tuple, float]:
        j, nc = self.j, self.j.nccl
        if not self.ncounters:  # every series from the exporter's start, at 0
            for r in range(j.ranks):
                for m in (M.nccl_collective_aligned_total, M.nccl_collective_last_arrival_total,
                          M.nccl_collective_bytes_total):
                    self._ninc(r, m.key, 0)
        out = dict(self.ncounters)
        for r in range(j.ranks):
            size = min(j.ranks_per_node, j.ranks - r // j.ranks_per_node * j.ranks_per_node)
            out[self._nkey(r, M.nccl_communicator_ranks.key, **{
                L.group.key: nc.group, L.node.key: self._node_name(r)})] = float(size)
        return out

    def _host(self, rank: int) -> int:
        """Index of the host a rank's process runs on now: each restart's processes come up
        on the hosts after the previous generation's."""
        j = self.j
        return rank // j.ranks_per_node + self.gen * -(-j.ranks // j.ranks_per_node)

    def _node_name(self, rank: int) -> str:
        """The host a rank's process runs on now, as its series and the exporter name it."""
        return f"gpu-node-{self._host(rank):03d}"

    def scrape_at(self, t: float) -> Scrape:
        """The scrape at time ``t`` (later than the previous call's): the job trains from the
        previous scrape time to ``t``. ``run`` calls it every ``scrape`` seconds; the live
        simulator (``obsgen simulate``) calls it at whatever times the wall clock gives."""
        j = self.j
        self.restart_if_due(t)
        if not self.down(t):
            self.init_counters()
        scrape = Scrape(t)
        if not self.down(t) and t > j.start:
            self.advance(j.start if self.t_prev is None else self.t_prev, t)
        self.t_prev = t
        now: set[tuple] = set()
        if not self.down(t):
            grad, loss = self.grad_norm(t), self.loss(t)  # global values, one per step
            for r in range(j.ranks):
                if self.lost(r, t):
                    continue
                scrape.samples.update(self.gauges(r, grad, loss))
                scrape.samples.update(self.counters[r])
            if j.nccl is not None and not self.exporter_down(t):
                scrape.samples.update(self.nccl_samples())
            now = set(scrape.samples)
        for key in self.live - now:
            scrape.samples[key] = STALE
        self.live = now
        return scrape

    def run(self, until: float) -> Iterator[Scrape]:
        t = self.j.start
        while t <= until + 1e-9:
            yield self.scrape_at(t)
            t += self.j.scrape


def _le(le: float) -> str:
    """Bucket label as prometheus_client writes it (0.005, 1.0, +Inf)."""
    return "+Inf" if math.isinf(le) else repr(float(le))


# Every histogram with prometheus_client's default buckets, the NCCL sidecar's too (whose
# contract buckets are finer): rules read _sum and _count only, and the fixtures of the
# families that carry nccl_collective_duration_seconds stay as they were.
_BUCKETS = tuple((le, _le(le)) for le in DEFAULT_BUCKETS)
