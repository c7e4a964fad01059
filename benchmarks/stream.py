"""Streaming OpenMetrics of one large synthetic training job, for the scale benchmark.

``obsgen.synth`` holds a whole job in memory and simulates every bucket of every rank at
every scrape: right for the promtool fixtures, far too slow for 16,384 ranks. This module
reuses its physics and label layout (``Job.physics()``: the ranks' speeds with their
spread, stages, the bubble, ``SlowRank`` faults, warm-up; the scrape labels of a rank)
and writes the job's series one shard of ranks at a time, series by series, so memory
stays flat and each shard's file can be backfilled with ``promtool tsdb
create-blocks-from openmetrics`` and deleted before the next.

What one rank publishes is what the contract's emitters publish for a dense Megatron-style
job with tensor, pipeline and data parallelism (TP x PP x DP, 8 GPUs per host; see
``Bench``): the training process's histograms with prometheus_client's default buckets,
gauges and counters; dcgm-exporter's fields for its GPU; node_exporter's InfiniBand ports
and uname of its host (one per host); and kube-state-metrics' pod phase and labels, which
only the reference document's rank-failure rule reads. ``Bench.series()`` lists them.

Every series is a ``# TYPE``-less (unknown) OpenMetrics family, written contiguously,
points in time order, ``# EOF`` at the end: valid OpenMetrics that promtool reads.
Values follow the job: histogram counts are the job's steps (the same on every rank of a
synchronous job), sums carry per-step noise, buckets hold the share of observations below
each bound from the step-time distribution, counters never decrease.
"""
from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO, Iterable

from obsgen import plan, synth
from obsgen.contract import DEFAULT_BUCKETS, L, M, METRICS
from obsgen.nccl.inspector import SYMMETRIC

# A fixed timeline, so data, and every query result, are the same in every run. BASE is a
# multiple of 2 h: the ranks' window [END - 72m, END] lies inside one TSDB block range.
BASE = 1_700_006_400  # 2023-11-15T00:00:00Z
END = BASE + 115 * 60
SCRAPE = 30

def _les(bounds: tuple[float, ...]) -> tuple[str, ...]:
    return tuple("+Inf" if math.isinf(b) else repr(float(b)) for b in bounds)


def bounds(name: str) -> tuple[float, ...]:
    """Bucket bounds of a contract histogram: its own (the NCCL sidecar's) or the default."""
    return METRICS[name].buckets or DEFAULT_BUCKETS


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@dataclass(frozen=True)
class Hist:
    """One histogram series set of a rank: ``name`` with ``extra`` labels."""
    name: str
    extra: tuple[tuple[str, str], ...] = ()
    stage: bool = True  # carries the stage label (every contract histogram but NCCL's)


