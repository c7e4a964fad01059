"""``obsgen plan``: the series a job of N ranks will create, per metric and in total, so a
platform team can size Prometheus before the run.

Each contract metric's scope follows from its labels: with ``rank`` it is per rank, with
a GPU ``UUID`` (and no rank) per GPU, with an HCA ``device`` or ``nodename`` per host;
``ALERTS`` is left out. Labels beyond the scope fan out by the job's shape (pipeline
phases, collectives per parallel group, local experts); a histogram is its buckets
(15 by default, 20 for the NCCL sidecar's times) + _sum + _count series per label set. Recorded series count per rank, per
stage or per job from their labels.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from . import config, contract
from .config import ONE_PROMETHEUS
from .contract import HISTOGRAM, L, M, R

BYTES_PER_SERIES = 4096  # rough Prometheus head cost of an active series (memory)


@dataclass(frozen=True)
class Shape:
    ranks: int
    pp: int = 1
    tp: int = 1
    ep: int = 1
    experts: int = 0  # MoE experts in total (0: dense model)
    gpus_per_host: int = 8
    hcas_per_host: int = 8
    all_ranks_report_loss: bool = False  # grad norm and loss from every rank, or one
    gpu_info: bool = True  # ranks name their GPU (train_rank_gpu_info), as GPU jobs do
    mesh_info: bool = True  # ranks name their place in the mesh (train_rank_mesh_info)
    planned_end: bool = False  # the launch config passes a deadline
    checkpoint_bytes: bool = False  # the loop reports checkpoint bytes (instrument opt-in)
    sidecar: bool = True  # the NCCL sidecar runs next to the ranks

    @property
    def hosts(self) -> int:
        return math.ceil(self.ranks / self.gpus_per_host)

    def collectives(self) -> int:
        """(op, group) pairs a rank takes part in: DP all-reduce; TP all-reduce, all-gather,
        reduce-scatter; PP send and recv; EP all-to-all."""
        return 1 + 3 * (self.tp > 1) + 2 * (self.pp > 1) + (self.ep > 1)

    def groups(self) -> int:
        """Parallel groups (communicators) a rank is in: DP, and TP, PP, EP when used."""
        return 1 + (self.tp > 1) + (self.pp > 1) + (self.ep > 1)

    def aligned_groups(self) -> int:
        """Groups whose collectives the sidecar aligns across ranks (those of all-reduce,
        all-gather and reduce-scatter, which complete together): DP, and TP when used."""
        return 1 + (self.tp > 1)


@dataclass(frozen=True)
class Line:
    name: str
    type: str
    scope: str  # rank, gpu, host, job, stage
    per_unit: int  # series per rank (or gpu, host, job, stage)
    total: int
    source: str = ""  # training process, NCCL sidecar, exporters, rules


TRAINING = "training process"
SOURCES = {contract.INSTRUMENT: TRAINING, contract.NCCL_SIDECAR: TRAINING,
           contract.INSTRUMENT_RESTART: TRAINING, contract.NCCL_EXPORTER: "NCCL sidecar"}


def _optional(m: contract.Metric, s: Shape) -> bool:
    """Series that exist only when the job uses them."""
    return {M.train_rank_gpu_info.key: s.gpu_info, M.train_rank_mesh_info.key: s.mesh_info,
            M.train_planned_end_timestamp_seconds.key: s.planned_end,
            M.checkpoint_bytes_written_total.key: s.checkpoint_bytes}.get(m.key, True)


def _fan_out(m: contract.Metric, s: Shape) -> int:
    if m is M.pipeline_stage_seconds and s.pp == 1:
        return 0  # a job without pipeline parallelism has no stage timings
    if m is M.moe_expert_tokens_total:
        return s.experts // s.ep if s.experts else 0
    n = 1
    if L.phase.key in m.labels or L.signal.key in m.labels:
        n *= 2  # forward/backward; loss/grad_norm
    if L.op.key in m.labels:
        n *= s.collectives()
    elif m in (M.nccl_collective_aligned_total, M.nccl_collective_last_arrival_total):
        n *= s.aligned_groups()
    elif L.group.key in m.labels:
        n *= s.groups()
    if L.device.key in m.labels:
        n *= s.hcas_per_host
    return n


def _scope(m: contract.Metric) -> str | None:
    if m is M.ALERTS:
        return None
    if L.rank.key in m.labels:
        return "rank"
    if L.UUID.key in m.labels:
        return "gpu"
    return "host"


def plan(s: Shape, windows: dict[str, str] | None = None,
         recorded: set[str] | None = None) -> list[Line]:
    """Series of a job of shape ``s``: what it scrapes, and the records of ``recorded``
    (the names the config's families record; default: the default config's)."""
    if recorded is None:
        from .registry import build
        recorded = {r.name for f in build(config.defaults()) for r in f.records}
    units = {"rank": s.ranks, "gpu": s.ranks, "host": s.hosts, "job": 1, "stage": s.pp}
    lines = []
    for m in contract.METRICS.values():
        scope = _scope(m)
        if scope is None:
            continue
        source = SOURCES.get(m.emitter, "exporters")
        if not _optional(m, s) or (source == "NCCL sidecar" and not s.sidecar):
            continue
        if m.emitter == contract.INSPECTOR_TEXTFILE:
            continue  # the nccl-inspector preset's source: not modelled (per communicator in use)
        if L.peer.key in m.labels:  # per link between neighbouring stages of a pipeline,
            n = 4 * (s.pp - 1) * (s.ranks // s.pp)  # each end's Send and Recv (NCCL 2.30+)
            lines.append(Line(m.key, m.type, "job", n, n, source))
            continue
        per = _fan_out(m, s) * (_buckets(m) + 2 if m.type == HISTOGRAM else 1)
        if m in (M.job_recovery_seconds, M.job_checkpoint_age_at_failure_seconds) or (
                m in (M.train_grad_norm, M.train_loss, M.train_nonfinite)
                and not s.all_ranks_report_loss):
            lines.append(Line(m.key, m.type, "job", per, per, source))
            continue
        lines.append(Line(m.key, m.type, scope, per, per * units[scope], source))
    for r in contract.RECORDED.values():
        name = r.name.format(**(windows or config.DEFAULTS["windows"]))
        if name not in recorded:
            continue
        scope = ("rank" if L.rank.key in r.labels else "stage" if L.stage.key in r.labels
                 else "gpu" if L.UUID.key in r.labels else "host" if L.node.key in r.labels
                 else "job")
        # the late-arrival ratio: one series per rank and aligned group
        per = s.aligned_groups() if L.group.key in r.labels else 1
        if r in (R.rank_place, R.mesh_combos, R.mesh_positions, R.tp_pipeline) and not s.mesh_info:
            continue  # the mesh facts come from the mesh info
        if r is R.tp_pipeline:  # one per TP group
            per = s.ranks // s.tp
        if r is R.mesh_positions:  # each TP, CP and EP position of the stage (CP not modelled: 1)
            per = s.tp + 1 + s.ep
        if r is R.mesh_combos:  # each combination of those positions in the stage
            per = s.tp * s.ep
        lines.append(Line(name, "recorded", scope, per, per * units[scope], "rules"))
    return lines


def per_rank(lines: list[Line], source: str) -> int:
    """Series one rank's ``source`` serves (job-level series such as a one-rank loss
    excluded)."""
    return sum(l.per_unit for l in lines if l.scope == "rank" and l.source == source)


def unread_buckets(lines: list[Line]) -> int:
    """Histogram bucket series of the plan: no obsgen rule or panel reads one (means come
    from _sum and _count), so a scrape may drop them
    (examples/prometheus/drop-unread-buckets.yaml)."""
    out = 0
    for l in lines:
        if l.type == HISTOGRAM:
            n = _buckets(contract.METRICS[l.name])
            out += l.total * n // (n + 2)
    return out


def _buckets(m: contract.Metric) -> int:
    """Bucket series per label set of a histogram (beside its _sum and _count)."""
    return len(m.buckets or contract.DEFAULT_BUCKETS)


LARGE = 4096  # ranks from which the plan points at the sizing guide's rule settings


def report(s: Shape, windows: dict[str, str] | None = None,
           recorded: set[str] | None = None) -> str:
    lines = plan(s, windows, recorded)
    width = max(len(l.name) for l in lines)
    out = [f"obsgen plan: {s.ranks:,} ranks (pp={s.pp}, tp={s.tp}, ep={s.ep}, experts={s.experts}), "
           f"{s.hosts:,} hosts of {s.gpus_per_host} GPUs and {s.hcas_per_host} HCAs",
           f"{'series':<{width}}  {'type':<9}  {'per':<5}  {'each':>5}  {'total':>12}"]
    for l in lines:
        if l.total:
            out.append(f"{l.name:<{width}}  {l.type:<9}  {l.scope:<5}  {l.per_unit:>5}  {l.total:>12,}")
    scraped = sum(l.total for l in lines if l.type != "recorded")
    recorded = sum(l.total for l in lines if l.type == "recorded")
    total = scraped + recorded
    out += ["",
            f"per rank from the training process (obsgen.instrument): {per_rank(lines, TRAINING)}",
            f"per rank from the NCCL sidecar: {per_rank(lines, 'NCCL sidecar')}",
            f"scraped series: {scraped:,}   recorded series: {recorded:,}   total: {total:,}",
            f"Prometheus head memory, at ~{BYTES_PER_SERIES // 1024} KiB per series: "
            f"~{total * BYTES_PER_SERIES / 2**30:.1f} GiB (plus churn on restarts: every restart "
            "creates new series for the new instances until the old ones leave the head)"]
    if s.ranks >= LARGE:
        told = ", ".join(f"{k}: {json.dumps(v).replace(chr(34), '')}"
                         for k, v in ONE_PROMETHEUS.items())
        out.append(f"rule evaluation on one Prometheus at this size: set {told} "
                   "(docs/guides/sizing.md), measured in benchmarks/RESULTS.md")
    buckets = unread_buckets(lines)
    if buckets:
        out.append(f"of which histogram buckets no rule or panel reads: {buckets:,}; dropped at "
                   "the scrape (examples/prometheus/drop-unread-buckets.yaml): total "
                   f"{total - buckets:,}, ~{(total - buckets) * BYTES_PER_SERIES / 2**30:.1f} GiB")
    return "\n".join(out) + "\n"
