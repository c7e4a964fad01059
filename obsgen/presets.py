"""Metric-name presets: the names real exporters publish, mapped onto the contract.

A preset only renames (and, where an exporter publishes another unit, scales the sums
it reads back to the contract's unit): the rules' logic is shared. Presets are applied
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
               "megatron/core/telemetry/training_metrics.py through nemo-lens), as the OTel "
               "collector's Prometheus exporter names them",
        assumes="the collector's prometheus exporter with its defaults (add_metric_suffixes: true, "
                "so units become suffixes: step_duration_ms with unit ms turns into "
                "..._ms_milliseconds) and resource_to_telemetry_conversion enabled, so the "
                "resource attributes nemo.run.id and nv.dl.rank become the labels nemo_run_id and "
                "nv_dl_rank; Megatron exports from one rank unless its rank strategy is set to "
                "all ranks, which per-rank rules (stragglers, rank failure) need",
        covers="the gradient alerts (grad norm, loss) and step-time panels; compute time, "
               "checkpoints, world size and pipeline timings are not published by Megatron: run "
               "obsgen.instrument next to it for those",
        metrics={M.train_step_seconds.key: "megatron_training_step_duration_ms_milliseconds",
                 M.train_loss.key: "megatron_training_loss",
                 M.train_grad_norm.key: "megatron_training_grad_norm"},
        labels={L.job_id.key: "nemo_run_id", L.rank.key: "nv_dl_rank"},
        scales={M.train_step_seconds.key: 0.001},  # milliseconds to seconds
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
)}
