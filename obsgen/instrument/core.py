"""``Telemetry``: one rank's view of the training loop, published as the metric contract.

What a loop reports, and when (see the package docstring for the whole loop):

* ``with tel.step():`` wall time of one step, ``train_step_seconds``; the step count.
  Steps tile the timeline: a step runs from the end of the previous one (data loading,
  logging, whatever the loop does between steps included; checkpoints excluded) to its
  own end, so in a synchronous job every rank reports the same step time.
* ``with tel.compute():`` local forward+backward up to the gradient collective,
  ``train_compute_seconds``. The compute of a step ends at the first *blocking*
  collective of a gradient group (``dp``) issued inside the block, else at the last
  *gradient-ready* mark (a DDP comm hook sets one per bucket, as the bucket is handed to
  the all-reduce), else when the block exits. So a rank that waits for a slower peer does
  not count the wait as its own compute: the slow rank shows the most compute and the
  least collective time.
  Where the compute ended at a gradient-ready mark or a blocking collective, the rest of
  the block is communication the compute did not hide: ``train_exposed_comm_seconds``.
  Collectives of other groups (tp, cp, ep) and pipeline send/recv inside the compute are
  time the rank waited, not computed: ``train_compute_wait_seconds`` (their union within
  the compute). A peer that waits for a slow GPU of its TP group inside the per-layer
  all-reduce shows that wait there, so its busy time (compute minus wait) stays its own.
* ``tel.mesh(place)``: the rank's place in the parallel mesh (``obsgen.mesh.Place``),
  ``train_rank_mesh_info``; ``Telemetry(mesh=...)`` before start, or
  ``tel.torch.mesh_from_megatron()``.
* ``with tel.phase("forward"):`` pipeline-stage busy time, summed per step and phase,
  ``pipeline_stage_seconds``.
* ``with tel.collective(op, group, nbytes):`` time and bytes of a collective,
  ``nccl_collective_duration_seconds`` and ``nccl_collective_bytes_total`` (the torch
  helpers call it for you).
* ``tel.loss(x)``, ``tel.grad_norm(x)``: gauges of the last step (NaN and Inf kept: the
  NonFinite alert reads them).
* ``with tel.checkpoint(nbytes):`` a checkpoint: count, seconds, bytes this rank wrote
  (with ``checkpoint_bytes=True``), and the completion time. Before the first, the timestamp is the job's start, or after
  a restart the time of the checkpoint it resumed from (``resumed_from``), so a restart
  is no checkpoint progress. With ``failed_at`` (when the previous processes last
  completed a step), rank 0's first step reports ``job_recovery_seconds`` and
  ``job_checkpoint_age_at_failure_seconds``.
* ``tel.expert_tokens(expert, n)``: tokens routed to an MoE expert this rank hosts;
  ``tel.gpu_info(uuid, cuda_device)``: the GPU the rank runs on (``tel.torch.use_cuda_events()`` sets
  it), which joins dcgm-exporter's series to the job's ranks.

Every counter and histogram series exists from ``start()`` with 0 (rules read increases
from process start), and the checkpoint timestamp starts at the job's start time.

The loop never calls prometheus_client itself: updates are queued (a deque append) and
applied when Prometheus scrapes, just before the registry is read (``flush``), or, for
ranks that do not serve (multiprocess mode), once a second at a step end. That keeps the
per-step cost to a few appends, under 1% of a 50 ms step (benchmarks/).
"""
from __future__ import annotations

import collections
import math
import os
import socket
import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple

from ..contract import L, M
from ..mesh import Place
from . import metrics as metrics_mod
from . import serve
from .clock import WallClock

GRADIENT_GROUPS = ("dp",)
# (op, group) series created at start: the gradient all-reduce every data-parallel job has.
EXPECTED_COLLECTIVES = (("AllReduce", "dp"),)
PHASES = ("forward", "backward")