@dataclass(frozen=True)
class Bench:
    """The benchmark job: ``ranks`` GPUs as TP x PP x DP, 8 per host, healthy but for one
    rank that turns 20% slower 50 minutes before the end (a persistent straggler the
    alerts must find). Timeline: the job started ``job_history`` before ``END``; per-rank
    series carry the last ``rank_history``, series no measured query reads only the last
    ``unread_history``; the two series whose rules read 6 h (gradient norm and loss, which
    only the last rank exports) carry the whole ``job_history``."""
    ranks: int
    tp: int = 8
    pp: int = 16
    microbatches: int = 64
    ranks_per_node: int = 8
    rank_history: int = 72 * 60
    job_history: int = 6 * 3600 + 15 * 60
    unread_history: int = 10 * 60
    end: int = END
    job_id: str = "bench"
    seed: int = 7
    # False: no histogram _bucket series, as a scrape that drops them with
    # metric_relabel_configs has it (examples/prometheus/drop-unread-buckets.yaml): no
    # rule or panel of obsgen reads one
    buckets: bool = True

    def __post_init__(self):
        if self.ranks % self.ranks_per_node or self.ranks < self.pp:
            raise ValueError(f"{self.ranks} ranks do not fill hosts of {self.ranks_per_node} "
                             f"and {self.pp} pipeline stages")

    # the model ---------------------------------------------------------------------
    @property
    def start(self) -> int:
        return self.end - self.job_history

    @property
    def slow_rank(self) -> int:
        return self.ranks * 5 // 8 + 3

    @cached_property
    def job(self) -> synth.Job:
        return synth.Job(
            job_id=self.job_id, ranks=self.ranks, ranks_per_node=self.ranks_per_node,
            pp=self.pp, tp=self.tp, microbatches=self.microbatches, reports_mesh=True, start=float(self.start),
            checkpoint_every=600.0, checkpoint_cost=20.0, seed=self.seed,
            faults=(synth.SlowRank(self.slow_rank, 1.2, start=float(self.end - 50 * 60)),))

    @cached_property
    def sim(self):
        return self.job.physics()

    @property
    def nodes(self) -> int:
        return self.ranks // self.ranks_per_node

    @property
    def theoretical_bubble(self) -> float:
        p, m = self.pp, self.microbatches
        return (p - 1) / (m + p - 1) if p > 1 else 0.0

    def times(self, history: int) -> list[int]:
        return list(range(self.end - history, self.end + 1, SCRAPE))

    @cached_property
    def timeline(self) -> "Timeline":
        return Timeline(self)

    # what a rank publishes -------------------------------------------------------------
    @property
    def hists(self) -> tuple[Hist, ...]:
        return (
            Hist(M.train_step_seconds.key),
            Hist(M.train_compute_seconds.key),
            Hist(M.train_compute_wait_seconds.key),
            Hist(M.train_exposed_comm_seconds.key),
            *(Hist(M.pipeline_stage_seconds.key, ((L.phase.key, phase),))
              for phase in ("forward", "backward") if self.pp > 1),
            *(Hist(M.nccl_collective_duration_seconds.key, ((L.op.key, op), (L.group.key, g)),
                   stage=False) for op, g in self.collectives),
            *(Hist(M.nccl_bus_bandwidth_gbytes_per_second.key, ((L.op.key, op), (L.group.key, g)),
                   stage=False) for op, g in self.collectives),
        )

    @property
    def shape(self) -> plan.Shape:
        """The job as ``obsgen plan`` sizes it (same fan-out of collectives and HCAs)."""
        return plan.Shape(self.ranks, pp=self.pp, tp=self.tp, gpus_per_host=self.ranks_per_node,
                          hcas_per_host=_HCAS)

    @property
    def collectives(self) -> tuple[tuple[str, str], ...]:
        """(op, group) of the collectives every rank runs, the pairs ``plan.Shape.collectives``
        counts: the gradient all-reduce (dp); with TP its all-reduce, all-gather and
        reduce-scatter (sequence parallelism); with PP the send and recv."""
        out = [("AllReduce", "dp")]
        if self.tp > 1:
            out += [("AllReduce", "tp"), ("AllGather", "tp"), ("ReduceScatter", "tp")]
        if self.pp > 1:
            out += [("Send", "pp"), ("Recv", "pp")]
        return tuple(out)

    @property
    def aligned_groups(self) -> tuple[str, ...]:
        """Groups whose collectives the sidecar aligns (all-reduce, all-gather,
        reduce-scatter: they complete together; PP's send/recv do not)."""
        return tuple(dict.fromkeys(g for op, g in self.collectives if op in SYMMETRIC))

    @property
    def groups(self) -> dict[str, int]:
        """Parallel groups and their sizes (the NCCL communicators a rank is in)."""
        out = {"dp": max(1, self.ranks // (self.tp * self.pp))}
        if self.tp > 1:
            out["tp"] = self.tp
        if self.pp > 1:
            out["pp"] = self.pp
        return out

    def series(self) -> dict[str, int]:
        """Series per rank by family (``_bucket``/``_sum``/``_count`` apart), as written;
        host series count as their share per rank (1/8 for 8 GPUs per host)."""
        out: dict[str, float] = {}
        for h in self.hists:
            out[h.name + "_bucket"] = out.get(h.name + "_bucket", 0) + len(bounds(h.name))
            out[h.name + "_sum"] = out.get(h.name + "_sum", 0) + 1
            out[h.name + "_count"] = out.get(h.name + "_count", 0) + 1
        for name in _PAIR_COUNTERS:
            out[name] = len(self.collectives)
        for name in _GROUP_COUNTERS:
            out[name] = len(self.aligned_groups)
        out[M.nccl_communicator_ranks.key] = len(self.groups)
        for name in _PEER_COUNTERS:  # Send and Recv with each neighbouring stage
            out[name] = 4 * (self.pp - 1) / self.pp
        for name in _SIDECAR_HISTS:  # per host and (op, group)
            n = len(bounds(name)) + 2
            out[name + "_bucket"] = (n - 2) * len(self.collectives) / self.ranks_per_node
            out[name + "_sum"] = out[name + "_count"] = len(self.collectives) / self.ranks_per_node
        for name in _SIDECAR_JOB:
            out[name] = 1 / self.ranks_per_node
        out[M.obsgen_nccl_alignment_incomplete_total.key] = len(self.groups) / self.ranks_per_node
        for name in (*_RANK_GAUGES, *_RANK_COUNTERS, M.train_rank_gpu_info.key,
                     M.train_rank_mesh_info.key, *_DCGM):
            out[name] = 1
        for name in _IB:
            out[name] = _HCAS / self.ranks_per_node
        out[M.node_uname_info.key] = 1 / self.ranks_per_node
        out["kube_pod_status_phase"] = len(_PHASES)
        out["kube_pod_labels"] = 1
        if not self.buckets:
            out = {k: v for k, v in out.items() if not k.endswith("_bucket")}
        return out


_RANK_GAUGES = (M.train_world_size.key, M.train_current_step.key, M.train_planned_steps.key,
                M.train_checkpoint_timestamp_seconds.key, M.train_run_id.key,
                M.train_pipeline_stages.key, M.train_microbatches_per_step.key,
                M.train_planned_end_timestamp_seconds.key)
_RANK_COUNTERS = (M.train_checkpoint_total.key, M.train_checkpoint_seconds_total.key,
                  M.checkpoint_bytes_written_total.key, M.nccl_link_recovery_total.key)
_DCGM = (M.DCGM_FI_PROF_SM_ACTIVE.key, M.DCGM_FI_PROF_NVLINK_TX_BYTES.key,
         M.DCGM_FI_PROF_NVLINK_RX_BYTES.key, M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL.key,
         M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL.key, M.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS.key,
         M.DCGM_FI_DEV_XID_ERRORS.key,
         M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL.key,
         M.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL.key, M.DCGM_FI_DEV_GPU_TEMP.key,
         M.DCGM_FI_DEV_POWER_USAGE.key, M.DCGM_FI_DEV_CLOCKS_EVENT_REASONS.key)
_IB = (M.node_infiniband_port_data_transmitted_bytes_total.key,
       M.node_infiniband_port_data_received_bytes_total.key,
       M.node_infiniband_rate_bytes_per_second.key)
_HCAS = 8  # one InfiniBand HCA per GPU (rail-optimised hosts)
# The NCCL sidecar (obsgen nccl-exporter): per rank and (op, group) counters; per host (one
# sidecar per host) the aligned collectives' skew and tail histograms and its own health.
_PAIR_COUNTERS = (M.nccl_collective_bytes_total.key, M.nccl_collective_bus_bytes_total.key,
                  M.obsgen_nccl_collectives_unrecorded_total.key)
# per rank, Send/Recv and peer (NCCL 2.30+): the pipeline's neighbouring stages
_PEER_COUNTERS = (M.nccl_p2p_seconds_total.key, M.nccl_p2p_bytes_total.key,
                  M.nccl_p2p_transfers_total.key)
# per rank and group, every op of the group together, for the groups it aligns
_GROUP_COUNTERS = (M.nccl_collective_aligned_total.key, M.nccl_collective_last_arrival_total.key)
# The alignment counters as the sidecar published them before (per rank, op and group, for
# every (op, group) pair), under these names, for the baseline's late-arrival rules only
# (benchmarks/baseline/rules.yaml): written when a measured query reads them, left out of
# every series count. The before/after then holds the sidecar's change too, on one TSDB.
BEFORE = "before_"
BEFORE_PER_OP = tuple(BEFORE + n for n in _GROUP_COUNTERS)
_SIDECAR_HISTS = (M.nccl_collective_arrival_skew_seconds.key, M.nccl_collective_tail_seconds.key)
_SIDECAR_JOB = (M.obsgen_nccl_records_total.key, M.obsgen_nccl_parse_errors_total.key,
                M.obsgen_nccl_alignment_pending.key, M.obsgen_nccl_files.key)
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
# The reference document's undefined per-job series, as a job-level exporter would
# publish them (job_id only, so its rules can match them).
NAIVE_JOB_SERIES = ("expected_rank_count", "job_id_theoretical_bubble")


class Timeline:
    """The job-level course of the run at every scrape from its start: steps per scrape,
    step wall time, checkpoints; the same bookkeeping as ``synth.sim._Sim.advance``."""

    def __init__(self, b: Bench):
        j, sim = b.job, b.sim
        self.times = b.times(b.job_history)
        # The slowest rank sets the pace: the fastest-drawn offset or a faulty rank.
        candidates = {max(range(b.ranks), key=lambda r: sim.offsets[r]), b.slow_rank}
        comm = j.step_seconds * (1 - j.compute_share)
        self.steps, self.n, self.wall = [], [], []
        self.ckpt_count, self.ckpt_last = [], []
        step, frac, next_ckpt, busy_until, pending = 0, 0.0, j.start + j.checkpoint_every, -1.0, None
        count, last = 0, j.start
        for i, t in enumerate(self.times):
            n, t0 = 0, t - j.scrape
            tm = (t0 + t) / 2
            wall = max(sim.compute_mean(r, tm) for r in candidates) * (1 + 1.4 * j.noise) + comm
            if i:
                avail = t - max(t0, j.start)
                if busy_until > t0:
                    avail -= min(busy_until, t) - t0
                if t0 <= next_ckpt < t:
                    busy_end = next_ckpt + j.checkpoint_cost
                    avail -= min(busy_end, t) - next_ckpt
                    busy_until = pending = busy_end
                    next_ckpt += j.checkpoint_every
                if pending is not None and pending <= t:
                    pending, last, count = None, pending, count + 1
                frac += max(0.0, avail) / wall
                n = int(frac)
                frac -= n
                step += n
            self.n.append(n)
            self.steps.append(step)
            self.wall.append(wall)
            self.ckpt_count.append(count)
            self.ckpt_last.append(last)
        self.index = {t: i for i, t in enumerate(self.times)}


@dataclass
class Writer:
    """Writes a Bench's series as OpenMetrics; ``read`` names the series families some
    measured query reads (None: all), the others get the short ``unread_history``."""
    b: Bench
    read: frozenset[str] | None = None
    written: dict[str, int] = field(default_factory=dict)  # series per family
    samples: int = 0

    def __post_init__(self):
        b = self.b
        self.tl = b.timeline
        self.rank_times = b.times(b.rank_history)
        self.short_times = b.times(b.unread_history)
        self._tails: dict[tuple, list[str]] = {}

    # helpers ---------------------------------------------------------------------------
    def _times(self, family: str) -> list[int]:
        if self.read is None or family in self.read:
            return self.rank_times
        return self.short_times

    def _ts(self, times: list[int]) -> list[str]:
        key = ("ts", len(times))
        if key not in self._tails:
            self._tails[key] = [str(t) for t in times]
        return self._tails[key]

    def _const(self, value: str, times: list[int]) -> list[str]:
        key = ("c", value, len(times))
        if key not in self._tails:
            self._tails[key] = [f" {value} {t}\n" for t in times]
        return self._tails[key]

    def _steps_tail(self, times: list[int], per: int = 1) -> list[str]:
        """Tails holding the job's step counter (times ``per``) at each time."""
        key = ("steps", len(times), per)
        if key not in self._tails:
            idx = self.tl.index
            self._tails[key] = [f" {self.tl.steps[idx[t]] * per} {t}\n" for t in times]
        return self._tails[key]

    def _emit(self, fh: IO[str], family: str, prefix: str, tails: list[str],
              counted: bool = True) -> None:
        if not self.b.buckets and family.endswith("_bucket"):
            return  # dropped at the scrape
        # prefix + prefix.join(tails) is every line "<prefix> <value> <ts>\n" in one join.
        fh.write(prefix + prefix.join(tails))
        if counted:  # the baseline's before-only series are left out of the series counts
            self.written[family] = self.written.get(family, 0) + 1
        self.samples += len(tails)

    def _floats(self, values: Iterable[float], times: list[int]) -> list[str]:
        return [f" {v!r} {t}\n" for v, t in zip(values, times)]

    # the shards ------------------------------------------------------------------------
    def rank_labels(self, rank: int) -> str:
        return ",".join(f'{k}="{v}"' for k, v in self.b.sim.labels(rank).items())

    def write_ranks(self, fh: IO[str], ranks: range) -> None:
        """Every per-rank and per-host series of ``ranks`` (whole hosts), family by family."""
        b = self.b
        labels = {r: self.rank_labels(r) for r in ranks}
        stage = {r: b.sim.stage_of(r) for r in ranks}
        by_name: dict[str, list[Hist]] = {}
        for h in b.hists:
            by_name.setdefault(h.name, []).append(h)
        for hs in by_name.values():  # one family's series together: OpenMetrics wants that
            self._hist(fh, hs, ranks, labels, stage)
        self._rank_scalars(fh, ranks, labels, stage)
        self._gpus(fh, ranks, labels)
        self._hosts(fh, ranks)
        self._sidecars(fh, ranks)
        self._kube(fh, ranks)

    def write_job(self, fh: IO[str]) -> None:
        """The job's series that are not per rank: the gradient norm, loss and their
        non-finite flags (the last rank exports them, over the whole job history), the reference document's per-job
        series, and the ALERTS series of the straggler the run carries."""
        b, tl = self.b, self.tl
        last = b.ranks - 1
        base = self.rank_labels(last)
        grads = [b.sim.grad_norm(t) for t in tl.times]
        losses = [b.sim.loss(t) for t in tl.times]
        self._emit(fh, M.train_grad_norm.key, f"{M.train_grad_norm.key}{{{base}}}",
                   self._floats(grads, tl.times))
        self._emit(fh, M.train_loss.key, f"{M.train_loss.key}{{{base}}}",
                   self._floats(losses, tl.times))
        for signal in ("grad_norm", "loss"):  # finite throughout: the flags stay 0
            self._emit(fh, M.train_nonfinite.key,
                       f'{M.train_nonfinite.key}{{{base},{L.signal.key}="{signal}"}}',
                       self._const("0", tl.times))
        times = self.rank_times
        job = f'{L.job_id.key}="{b.job_id}"'
        self._emit(fh, NAIVE_JOB_SERIES[0], f"{NAIVE_JOB_SERIES[0]}{{{job}}}",
                   self._const(str(b.ranks), times))
        self._emit(fh, NAIVE_JOB_SERIES[1], f"{NAIVE_JOB_SERIES[1]}{{{job}}}",
                   self._const(repr(b.theoretical_bubble), times))
        slow = b.slow_rank
        alerts = (f'ALERTS{{alertname="Train_Straggler_Persistent",alertstate="firing",{job},'
                  f'rank="{slow}",stage="{b.sim.stage_of(slow)}",'
                  f'node="{b.sim.labels(slow)[L.node.key]}",severity="warning",team="platform"}}')
        firing = [t for t in times if t >= b.end - 30 * 60]
        self._emit(fh, M.ALERTS.key, alerts, self._const("1", firing))

    # per family ------------------------------------------------------------------------
    @cached_property
    def _walls(self) -> list[float]:
        return [self.tl.wall[self.tl.index[t]] for t in self.rank_times]

    def _busy(self, rank: int) -> list[float]:
        """The rank's noise-free busy time (its own work) at each rank-window scrape."""
        return [row[rank] for row in self._mesh_times[0]]

    def _comp(self, rank: int) -> list[float]:
        """The rank's noise-free compute mean at each rank-window scrape: its busy time and
        what it waits for inside compute (its TP group, its pipeline), as obsgen.synth has it."""
        return [row[rank] for row in self._mesh_times[1]]

    @cached_property
    def _mesh_times(self) -> tuple[list[list[float]], list[list[float]]]:
        """Busy and compute of every rank at each rank-window scrape (the waits of a rank
        depend on its peers' busy time: computed for all ranks at once)."""
        sim, busy, comp = self.b.sim, [], []
        for t in self.rank_times:
            own = [sim.compute_mean(r, t - SCRAPE / 2) for r in range(self.b.ranks)]
            busy.append(own)
            comp.append(sim.computes(own))
        return busy, comp

    def _means(self, h: Hist, rank: int) -> tuple[list[float], float, int]:
        """Per-observation mean at each rank-window scrape, its relative sd, and
        observations per step, for histogram ``h`` of ``rank``."""
        b, sim, noise = self.b, self.b.sim, self.b.job.noise
        name, extra = h.name, dict(h.extra)
        walls = self._walls
        if name == M.nccl_bus_bandwidth_gbytes_per_second.key:
            group = extra[L.group.key]
            gbs = {"dp": 40.0, "tp": 300.0, "pp": 20.0}[group]
            calls = 1 if group == "dp" else 2 * b.microbatches if group == "pp" else 64
            return [gbs] * len(walls), 0.05, calls
        if name == M.train_step_seconds.key:
            return walls, 0.002, 1
        comp = self._comp(rank)
        if name == M.train_compute_seconds.key:
            return comp, noise, 1
        if name == M.train_compute_wait_seconds.key:
            return [c - b for c, b in zip(comp, self._busy(rank))], noise, 1
        if name == M.pipeline_stage_seconds.key:
            bub = sim.bubble(sim.stage_of(rank), self.rank_times[-1])
            share = 1 / 3 if extra[L.phase.key] == "forward" else 2 / 3
            return [w * (1 - bub) * share for w in walls], noise, 1
        coll = [max(w - c, 1e-4) for w, c in zip(walls, comp)]
        if name == M.train_exposed_comm_seconds.key:
            return [x * 0.5 for x in coll], noise, 1
        group = extra[L.group.key]
        if group == "dp":
            return coll, noise, 1
        # calls per step and share of the step wall time spent in them
        calls, share = {"pp": (2 * b.microbatches, 0.02), "tp": (64, 0.03)}[group]
        return [w * share / calls for w in walls], noise, calls

    def _hist(self, fh, hs: list[Hist], ranks: range, labels, stage) -> None:
        """The _bucket, then _count, then _sum series of the histograms ``hs`` (one name)."""
        tl = self.tl
        name = hs[0].name
        bucket_times = self._times(name + "_bucket")
        count_times = self._times(name + "_count")
        sum_times = self._times(name + "_sum")
        first = tl.index[self.rank_times[0]]

        def lab(h: Hist, r: int) -> str:
            return (labels[r] + (f',{L.stage.key}="{stage[r]}"' if h.stage else "")
                    + "".join(f',{k}="{v}"' for k, v in h.extra))

        # _bucket: cumulative observations at or below each bound. Observations of one
        # scrape interval share a mean and sd, so a bucket grows by round(n * share).
        for h in hs:
            for r in ranks:
                means, rel, calls = self._means(h, r)
                distinct = {m: _shares(m, m * rel, bounds(name)) for m in set(means)}
                base = lab(h, r)
                for k, le in enumerate(_les(bounds(name))):
                    ks = {s[k] for s in distinct.values()}
                    if ks == {1.0}:
                        tails = self._steps_tail(bucket_times, calls)
                    elif ks == {0.0}:
                        tails = self._const("0", bucket_times)
                    else:
                        col = [distinct[m][k] for m in means]
                        tails = self._bucket_tails(col, calls, first, bucket_times)
                    self._emit(fh, name + "_bucket", f'{name}_bucket{{{base},le="{le}"}}', tails)
        for h in hs:
            for r in ranks:
                self._emit(fh, name + "_count", f"{name}_count{{{lab(h, r)}}}",
                           self._steps_tail(count_times, self._means(h, r)[2]))
        noise = self.b.job.noise
        keep = len(sum_times)
        ns = tl.n[first:first + len(self.rank_times)]
        for h in hs:
            for r in ranks:
                means, _, calls = self._means(h, r)
                gauss = _rng(self.b.seed, r, h.name, h.extra).gauss
                # what a job this old has accumulated before the window, then per scrape
                total = tl.steps[first] * calls * means[0]
                values = [total]
                for n, m in zip(ns[1:], means[1:]):
                    if n:
                        n *= calls
                        total += max(0.0, n * m * (1 + noise * gauss(0, 1) / math.sqrt(n)))
                    values.append(total)
                self._emit(fh, name + "_sum", f"{name}_sum{{{lab(h, r)}}}",
                           self._floats(values[-keep:], sum_times))

    def _bucket_tails(self, col: list[float], calls: int, first: int, times: list[int]) -> list[str]:
        tl = self.tl
        total = round(tl.steps[first] * calls * col[0])
        values = [total]
        for k in range(1, len(self.rank_times)):
            total += round(tl.n[first + k] * calls * col[k])
            values.append(total)
        keep = len(times)
        return [f" {v} {t}\n" for v, t in zip(values[-keep:], times)]

    def _rank_scalars(self, fh, ranks: range, labels, stage) -> None:
        b, tl = self.b, self.tl
        times = {name: self._times(name) for name in (*_RANK_GAUGES, *_RANK_COUNTERS,
                                                       M.nccl_collective_bytes_total.key,
                                                       M.train_rank_gpu_info.key)}
        idx = tl.index
        const = {
            M.train_world_size.key: str(b.ranks),
            M.train_planned_steps.key: str(b.job.planned_steps),
            M.train_run_id.key: "0",
            M.train_pipeline_stages.key: str(b.pp),
            M.train_microbatches_per_step.key: str(b.microbatches),
            M.train_planned_end_timestamp_seconds.key: str(b.start + 30 * 86400),
            M.nccl_link_recovery_total.key: "0",
        }
        for name in (*_RANK_GAUGES, *_RANK_COUNTERS):
            t = times[name]
            if name in const:
                tails = self._const(const[name], t)
            elif name == M.train_current_step.key:
                tails = self._steps_tail(t)
            elif name == M.train_checkpoint_timestamp_seconds.key:
                tails = [f" {tl.ckpt_last[idx[x]]!r} {x}\n" for x in t]
            elif name == M.train_checkpoint_total.key:
                tails = [f" {tl.ckpt_count[idx[x]]} {x}\n" for x in t]
            elif name == M.checkpoint_bytes_written_total.key:  # each rank writes its shard
                tails = [f" {tl.ckpt_count[idx[x]] * _SHARD_BYTES} {x}\n" for x in t]
            else:  # checkpoint seconds
                tails = [f" {tl.ckpt_count[idx[x]] * b.job.checkpoint_cost!r} {x}\n" for x in t]
            for r in ranks:
                self._emit(fh, name, f"{name}{{{labels[r]}}}", tails)
        def calls(group: str) -> int:
            return 1 if group == "dp" else 2 * b.microbatches if group == "pp" else 64

        def alignment(name: str, r: int, n: int, t: list[int]) -> list[str]:
            """Tails of an alignment counter (either version) of rank ``r``, ``n``
            aligned collectives per step: the straggler arrives last in every one."""
            if name.endswith(M.nccl_collective_aligned_total.key) or r == b.slow_rank:
                return self._steps_tail(t, n)
            return self._const("0", t)

        for name in _PAIR_COUNTERS:
            t = self._times(name)
            for op, group in b.collectives:
                size = {"dp": 2 * 2**30 // b.groups["dp"], "tp": 2**24, "pp": 2**21}[group]
                per_step = {M.nccl_collective_bytes_total.key: calls(group) * size,
                            M.nccl_collective_bus_bytes_total.key: 2 * calls(group) * size,
                            M.obsgen_nccl_collectives_unrecorded_total.key: 0}[name]
                tails = self._steps_tail(t, per_step)
                for r in ranks:
                    self._emit(fh, name, f'{name}{{{labels[r]},{L.op.key}="{op}",'
                                         f'{L.group.key}="{group}"}}', tails)
        mesh = b.sim.mesh
        for name in _PEER_COUNTERS:
            t = self._times(name)
            per_step = {M.nccl_p2p_seconds_total.key: b.microbatches * 0.0002,
                        M.nccl_p2p_bytes_total.key: b.microbatches * 2**21,
                        M.nccl_p2p_transfers_total.key: b.microbatches}[name]
            tails = self._steps_tail(t, per_step)
            for r in ranks:
                c = mesh.coords(r)
                for stage in (c["pp"] - 1, c["pp"] + 1):
                    if not 0 <= stage < b.pp:
                        continue
                    peer = mesh.rank_of(tp=c["tp"], cp=c["cp"], dp=c["dp"], pp=stage)
                    for op in ("Send", "Recv"):
                        self._emit(fh, name, f'{name}{{{labels[r]},{L.op.key}="{op}",'
                                             f'{L.group.key}="pp",{L.peer.key}="{peer}"}}', tails)
        for name in BEFORE_PER_OP:
            if self.read is None or name not in self.read:
                continue
            t = self._times(name)
            for op, group in b.collectives:
                for r in ranks:
                    self._emit(fh, name, f'{name}{{{labels[r]},{L.op.key}="{op}",'
                                         f'{L.group.key}="{group}"}}',
                               alignment(name, r, calls(group), t), counted=False)
        for name in _GROUP_COUNTERS:
            t = self._times(name)
            for group in b.aligned_groups:
                n = sum(calls(g) for op, g in b.collectives if g == group and op in SYMMETRIC)
                for r in ranks:
                    self._emit(fh, name, f'{name}{{{labels[r]},{L.group.key}="{group}"}}',
                               alignment(name, r, n, t))
        name = M.nccl_communicator_ranks.key
        t = self._times(name)
        for group, size in b.groups.items():
            for r in ranks:
                self._emit(fh, name, f'{name}{{{labels[r]},{L.group.key}="{group}"}}',
                           self._const(str(size), t))
        name = M.train_rank_gpu_info.key
        for r in ranks:
            self._emit(fh, name, f'{name}{{{labels[r]},{L.UUID.key}="{_uuid(r)}"}}',
                       self._const("1", times[name]))
        name = M.train_rank_mesh_info.key
        for r in ranks:
            place = "".join(f',{k}="{v}"' for k, v in b.sim.mesh.place(r).labels().items())
            self._emit(fh, name, f'{name}{{{labels[r]}{place}}}',
                       self._const("1", self._times(name)))

    def _gpus(self, fh, ranks: range, labels) -> None:
        """dcgm-exporter: one endpoint per host, one series per field and GPU."""
        b = self.b
        for name in _DCGM:
            t = self._times(name)
            for r in ranks:
                node = r // b.ranks_per_node
                lab = (f'{L.job.key}="dcgm-exporter",{L.instance.key}="{_host_ip(node)}:9400",'
                       f'{L.UUID.key}="{_uuid(r)}",{L.gpu.key}="{r % b.ranks_per_node}",'
                       f'device="nvidia{r % b.ranks_per_node}",modelName="NVIDIA H100 80GB HBM3",'
                       f'{L.Hostname.key}="{b.sim.labels(r)[L.node.key]}",'
                       f'{L.namespace.key}="training",{L.pod.key}="{_pod(b, r)}",'
                       f'{L.container.key}="trainer"')
                rng = _rng(b.seed, r, name)
                if name == M.DCGM_FI_PROF_SM_ACTIVE.key:
                    tails = self._floats((round(0.82 + rng.gauss(0, 0.02), 4) for _ in t), t)
                elif name in (M.DCGM_FI_PROF_NVLINK_TX_BYTES.key, M.DCGM_FI_PROF_NVLINK_RX_BYTES.key):
                    tails = self._floats((float(int(6e10 * (1 + rng.gauss(0, 0.05)))) for _ in t), t)
                elif name == M.DCGM_FI_DEV_GPU_TEMP.key:
                    tails = self._floats((float(round(64 + rng.gauss(0, 3))) for _ in t), t)
                elif name == M.DCGM_FI_DEV_POWER_USAGE.key:
                    tails = self._floats((round(640 + rng.gauss(0, 25), 1) for _ in t), t)
                elif name == M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL.key:
                    tails = self._const(str(r % 97 == 0 and 3 or 0), t)  # a few GPUs correct bits
                else:
                    tails = self._const("0", t)
                self._emit(fh, name, f"{name}{{{lab}}}", tails)

    def _hosts(self, fh, ranks: range) -> None:
        """node_exporter: InfiniBand ports and uname of every host whose GPUs are in ranks."""
        b, tl = self.b, self.tl
        nodes = sorted({r // b.ranks_per_node for r in ranks})
        for name in _IB:
            t = self._times(name)
            if name == M.node_infiniband_rate_bytes_per_second.key:  # 400 Gb/s HCAs
                for node in nodes:
                    for hca in range(_HCAS):
                        lab = (f'{L.job.key}="node",{L.instance.key}="{_host_ip(node)}:9100",'
                               f'{L.device.key}="mlx5_{hca}",{L.port.key}="1"')
                        self._emit(fh, name, f"{name}{{{lab}}}", self._const("50000000000", t))
                continue
            per_scrape = 12e9 * SCRAPE  # bytes per port per scrape while training
            idx = tl.index
            for node in nodes:
                for hca in range(_HCAS):
                    lab = (f'{L.job.key}="node",{L.instance.key}="{_host_ip(node)}:9100",'
                           f'{L.device.key}="mlx5_{hca}",{L.port.key}="1"')
                    base = (node * 131 + hca) * 1e12
                    tails = [f" {base + (idx[x] - idx[t[0]] + 1) * per_scrape:.0f} {x}\n" for x in t]
                    self._emit(fh, name, f"{name}{{{lab}}}", tails)
        name = M.node_uname_info.key
        t = self._times(name)
        for node in nodes:
            host = b.sim.labels(node * b.ranks_per_node)[L.node.key]
            lab = (f'{L.job.key}="node",{L.instance.key}="{_host_ip(node)}:9100",'
                   f'{L.nodename.key}="{host}",sysname="Linux",release="6.8.0-51-generic",'
                   f'machine="x86_64",domainname="(none)",version="#52-Ubuntu SMP"')
            self._emit(fh, name, f"{name}{{{lab}}}", self._const("1", t))

    def _sidecars(self, fh, ranks: range) -> None:
        """The NCCL sidecar of every host whose GPUs are in ``ranks``: arrival skew and tail
        of the aligned collectives (histograms by op and group) and its own counters."""
        b, tl = self.b, self.tl
        nodes = sorted({r // b.ranks_per_node for r in ranks})
        job = f'{L.job_id.key}="{b.job_id}"'

        def scrape(node: int) -> str:
            return f'{L.job.key}="nccl-exporter",{L.instance.key}="{_host_ip(node)}:9450",{job}'

        first = tl.index[self.rank_times[0]]
        for name in _SIDECAR_HISTS:
            les = bounds(name)
            for suffix in ("_bucket", "_count", "_sum"):
                t = self._times(name + suffix)
                keep = len(t)
                for node in nodes:
                    for op, group in b.collectives:
                        calls = 1 if group == "dp" else 2 * b.microbatches if group == "pp" else 64
                        mean = {"dp": 0.25, "tp": 0.0004, "pp": 0.0002}[group]
                        if name == M.nccl_collective_tail_seconds.key:
                            mean = mean / 2
                        base = f'{scrape(node)},{L.op.key}="{op}",{L.group.key}="{group}"'
                        if suffix == "_count":
                            self._emit(fh, name + suffix, f"{name}_count{{{base}}}",
                                       self._steps_tail(t, calls))
                        elif suffix == "_sum":
                            values = [tl.steps[first + k] * calls * mean
                                      for k in range(len(self.rank_times))]
                            self._emit(fh, name + suffix, f"{name}_sum{{{base}}}",
                                       self._floats(values[-keep:], t))
                        else:
                            shares = _shares(mean, mean * 0.1, les)
                            for le, share in zip(_les(les), shares):
                                tails = (self._steps_tail(t, calls) if share == 1.0
                                         else self._const("0", t) if share == 0.0
                                         else self._bucket_tails([share] * len(self.rank_times),
                                                                 calls, first, t))
                                self._emit(fh, name + suffix,
                                           f'{name}_bucket{{{base},le="{le}"}}', tails)
        for name in (*_SIDECAR_JOB, M.obsgen_nccl_alignment_incomplete_total.key):
            t = self._times(name)
            for node in nodes:
                if name == M.obsgen_nccl_alignment_incomplete_total.key:
                    for group in b.groups:
                        self._emit(fh, name, f'{name}{{{scrape(node)},{L.group.key}="{group}"}}',
                                   self._const("0", t))
                    continue
                value = {M.obsgen_nccl_files.key: str(b.ranks_per_node),
                         M.obsgen_nccl_alignment_pending.key: "3"}.get(name)
                tails = (self._const(value, t) if value else
                         self._steps_tail(t, b.ranks_per_node * len(b.collectives))
                         if name == M.obsgen_nccl_records_total.key else self._const("0", t))
                self._emit(fh, name, f"{name}{{{scrape(node)}}}", tails)

    def _kube(self, fh, ranks: range) -> None:
        """kube-state-metrics: one pod per rank (the reference document's rank-failure rule
        counts running pods against the rank count). kube_pod_labels carries the pod's job
        label as KSM writes it (``label_job_id``, what obsgen's GPU map reads) and as
        ``job_id`` too, the name the document's join expects (a relabelled copy)."""
        b = self.b
        ksm = f'{L.job.key}="kube-state-metrics",{L.instance.key}="10.96.0.10:8080"'
        t = self._times("kube_pod_status_phase")
        for r in ranks:
            pod = f'namespace="training",pod="{_pod(b, r)}",uid="{_uuid(r)[4:]}"'
            for phase in _PHASES:
                self._emit(fh, "kube_pod_status_phase",
                           f'kube_pod_status_phase{{{ksm},{pod},phase="{phase}"}}',
                           self._const("1" if phase == "Running" else "0", t))
        t = self._times("kube_pod_labels")
        for r in ranks:
            pod = f'namespace="training",pod="{_pod(b, r)}",uid="{_uuid(r)[4:]}"'
            self._emit(fh, "kube_pod_labels",
                       f'kube_pod_labels{{{ksm},{pod},{L.label_job_id.key}="{b.job_id}",'
                       f'{L.job_id.key}="{b.job_id}"}}', self._const("1", t))


def _rng(*key) -> random.Random:
    """A generator seeded from ``key`` the same way in every process (hash() is not)."""
    return random.Random(zlib.crc32(repr(key).encode()))


_SHARES: dict[tuple[float, float], tuple[float, ...]] = {}


def _shares(mean: float, sd: float, les: tuple[float, ...] = DEFAULT_BUCKETS) -> tuple[float, ...]:
    """Share of observations at or below each bucket bound, for a normal distribution of
    ``mean`` and ``sd`` (as obsgen.synth fills buckets)."""
    key = (mean, sd, les)
    s = _SHARES.get(key)
    if s is None:
        sd = max(sd, 1e-9)
        s = tuple(1.0 if math.isinf(le) else _clip(_phi((le - mean) / sd)) for le in les)
        if len(_SHARES) > 100_000:
            _SHARES.clear()
        _SHARES[key] = s
    return s


def _clip(x: float) -> float:
    """Shares within 1e-9 of 0 or 1 are exactly 0 or 1 (no observation rounds there)."""
    return 0.0 if x < 1e-9 else 1.0 if x > 1 - 1e-9 else x


_SHARD_BYTES = 5 * 2**30  # checkpoint bytes each rank writes (sharded checkpoint)


def _pod(b: "Bench", rank: int) -> str:
    return f"{b.job_id}-worker-{rank}"


def _uuid(rank: int) -> str:
    return f"GPU-{rank:08x}-5e1f-4c1a-9b3d-{rank * 2654435761 % 2**48:012x}"


def _host_ip(node: int) -> str:
    """The host's address, as obsgen.synth numbers its pods (generation 0)."""
    return f"10.0.{node // 250}.{node % 250 + 1}"


def shards(b: Bench, ranks_per_shard: int) -> list[range]:
    """Rank ranges of whole hosts, at most ``ranks_per_shard`` each."""
    size = max(b.ranks_per_node, ranks_per_shard // b.ranks_per_node * b.ranks_per_node)
    return [range(lo, min(lo + size, b.ranks)) for lo in range(0, b.ranks, size)]


def write(b: Bench, fh: IO[str], ranks: range | None = None, job: bool = True,
          read: frozenset[str] | None = None) -> Writer:
    """Write one OpenMetrics file: the series of ``ranks`` (default all) and, with
    ``job``, the job-level series; ``# EOF`` last."""
    w = Writer(b, read)
    if ranks is None:
        ranks = range(b.ranks)
    if len(ranks):
        w.write_ranks(fh, ranks)
    if job:
        w.write_job(fh)
    fh.write("# EOF\n")
    return w


def emitters(b: Bench) -> dict[str, float]:
    """Series per rank by who publishes them."""
    from obsgen import contract

    out: dict[str, float] = {}
    for name, n in b.series().items():
        if name.startswith("kube_"):
            who = "kube-state-metrics (pod phase and labels, one pod per rank)"
        else:
            base = next((m for m in contract.METRICS.values()
                         if name in (m.key, m.key + "_bucket", m.key + "_sum", m.key + "_count")))
            who = {contract.DCGM: "dcgm-exporter", contract.DCGM_PROF: "dcgm-exporter",
                   contract.NODE_EXPORTER: "node_exporter (per host, 1/8 per rank)"}.get(
                base.emitter, "the training process (obsgen.instrument / NCCL sidecar)")
        out[who] = out.get(who, 0) + n
    return out
