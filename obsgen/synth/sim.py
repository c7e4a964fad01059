"""The simulation of a synthetic job: rank speeds, faults, restarts, checkpoints, and
the training done between two scrapes (``advance``), one ``Scrape`` per call of
``scrape_at``. What the ranks publish is ``emit._Emit``'s; the NCCL sidecar is
``sidecar._Sidecar``'s."""
from __future__ import annotations

import math
import random
from typing import Iterator

from ..contract import M
from .emit import _Emit
from .faults import (CheckpointStall, GradNaN, GradSpike, GradVanish, HostWork, MovingSlow,
                     Pauses, RankLoss, Recurring, Restart, RotatingSlow, ScrapeMisses,
                     SeqImbalance, SlowRank, StageBubble, WarmRank)
from ..mesh import Mesh
from .job import STALE, Job, Scrape
from .sidecar import _Sidecar


class _Sim(_Emit, _Sidecar):
    def __init__(self, job: Job):
        self.j = job
        self.rng = random.Random(job.seed)
        # healthy GPUs differ by at most twice rank_spread: a wider gap is a straggler
        spread = job.rank_spread
        self.offsets = [1.0 + max(-2 * spread, min(2 * spread, self.rng.gauss(0, spread)))
                        for _ in range(job.ranks)]
        self.gen = 0  # restart generation
        self.last_finite = (job.grad_norm, job.loss)  # what an SDK that drops NaN serves
        self.moved = 0  # restarts that placed the processes on other hosts
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
        self._hists: dict[tuple, tuple] = {}  # a histogram's (count, sum, bucket) keys
        # NCCL sidecar: its own random stream, so jobs without it draw exactly as before.
        self.nrng = random.Random(job.seed * 7919 + 17)
        # GC pauses: their own stream too
        self.prng = random.Random(job.seed * 104729 + 3)
        self.ncounters: dict[tuple, float] = {}
        # missed scrapes and sequence-length imbalance: their own streams too
        self.mrng = random.Random(job.seed * 15485863 + 5)
        self.srng = random.Random(job.seed * 32452843 + 7)
        self.exporter_gen = 0
        self.t_prev: float | None = None  # time of the previous scrape
        if job.ranks % (job.tp * job.cp * job.pp):
            raise ValueError(f"ranks ({job.ranks}) must be a multiple of tp*cp*pp "
                             f"({job.tp * job.cp * job.pp})")
        self.mesh = Mesh.of_world(job.ranks, tp=job.tp, pp=job.pp, cp=job.cp, ep=job.ep)
        # Who waits for whom inside compute: the lockstep set of each rank (its TP group,
        # with ep > 1 every TP group of its EP group), and its pipeline (pp group).
        self.lockstep = [self._lockstep(r) for r in range(job.ranks)]
        self.chain = [self.mesh.group(r, "pp") for r in range(job.ranks)]
        self.stages = [self.mesh.coords(r)["pp"] for r in range(job.ranks)]

    # physics --------------------------------------------------------------------------
    def stage_of(self, rank: int) -> int:
        return self.stages[rank]

    def _lockstep(self, rank: int) -> tuple[int, ...]:
        tp = self.mesh.group(rank, "tp")
        if self.j.ep == 1:
            return tp
        return tuple(sorted({m for e in self.mesh.group(rank, "ep") for m in self.mesh.group(e, "tp")}))

    def in_block_comm(self) -> float:
        """Transfer time of the per-layer TP/EP collectives inside a compute block."""
        j = self.j
        if j.tp == 1 and j.ep == 1:
            return 0.0
        return j.tp_comm_share * j.step_seconds * j.compute_share

    def computes(self, busy: list[float]) -> list[float]:
        """Each rank's compute from every rank's busy time (its own work): the slowest of
        its lockstep set, then of the stages of its pipeline, plus the in-block transfer."""
        lock = [max(busy[m] for m in self.lockstep[r]) for r in range(self.j.ranks)]
        comm = self.in_block_comm()
        return [max(lock[m] for m in self.chain[r]) + comm for r in range(self.j.ranks)]

    def slow_factor(self, rank: int, t: float) -> float:
        f = 1.0
        for fault in self.j.faults:
            if isinstance(fault, SlowRank) and fault.rank == rank and fault.start <= t < fault.end:
                f *= fault.factor
            elif isinstance(fault, RotatingSlow) and fault.start <= t < fault.end:
                order = fault.order or tuple(range(self.j.ranks))
                if order[int((t - fault.start) // fault.period) % len(order)] == rank:
                    f *= fault.factor
            elif (isinstance(fault, Recurring) and fault.rank == rank
                  and fault.start <= t < fault.end and (t - fault.start) % fault.every < fault.on):
                f *= fault.factor
            elif isinstance(fault, MovingSlow) and fault.start <= t < fault.end:
                pool = fault.ranks or tuple(range(self.j.ranks))
                k = int((t - fault.start) // fault.period)
                if pool[random.Random(fault.seed * 1_000_003 + k).randrange(len(pool))] == rank:
                    f *= fault.factor
        return f

    def warm(self, t: float, rank: int | None = None) -> float:
        first_step = self.proc_start + (self.j.init if self.gen == 0 else 0.0)
        f = self.j.warmup_factor if t - first_step < self.j.warmup else 1.0
        for fault in self.j.faults:
            if isinstance(fault, WarmRank) and fault.rank == rank and t - first_step < fault.seconds:
                f *= fault.factor
        return f

    def compute_mean(self, rank: int, t: float) -> float:
        j = self.j
        stage = j.stage_compute[self.stage_of(rank)] if j.stage_compute else 1.0
        return (j.step_seconds * j.compute_share * stage * self.offsets[rank]
                * self.slow_factor(rank, t) * self.warm(t, rank))

    def imbalance(self, steps: int, t: float) -> tuple[list[float], float]:
        """Sequence-length imbalance over ``steps`` steps: each rank's mean factor (that of
        its data-parallel replica) and the step's mean factor, the slowest replica's (1 and
        1 without a SeqImbalance fault)."""
        faults = [f for f in self.j.faults if isinstance(f, SeqImbalance) and t >= f.start]
        if not faults:
            return [1.0] * self.j.ranks, 1.0
        worst = faults[0].worst
        dp = self.j.ranks // (self.j.tp * self.j.cp * self.j.pp)
        # mean of `steps` draws from U(1, worst) per replica; the step waits for the largest
        sd = (worst - 1) / math.sqrt(12 * max(steps, 1))
        replica = [(1 + worst) / 2 + self.srng.gauss(0, sd) for _ in range(dp)]
        by_rank = [replica[self.mesh.coords(r)["dp"]] for r in range(self.j.ranks)]
        return by_rank, 1 + (worst - 1) * dp / (dp + 1)

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
            self.moved += sum(1 for d in due[self.gen:] if d.moves)
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

    def _checkpoint_done(self, t1: float) -> None:
        """Count the checkpoint being written if it completed by ``t1``."""
        done = self.pending_ckpt
        if done is not None and done <= t1:
            self.pending_ckpt = None
            self.last_ckpt_time = done
            self.last_ckpt_step = self.step
            for r in range(self.j.ranks):
                self._inc(r, M.train_checkpoint_total.key, 1)
                self._inc(r, M.train_checkpoint_seconds_total.key, self.j.checkpoint_cost)

    # one scrape interval ----------------------------------------------------------------
    def advance(self, t0: float, t1: float) -> None:
        """Train from t0 to t1 and update every counter."""
        j = self.j
        if self.down(t0) or self.hung(t0):
            return
        avail = t1 - max(t0, j.start + j.init)
        if avail <= 0:
            return
        # Checkpoints stop training while they are written. Every one due before t1 is
        # written: the live simulator's clock can jump over one or more (a ticker stalled
        # by a loaded machine), and a due one skipped would stop the schedule for good.
        if self.ckpt_busy_until > t0:
            avail -= min(self.ckpt_busy_until, t1) - t0
        while self.next_ckpt < t1:
            due = self.next_ckpt
            self.next_ckpt += j.checkpoint_every
            if self.stalled(due):
                continue
            self._checkpoint_done(t1)  # the previous one, when the clock jumped past it
            start = max(due, t0)  # late by the clock's jump, never before this interval
            busy_end = start + j.checkpoint_cost
            avail -= min(busy_end, t1) - start
            self.ckpt_busy_until = busy_end
            self.pending_ckpt = busy_end
        self._checkpoint_done(t1)
        avail = max(0.0, avail)
        tm = (t0 + t1) / 2
        own = [self.compute_mean(r, tm) for r in range(j.ranks)]  # each rank's busy time
        comm = j.step_seconds * (1 - j.compute_share)
        wall = max(own) * (1 + 1.4 * j.noise) + comm  # the slowest rank sets the pace
        if any(isinstance(f, SeqImbalance) for f in j.faults):
            by_rank, slowest = self.imbalance(max(1, int(avail / wall)), tm)
            own = [o * f for o, f in zip(own, by_rank)]
            wall = max(own) / max(by_rank) * slowest * (1 + 1.4 * j.noise) + comm
        means = self.computes(own)  # with the waits for its lockstep peers and its pipeline
        held_up = self.held_up(tm) if j.pp > 1 else None
        wall += max((f.seconds for f in j.faults if isinstance(f, HostWork)
                     and f.start <= tm < f.end and not self.lost(f.rank, tm)), default=0.0)
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
            self.nccl_advance(n, own, tm)  # the GPU that computes longest arrives last
        for r in range(j.ranks):
            if self.lost(r, tm):
                continue
            mean, wait = means[r], means[r] - own[r]
            noisy = lambda m: n * m * (1 + j.noise * self.rng.gauss(0, 1) / math.sqrt(n))
            # the noise is the rank's own work's; what it waits for is its peers' mean
            paused = self.paused(n, wall, tm)  # GC pauses inside compute, its own work
            self._observe(r, M.train_compute_seconds.key, n, noisy(own[r]) + n * wait + paused,
                          mean, mean * j.noise)
            if j.exports_wait:
                self._observe(r, M.train_compute_wait_seconds.key, n, n * wait, wait,
                              wait * j.noise)
            self._observe(r, M.train_step_seconds.key, n, n * wall, wall, wall * 0.002)
            coll = max(wall - mean, 1e-4)
            self._observe(r, M.nccl_collective_duration_seconds.key, n, noisy(coll), coll,
                          coll * j.noise, op="AllReduce", group="dp")
            self._inc(r, M.nccl_collective_bytes_total.key, n * j.grad_bytes, op="AllReduce",
                      group="dp")
            self._other_parallelisms(r, n, coll)
            if j.emit_pipeline or (j.emit_pipeline is None and j.pp > 1):
                # Without pipeline parallelism the stage is busy for its compute only. With
                # it, a stage idles its bubble, and longer while a slowed stage of its
                # pipeline (a straggler's) holds it up.
                busy = (wall * (1 - self.bubble(self.stage_of(r), tm)) * held_up[r]
                        if j.pp > 1 else mean)
                self._observe(r, M.pipeline_stage_seconds.key, n, noisy(busy / 3), busy / 3,
                              busy / 3 * j.noise, phase="forward")
                self._observe(r, M.pipeline_stage_seconds.key, n, noisy(2 * busy / 3), 2 * busy / 3,
                              2 * busy / 3 * j.noise, phase="backward")

    def held_up(self, t: float) -> list[float]:
        """Each rank's share of its pipeline's pace that its stage sets: 1 for the slowest
        stage, below 1 for the stages that wait for a slowed one (faults only: healthy
        stages keep the pipeline's bubble)."""
        slow = [self.slow_factor(r, t) for r in range(self.j.ranks)]
        lock = [max(slow[m] for m in self.lockstep[r]) for r in range(self.j.ranks)]
        return [lock[r] / max(lock[m] for m in self.chain[r]) for r in range(self.j.ranks)]

    def paused(self, steps: int, wall: float, t: float) -> float:
        """Seconds of GC pauses a rank had in ``steps`` steps (0 without a Pauses fault; its
        own random stream, so jobs without one draw exactly as before)."""
        faults = [f for f in self.j.faults if isinstance(f, Pauses) and t >= f.start]
        if not faults:
            return 0.0
        rng = self.prng
        total = 0.0
        for f in faults:
            expected, k, p = f.per_minute * steps * wall / 60.0, 0, rng.random()
            # Poisson draw by inversion (expected counts are small)
            term = acc = math.exp(-expected)
            while p > acc and k < 1000:
                k += 1
                term *= expected / k
                acc += term
            total += k * f.seconds
        return total

    def _host(self, rank: int) -> int:
        """Index of the host a rank's process runs on now: each restart's processes come up
        on the hosts after the previous generation's."""
        j = self.j
        return rank // j.ranks_per_node + self.moved * -(-j.ranks // j.ranks_per_node)

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
            if j.sdk_drops_nan:  # the last finite values again
                grad = grad if math.isfinite(grad) else self.last_finite[0]
                loss = loss if math.isfinite(loss) else self.last_finite[1]
                self.last_finite = (grad, loss)
            miss = next((f.share for f in j.faults if isinstance(f, ScrapeMisses)
                         and t >= f.start), 0.0)
            for r in range(j.ranks):
                if self.lost(r, t) or (miss and self.mrng.random() < miss):
                    continue
                scrape.samples.update(self.gauges(r, grad, loss))
                scrape.samples.update(self.counters[r])
            if j.nccl is not None and not self.exporter_down(t):
                scrape.samples.update(self.nccl_samples())
            now = set(scrape.samples)
            if j.drops_nan:
                scrape.samples = {k: v for k, v in scrape.samples.items()
                                  if not (isinstance(v, float) and math.isnan(v))}
        for key in self.live - now:
            scrape.samples[key] = STALE
        self.live = now
        return scrape

    def run(self, until: float) -> Iterator[Scrape]:
        t = self.j.start
        while t <= until + 1e-9:
            yield self.scrape_at(t)
            t += self.j.scrape