class Telemetry:
    def __init__(self, job_id: str, rank: int = 0, world_size: int = 1, *,
                 local_rank: int | None = None, stage: int = 0, pp: int = 1,
                 microbatches: int = 1, planned_steps: int = 0, start_step: int = 0,
                 planned_end: float | None = None, resumed_from: float | None = None,
                 checkpoint_bytes: bool = False, failed_at: float | None = None,
                 run_id: int = 0, node: str | None = None, start_time: float | None = None,
                 port_base: int = 9400, addr: str = "0.0.0.0", multiprocess_dir: str | None = None,
                 sd_dir: str | None = None, advertise: str | None = None, clock=None,
                 gradient_groups: tuple[str, ...] = GRADIENT_GROUPS,
                 expected_collectives: tuple[tuple[str, str], ...] = EXPECTED_COLLECTIVES,
                 created_series: bool = False, mesh: Place | None = None):
        if not job_id:
            raise ValueError("job_id must be a non-empty string")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside 0 .. world_size-1 ({world_size})")
        self.job_id, self.rank, self.world_size = str(job_id), int(rank), int(world_size)
        self.local_rank = self.rank if local_rank is None else int(local_rank)
        self.stage, self.pp, self.microbatches = int(stage), int(pp), int(microbatches)
        self.place: Place | None = None  # the rank's place in the parallel mesh, once known
        if mesh is not None:
            if stage and mesh.stage != stage:
                raise ValueError(f"stage {stage} differs from the mesh's stage {mesh.stage}")
            self.stage, self.place = mesh.stage, mesh
        self.planned_steps, self.current_step, self.run_id = planned_steps, start_step, run_id
        self.planned_end = planned_end  # unix seconds the run should have finished by
        self.resumed_from = resumed_from  # unix time of the checkpoint a restart resumed from
        # publish checkpoint_bytes_written_total (pass nbytes to checkpoint()); off, the series
        # is absent, so Train_CheckpointStorage_Slow has nothing to judge rather than 0 B/s
        self.checkpoint_bytes = checkpoint_bytes
        # after a restart: unix time of the previous processes' last completed step (the
        # launcher knows it); rank 0 then reports recovery time and the work lost
        self.failed_at = failed_at
        # the host name every exporter of the host must agree on: $NODE_NAME as the NCCL
        # sidecar and dcgm-exporter read it (on Kubernetes the node name from the downward
        # API; a pod's host name is the pod's), else the host name
        self.node = node or os.environ.get("NODE_NAME") or socket.gethostname()
        self.start_time = time.time() if start_time is None else start_time
        self.port_base, self.addr, self.advertise = port_base, addr, advertise
        self.multiprocess_dir, self.sd_dir = multiprocess_dir, sd_dir
        self.clock = clock or WallClock()
        self.gradient_groups = tuple(gradient_groups)
        self.expected_collectives = tuple(expected_collectives)
        self.created_series = created_series
        self.endpoint: serve.Endpoint | None = None
        self.m = None
        self._step_end: float | None = None  # where the next step's wall time starts
        # [start, first blocking, last ready, waits] of the open compute block; waits are
        # (start, end) of its non-gradient collectives and p2p ops
        self._compute: list | None = None
        self._computes: list[tuple] = []  # (start, end) marks of this step's compute
        self._exposed: list[tuple] = []  # (compute end, block exit): unhidden communication
        self._waits: list[tuple] = []  # (compute start, compute end, waits) of this step
        self._stages: dict[str, list[tuple]] = {}  # phase -> (start, end) marks of this step
        self._children: dict[tuple, _Series] = {}
        self._pending: collections.deque = collections.deque()  # (update, value) to apply
        self._gauges: dict = {}  # prometheus_client gauge child -> value to set
        self._last_flush = time.monotonic()
        self.flush_interval = 1.0  # seconds, for ranks whose values nobody scrapes directly
        self._watch = serve.ScrapeWatch(self.flush)

    # lifecycle ------------------------------------------------------------------------
    @classmethod
    def from_env(cls, job_id: str | None = None, **kw) -> "Telemetry":
        """Rank, local rank, world size and restart count from the launcher's environment
        (torchrun, torch.distributed.launch, Slurm); endpoint settings from OBSGEN_*."""
        env = os.environ
        def first(*names, default=None):
            return next((env[n] for n in names if env.get(n) not in (None, "")), default)
        job = job_id or first("OBSGEN_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")
        if not job:
            raise ValueError("no job id: pass job_id or set OBSGEN_JOB_ID")
        kw.setdefault("rank", int(first("RANK", "SLURM_PROCID", default=0)))
        kw.setdefault("world_size", int(first("WORLD_SIZE", "SLURM_NTASKS", default=1)))
        kw.setdefault("local_rank", int(first("LOCAL_RANK", "SLURM_LOCALID", default=kw["rank"])))
        kw.setdefault("run_id", int(first("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT",
                                          default=0)))
        if first("OBSGEN_PORT_BASE") is not None:
            kw.setdefault("port_base", int(env["OBSGEN_PORT_BASE"]))
        for key, name in (("multiprocess_dir", "OBSGEN_MULTIPROC_DIR"), ("sd_dir", "OBSGEN_SD_DIR"),
                          ("addr", "OBSGEN_ADDR"), ("advertise", "OBSGEN_ADVERTISE")):
            if first(name) is not None:
                kw.setdefault(key, env[name])
        return cls(job, **kw)

    def start(self) -> "Telemetry":
        """Create every series, set the static gauges and start serving."""
        if self.multiprocess_dir:
            serve.enable_multiprocess(self.multiprocess_dir)
        import prometheus_client as pc

        if not self.created_series:
            pc.disable_created_metrics()  # obsgen reads no *_created series: fewer series
        registry = pc.CollectorRegistry(auto_describe=True)
        registry.register(self._watch)  # first: flushes queued updates before a scrape reads
        self.m = metrics_mod.build(registry)
        self._init_series()
        self.flush()
        self._hot = (self._labels(M.train_step_seconds), self._labels(M.train_compute_seconds),
                     self._labels(M.train_current_step))
        self._exposed_series = self._labels(M.train_exposed_comm_seconds)
        self._wait_series = self._labels(M.train_compute_wait_seconds)
        if self.place is not None:
            self._labels(M.train_rank_mesh_info, **self.place.labels()).set(1)
        serving = not self.multiprocess_dir or self.local_rank == 0
        if serving:
            port = self.port_base + (0 if self.multiprocess_dir or self.port_base == 0
                                     else self.local_rank)
            server = serve.serve(registry, port, self.addr, self.multiprocess_dir, self._watch)
            host = self.advertise or serve.advertised_host(self.addr)
            self.endpoint = serve.Endpoint(host, server.server_port, server)
            if self.sd_dir:
                self.endpoint.sd_file = serve.write_sd(self.sd_dir, f"{self.job_id}-{self.rank}",
                                                       self.endpoint.address)
        return self

    def close(self, linger: float = 30.0) -> None:
        """Stop serving (and, in multiprocess mode, drop this process's live gauges).

        A job that reached its planned steps first waits up to ``linger`` seconds for one
        more scrape, so Prometheus sees the final step and knows the job completed rather
        than failed (Train_RankFailed stays quiet for completed jobs only)."""
        self.flush()
        completed = 0 < self.planned_steps <= self.current_step
        if self.endpoint is not None and completed and linger > 0:
            seen, end = self._watch.scrapes, time.monotonic() + linger
            while self._watch.scrapes <= seen and time.monotonic() < end:
                time.sleep(0.05)
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None
        if self.multiprocess_dir:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), self.multiprocess_dir)

    def __enter__(self) -> "Telemetry":
        return self.start() if self.m is None else self

    def __exit__(self, *exc) -> None:
        self.close(linger=0 if exc[0] else 30.0)

    @property
    def torch(self):
        """The torch helpers (``obsgen.instrument.torch_hooks``); imports torch on first use."""
        helpers = self.__dict__.get("_torch_helpers")
        if helpers is None:
            from .torch_hooks import TorchTelemetry

            helpers = self.__dict__["_torch_helpers"] = TorchTelemetry(self)
        return helpers

    # series ---------------------------------------------------------------------------
    def _labels(self, metric, **extra) -> "_Series":
        """The series of ``metric`` with this rank's labels (created now, at 0)."""
        key = (metric.key, *sorted(extra.items()))
        series = self._children.get(key)
        if series is None:
            values = {L.job_id.key: self.job_id, L.rank.key: str(self.rank),
                      L.node.key: self.node, L.stage.key: str(self.stage), **extra}
            names = metrics_mod.labelnames(metric)
            child = self.m[metric].labels(**{n: values[n] for n in names})
            series = self._children[key] = _Series(child, self._pending, self._gauges)
        return series

    def flush(self) -> None:
        """Apply the queued updates to the prometheus_client metrics."""
        self._last_flush = time.monotonic()
        pending = self._pending
        while True:
            try:
                update, value = pending.popleft()
            except IndexError:
                break
            update(value)
        gauges = self._gauges
        for child in list(gauges):
            value = gauges.pop(child, None)
            if value is not None:
                child.set(value)

    def _init_series(self) -> None:
        for metric in (M.train_step_seconds, M.train_compute_seconds, M.train_exposed_comm_seconds,
                       M.train_compute_wait_seconds,
                       M.train_checkpoint_total, M.train_checkpoint_seconds_total,
                       M.nccl_link_recovery_total,
                       *([M.checkpoint_bytes_written_total] if self.checkpoint_bytes else [])):
            self._labels(metric)
        for op, group in self.expected_collectives:
            self._labels(M.nccl_collective_duration_seconds, op=op, group=group)
            self._labels(M.nccl_collective_bytes_total, op=op, group=group)
        if self.pp > 1:
            for phase in PHASES:
                self._labels(M.pipeline_stage_seconds, phase=phase)
        for metric, value in ((M.train_world_size, self.world_size),
                              (M.train_current_step, self.current_step),
                              (M.train_planned_steps, self.planned_steps),
                              (M.train_checkpoint_timestamp_seconds,
                               self.start_time if self.resumed_from is None else self.resumed_from),
                              (M.train_run_id, self.run_id),
                              (M.train_pipeline_stages, self.pp),
                              (M.train_microbatches_per_step, self.microbatches),
                              *([(M.train_planned_end_timestamp_seconds, self.planned_end)]
                                if self.planned_end is not None else [])):
            self._labels(metric).set(value)

    # the training loop ----------------------------------------------------------------
    @contextmanager
    def step(self, index: int | None = None) -> Iterator[None]:
        """One training step. ``index`` is the step number once it completes (default:
        the previous one plus 1; pass it after resuming from a checkpoint)."""
        now = time.perf_counter()
        start = self._step_end if self._step_end is not None else now
        self._computes, self._exposed, self._stages, self._waits = [], [], {}, []
        yield
        self._step_end = end = time.perf_counter()
        step, compute, current = self._hot
        step.observe(end - start)
        if self._computes:
            self.clock.measure(self._computes, compute.observe)
            self.clock.measure(self._exposed, self._exposed_series.observe)
            self.clock.measure_within(self._waits, self._wait_series.observe)
        for phase, pairs in self._stages.items():
            self.clock.measure(pairs, self._labels(M.pipeline_stage_seconds, phase=phase).observe)
        self.current_step = self.current_step + 1 if index is None else index
        current.set(self.current_step)
        if self.failed_at is not None and self.rank == 0:
            self._labels(M.job_recovery_seconds).set(time.time() - self.failed_at)
            if self.resumed_from is not None:
                self._labels(M.job_checkpoint_age_at_failure_seconds).set(
                    self.failed_at - self.resumed_from)
            self.failed_at = None  # the first completed step after the restart only
        self.clock.poll()
        if (len(self._pending) > 10_000 or self.endpoint is None
                and time.monotonic() - self._last_flush > self.flush_interval):
            self.flush()

    @contextmanager
    def compute(self) -> Iterator[None]:
        """Local forward+backward of the rank, up to the gradient collective."""
        block = self._compute = [self.clock.mark(), None, None, []]
        try:
            yield
        finally:
            self._compute = None
            start, blocking, ready, waits = block
            end = blocking if blocking is not None else ready
            if end is None:
                end = self.clock.mark()
            else:  # from there to the block's end the rank waited for communication
                self._exposed.append((end, self.clock.mark()))
            self._computes.append((start, end))
            self._waits.append((start, end, waits))

    def gradient_ready(self) -> None:
        """A gradient bucket is complete and handed to its collective (DDP comm hooks call
        this); the rank's compute for the step ends at the last such mark."""
        block = self._compute
        if block is not None:
            block[2] = self.clock.mark()

    @contextmanager
    def phase(self, phase: str) -> Iterator[None]:
        """Busy time of this rank's pipeline stage (phase: forward or backward)."""
        start = self.clock.mark()
        try:
            yield
        finally:
            self._stages.setdefault(phase, []).append((start, self.clock.mark()))

    @contextmanager
    def collective(self, op: str, group: str, nbytes: int, blocking: bool = True) -> Iterator[None]:
        """A blocking collective: its time (waiting for peers plus transfer) and bytes."""
        start = self.clock.mark()
        block = self._compute
        if blocking and group in self.gradient_groups and block is not None:
            if block[1] is None:
                block[1] = start
        try:
            yield
        finally:
            end = self.clock.mark()
            self.record_collective(op, group, nbytes, start, end)
            if block is not None and group not in self.gradient_groups:
                block[3].append((start, end))  # the compute block waits for it

    def collective_started(self, op: str, group: str):
        """Mark the start of an asynchronous collective; pass what it returns to
        ``record_collective`` when it completes. One of a non-gradient group (TP, CP, EP,
        PP send/recv) started inside a compute block counts as the block's wait while it is
        in flight."""
        if group in self.gradient_groups:
            self.gradient_ready()
            return self.clock.mark()
        return _Started(self.clock.mark(), self._compute)

    def record_collective(self, op: str, group: str, nbytes: int, start, end) -> None:
        if isinstance(start, _Started):
            start, block = start
            if block is not None:
                block[3].append((start, end))
        self._labels(M.nccl_collective_bytes_total, op=op, group=group).inc(max(nbytes, 0))
        hist = self._labels(M.nccl_collective_duration_seconds, op=op, group=group)
        self.clock.measure([(start, end)], hist.observe)

    def loss(self, value: float) -> None:
        self._signal(M.train_loss, "loss", _float(value))

    def grad_norm(self, value: float) -> None:
        self._signal(M.train_grad_norm, "grad_norm", _float(value))

    def _signal(self, metric, signal: str, value: float) -> None:
        """The value itself (NaN and Inf kept) and train_nonfinite, the 0/1 a store that
        drops NaN samples keeps."""
        self._labels(metric).set(value)
        flag = self._labels(M.train_nonfinite, **{L.signal.key: signal})
        flag.set(0.0 if math.isfinite(value) else 1.0)

    def expert_tokens(self, expert: int | str, tokens: int) -> None:
        """Tokens routed to an MoE expert hosted by this rank (summed over layers)."""
        self._labels(M.moe_expert_tokens_total, expert=str(expert)).inc(tokens)

    def link_recovered(self, count: int = 1) -> None:
        """Count link failures NCCL recovered from without aborting (NCCL 2.27+ resilient
        collectives). NCCL publishes no counter of these: call this where the job learns of
        one, e.g. from NCCL's warnings; Train_NCCL_LinkRecovery reads the count."""
        self._labels(M.nccl_link_recovery_total).inc(max(count, 0))

    def mesh(self, place: Place) -> None:
        """Name this rank's place in the parallel mesh (``train_rank_mesh_info``); see
        ``obsgen.mesh`` (``Mesh(...).place(rank)`` from the sizes) and
        ``tel.torch.mesh_from_megatron()`` / ``mesh_from_groups()``. Its stage is the
        rank's stage: before ``start()`` it sets it, after it must agree."""
        if self.place is not None and place != self.place:
            raise ValueError(f"the mesh place is already {self.place}, not {place}")
        if self.m is not None and place.stage != self.stage:
            raise ValueError(f"the mesh's stage {place.stage} differs from this rank's stage "
                             f"{self.stage}, with which its series were created; pass the "
                             "mesh before start()")
        self.stage, self.place = place.stage, place
        if self.m is not None:
            self._labels(M.train_rank_mesh_info, **place.labels()).set(1)

    def gpu_info(self, uuid: str, cuda_device: int | None = None) -> None:
        """Name the GPU this rank runs on (``GPU-...``, as dcgm-exporter's UUID label);
        with ``cuda_device``, the CUDA ordinal the process set, also the process's host
        name and ``GPU<ordinal>``: what the NCCL Inspector's textfile labels its series
        with (node, gpu), which the nccl-inspector preset maps to this rank."""
        known = cuda_device is not None
        self._labels(M.train_rank_gpu_info, UUID=uuid,
                     **{L.process_host.key: socket.gethostname() if known else "",
                        L.cuda_device.key: f"GPU{cuda_device}" if known else ""}).set(1)

    @contextmanager
    def checkpoint(self, nbytes: int = 0) -> Iterator[None]:
        """A checkpoint save of ``nbytes`` by this rank; counted only when the block
        completes without an error."""
        start = time.perf_counter()
        yield
        self._labels(M.train_checkpoint_total).inc()
        if self.checkpoint_bytes:
            self._labels(M.checkpoint_bytes_written_total).inc(max(nbytes, 0))
        self._labels(M.train_checkpoint_seconds_total).inc(time.perf_counter() - start)
        self._labels(M.train_checkpoint_timestamp_seconds).set(time.time())
        if self._step_end is not None:
            self._step_end = time.perf_counter()  # the checkpoint is not training time


class _Started(NamedTuple):
    """The start of an asynchronous collective, and the compute block open at it."""
    mark: object
    block: list | None


class _Series:
    """A prometheus_client child whose updates wait in the Telemetry's queue."""
    __slots__ = ("child", "_pending", "_gauges")

    def __init__(self, child, pending, gauges):
        self.child, self._pending, self._gauges = child, pending, gauges

    def observe(self, value: float) -> None:
        self._pending.append((self.child.observe, value))

    def inc(self, value: float = 1.0) -> None:
        self._pending.append((self.child.inc, value))

    def set(self, value: float) -> None:
        self._gauges[self.child] = value


def _float(value) -> float:
    """A Python float from a float, a numpy scalar or a 0-d tensor (which syncs a GPU)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
