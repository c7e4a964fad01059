"""Metric-name presets: the names real exporters publish, mapped onto the contract.

A preset only renames (and, where an exporter publishes another unit, scales the sums
it reads back to the contract's unit): the rules' logic is shared. A preset whose source
records once per log interval (``cadence``) also widens the windows that count its steps
and has Train_GradientNonFinite read its frozen signals (obsgen/alerts/gradients.py).
Presets are applied
in the order listed under ``presets:`` in the config; the config's own ``metrics:`` and
``labels:`` renames win over every preset.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .contract import L, M


@dataclass(frozen=True)
class Preset:
    name: str
    source: str  # where the names come from
    assumes: str  # exporter settings the names depend on
    covers: str  # what obsgen can watch with this source alone
    checked: str = ""  # the upstream versions the names were read from
    metrics: dict[str, str] = field(default_factory=dict)  # contract key -> published name
    labels: dict[str, str] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)  # contract key -> factor to contract unit
    # contract key -> the config setting that says how many steps one observation stands for
    cadence: dict[str, str] = field(default_factory=dict)
    # families rendered only with this preset (their source exists only with it)
    families: tuple[str, ...] = ()


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(
        "default",
        source="the contract: obsgen.instrument for training signals, dcgm-exporter and "
               "node_exporter for GPUs and hosts (obsgen/contract.py)",
        assumes="obsgen.instrument in every rank; dcgm-exporter and node_exporter on every host",
        covers="every alert and panel",
        checked="dcgm-exporter as the dcgm preset says; node_exporter v1.12.1 (the infiniband "
                "collector's port_data_*_bytes_total and rate_bytes_per_second, node_uname_info); "
                "kube-state-metrics v2.20.0 (kube_pod_labels: "
                "internal/store/utils.go turns a pod label key into label_ + the key "
                "sanitised, snake-cased and lower-cased, so jobName becomes label_job_name: "
                "set pod_job_label to the key)",
    ),
    Preset(
        "megatron-otel",
        source="Megatron-LM's OpenTelemetry training metrics (megatron.training.*, recorded by "
               "megatron/core/telemetry/training_metrics.py through NeMo Lens), as the OTel "
               "collector's Prometheus exporter names them",
        assumes="the collector's prometheus exporter with its defaults (add_metric_suffixes: "
                "true, so step_duration_ms with unit ms turns into ..._ms_milliseconds) and "
                "resource_to_telemetry_conversion enabled, so Lens' resource attributes "
                "nemo.run.id and dl.rank become the labels nemo_run_id and dl_rank; "
                "MEGATRON_OTEL_EXPORT_STRATEGY=all_ranks (the default, single_rank, exports "
                "from the last rank only, and per-rank rules need every rank); the run id the "
                "same on every rank: Lens takes MEGATRON_OTEL_RUN_ID (or NEMO_LENS_RUN_ID), "
                "else SLURM_JOB_ID, else a random id per process, so off Slurm set it, to the "
                "job id obsgen.instrument and the NCCL sidecar report when they run beside it "
                "(their series carry job_id and rank: copy them into nemo_run_id and dl_rank "
                "at the scrape, examples/prometheus/megatron-otel-mixed.yaml); "
                "megatron_log_interval set to the job's --log-interval: Megatron records its "
                "step histogram once per interval with the interval's mean, so a step count "
                "is the observations times the interval, and every read of the histogram "
                "spans at least that many progress windows",
        covers="the gradient alerts (grad norm, loss), the step-time regression and the "
               "step-time panels; compute time, checkpoints, world size and pipeline "
               "timings are not published by Megatron: run obsgen.instrument beside it for "
               "those, and keep its per-step histogram with metrics: {train_step_seconds: "
               "train_step_seconds}: it needs no megatron_log_interval, answers within the "
               "progress window instead of log-interval times it, and carries the stage label "
               "the pipeline family groups by, which Megatron's series lack. A NaN late: the "
               "OTel Python SDK drops a non-finite gauge value and exports the last finite "
               "one again, so Train_GradientNonFinite fires once the grad norm or loss has "
               "not changed within windows.frozen_signal while the step histogram logged "
               "thresholds.frozen_observations times (16 min with the defaults; make e2e "
               "shows it on the OTLP path); obsgen.instrument's tel.grad_norm() and "
               "tel.loss() beside it see the NaN within a minute",
        checked="NeMo Lens v0.2.0 and v0.1.0 (providers.py: the resource attribute dl.rank; "
                "handle.py: the run id fallback; strategies.py) and Megatron-LM main at "
                "d98e8a6 (2026-08-22; training.py records once per --log-interval and at "
                "the first iteration, training_config.py: log_interval 100); the label "
                "nv_dl_rank an earlier obsgen read is in neither Lens release",
        metrics={M.train_step_seconds.key: "megatron_training_step_duration_ms_milliseconds",
                 M.train_loss.key: "megatron_training_loss",
                 M.train_grad_norm.key: "megatron_training_grad_norm"},
        labels={L.job_id.key: "nemo_run_id", L.rank.key: "dl_rank"},
        scales={M.train_step_seconds.key: 0.001},  # milliseconds to seconds
        cadence={M.train_step_seconds.key: "megatron_log_interval"},
    ),
    Preset(
        "dcgm",
        source="NVIDIA dcgm-exporter 2.x and later (DCGM_FI_* field names, labels gpu, UUID "
               "and the host name, Hostname in releases, hostname on main since #655: the "
               "rules read either); the 1.x exporter's dcgm_* names are not supported",
        assumes="the counters CSV examples/dcgm-exporter/obsgen-counters.csv (the default CSV "
                "leaves out DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_NVLINK_TX_BYTES / _RX_BYTES, "
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, the ECC totals and NVLink error counters); "
                "NODE_NAME set to the name the ranks report (the Helm chart does; off Kubernetes "
                "set it yourself); pod labels only with --kubernetes (the Helm chart's "
                "DCGM_EXPORTER_KUBERNETES) and the kubelet's pod-resources socket; "
                "train_rank_gpu_info from obsgen.instrument maps each GPU UUID to its job and rank",
        covers="GPU panels and alerts (SM-active spread, NVLink, ECC, XID); with the default "
               "CSV only the ECC alert (remapped rows, XID), temperature, power and XID panels",
        checked="dcgm-exporter 4.5.3-4.8.2 (etc/default-counters.csv, the Helm chart, "
                "internal/pkg/rendermetrics, internal/pkg/hostname) and main at d5e5f51 "
                "(2026-05-12: the label renamed to hostname)",
        metrics={m.key: m.key for m in M if m.key.startswith("DCGM_FI_")},
    ),
    Preset(
        "nccl-inspector",
        source="the NCCL Inspector's own Prometheus textfile (NCCL 2.30+, "
               "NCCL_INSPECTOR_PROM_DUMP=1), read by node_exporter's textfile collector: "
               "nccl_collective_exec_time_microseconds and nccl_bus_bandwidth_gbs per "
               "communicator, collective, message-size range and algorithm, labelled with "
               "the process's host name (node) and CUDA device (gpu)",
        assumes="NCCL_INSPECTOR_ENABLE=1, NCCL_PROFILER_PLUGIN pointing at the Inspector "
                "plugin, NCCL_INSPECTOR_PROM_DUMP=1, "
                "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS of at least 30000000 (the "
                "plugin raises a shorter one to 30 s; its default, -1, dumps only at "
                "teardown) and under windows.inspector, NCCL_INSPECTOR_DUMP_DIR the "
                "directory node_exporter's --collector.textfile.directory reads; "
                "obsgen.instrument's tel.torch.use_cuda_events() in every rank, whose "
                "train_rank_gpu_info names the process's host name and CUDA device; each "
                "process sees the GPUs of its host (torchrun): where every process sees one "
                "GPU (CUDA_VISIBLE_DEVICES per task) every rank of a host writes gpu=GPU0 "
                "and no series can be told apart, so none is mapped; the scrape keeps the "
                "Inspector's node label (a target label node renames it exported_node: set "
                "labels: {inspector_host: exported_node})",
        covers="the NCCL Inspector row of the DP view: time per collective and bus "
               "bandwidth of every rank, by communicator; no alert: the textfile has no "
               "count of collectives (a mean over an interval of unknown size), no global "
               "rank and no per-collective record, so Train_Straggler_LateArrival, the "
               "collective time per step and the NCCL panels of the views need the sidecar "
               "(docs/guides/nccl-sidecar.md)",
        checked="NCCL v2.30.7-1 (the newest tag; plugins/profiler/inspector/inspector_prom.cc: "
                "metric names, labels and %.6g values; inspector.cc: the interval and the "
                "defaults of its settings), the same at v2.30.3-1",
        # the contract's names are the Inspector's own
        metrics={m.key: m.key for m in (M.nccl_collective_exec_time_microseconds,
                                        M.nccl_bus_bandwidth_gbs)},
        labels={L.inspector_host.key: "node", L.inspector_gpu.key: "gpu"},
        families=("inspector",),
    ),
)}


def families_of(presets: list[str]) -> set[str]:
    """Families that only the presets named render (an unknown name is the config's to refuse)."""
    return {f for name in presets if name in PRESETS for f in PRESETS[name].families}


ONLY_WITH_PRESET: frozenset[str] = frozenset(f for p in PRESETS.values() for f in p.families)
