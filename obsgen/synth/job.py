"""A synthetic job's shape and settings (``Job``), its NCCL sidecar (``NcclExporter``), and
what one scrape returns (``Scrape``)."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Iterator

STALE = "stale"

if TYPE_CHECKING:
    from .sim import _Sim


@dataclass(frozen=True)
class NcclExporter:
    """``obsgen nccl-exporter`` on every node, aligning each ``group`` communicator's ranks
    (the TP groups with tensor parallelism, each node's ranks without) in
    ``aligned_per_step`` collectives of each step."""
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
    # The rest of the mesh (obsgen.mesh, Megatron's order tp-cp-ep-dp-pp); dp is what
    # ranks / (tp * cp * pp) leaves. A TP group (and, with ep > 1, the TP groups of an EP
    # group) runs in lockstep: per-layer collectives make every member wait inside its
    # compute for the slowest. With pp > 1 a pipeline runs at its slowest stage's pace:
    # the other stages wait in recv inside their compute.
    tp: int = 1
    cp: int = 1
    ep: int = 1
    # Transfer time of the per-layer TP/EP collectives inside compute, as a share of a
    # healthy rank's compute (with tp or ep > 1 only): a wait even the slowest member has.
    tp_comm_share: float = 0.1
    # Export train_rank_mesh_info and train_compute_wait_seconds, as a job instrumented by
    # obsgen.instrument with its mesh declared and patch_distributed on does.
    reports_mesh: bool = False
    # With reports_mesh, export the wait too (False: a job that declares its mesh but times
    # no collective, e.g. without patch_distributed).
    reports_wait: bool = True
    microbatches: int = 8
    stage_compute: tuple[float, ...] = ()  # relative compute of each stage (default equal)
    emit_pipeline: bool | None = None  # export pipeline_stage_seconds (default: when pp > 1)
    step_seconds: float = 1.5  # healthy step wall time
    compute_share: float = 0.8  # share of the healthy step spent in local compute
    noise: float = 0.03  # relative per-step compute noise
    rank_spread: float = 0.01  # sigma of the ranks' persistent speed differences (cut at 2 sigma)
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
    # Export train_nonfinite beside the norm and loss, as obsgen.instrument does (False: a
    # source that exports the raw gauges only, e.g. Megatron through NeMo Lens)
    nonfinite_gauge: bool = True
    # The store drops NaN samples at ingestion, as VictoriaMetrics does: a NaN gauge leaves
    # a gap (no staleness marker: the series is still in every scrape)
    drops_nan: bool = False
    # The exporter drops a non-finite gauge value and serves the last finite one again, as
    # the OpenTelemetry Python SDK does ("Set amount nan is not finite ... ignoring")
    sdk_drops_nan: bool = False
    start: float = 0.0
    init: float = 0.0  # seconds after start before the first step (metrics already served)
    stop: float = math.inf  # the job (all ranks) exits at this time without completing
    subnet: int = 0  # keeps the pod addresses of several jobs apart
    scrape: float = 30.0
    scrape_job: str = "training"
    seed: int = 1
    faults: tuple = ()
    nccl: NcclExporter | None = None  # serve the NCCL sidecar's series too
    # Publish histograms' _bucket series (False: _sum and _count only, for a reader of
    # those alone; the buckets cost most of a simulation)
    buckets: bool = True

    def run(self, until: float) -> Iterator["Scrape"]:
        from .sim import _Sim
        return _Sim(self).run(until)

    def live(self) -> "_Sim":
        """A simulation to drive scrape by scrape: ``sim.scrape_at(t)`` with increasing t."""
        from .sim import _Sim
        return _Sim(self)

    @property
    def exports_wait(self) -> bool:
        """Its ranks export train_compute_wait_seconds: they declare their mesh and time
        the collectives inside compute."""
        return self.reports_mesh and self.reports_wait

    def physics(self) -> "_Sim":
        """The job's model without running it: rank speeds (``compute_mean``), stages
        (``stage_of``), the bubble, faults and the scrape labels of a rank (``labels``).
        For generators that stream far more ranks than ``run`` can hold, e.g.
        benchmarks/stream.py."""
        from .sim import _Sim
        return _Sim(self)

    def compute_means(self, t: float) -> list[float]:
        """Noise-free mean busy time of every rank at ``t`` (its own work, no restart
        considered): the ground truth the straggler rules estimate."""
        from .sim import _Sim
        sim = _Sim(self)
        return [sim.compute_mean(r, t) for r in range(self.ranks)]

    def observed_computes(self, t: float) -> list[float]:
        """Noise-free mean compute time every rank reports at ``t``: its busy time plus
        what it waits for inside compute (its lockstep peers, its pipeline)."""
        from .sim import _Sim
        sim = _Sim(self)
        return sim.computes([sim.compute_mean(r, t) for r in range(self.ranks)])


@dataclass
class Scrape:
    """Samples of one scrape time: series labels (sorted tuple of pairs, with __name__)
    to a float, or to STALE for a series that vanished since the last scrape."""
    time: float
    samples: dict[tuple, float | str] = field(default_factory=dict)


def elastic(job: Job, at: float, gap: float, ranks: int) -> list[Job]:
    """An elastic resize: ``job`` stops at ``at`` and comes back ``gap`` seconds later with
    ``ranks`` ranks (the same TP, CP, EP and PP sizes, fewer or more DP replicas), as
    torchrun's elastic agent restarts it: new processes with new addresses, ranks numbered
    0 .. ranks-1 again, each at its place in the new mesh, on the first hosts; its faults
    stay with the first run. Both runs carry the job's ``job_id``; scrape them together."""
    return [replace(job, stop=at),
            replace(job, ranks=ranks, start=at + gap, subnet=job.subnet + 1, seed=job.seed + 1,
                    faults=())]

