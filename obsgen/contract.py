"""The metric contract: every metric, label and recorded series obsgen reads or writes.

This module is the only place where metric and label names are written out. Rules and
panels refer to metrics by their key (the default name); the config may rename any of
them (``metrics:`` and ``labels:`` in obsgen.yaml) without touching a rule.

Conventions every series follows:

* Every scraped series also carries the scrape's ``job`` and ``instance`` labels.
  ``instance`` changes when a job restarts on other pods or hosts, so rules group by
  ``job_id`` / ``rank`` (and ``stage`` / ``node`` where known), never by instance or pod.
* Histograms use prometheus_client's default buckets (5 ms .. 10 s). They are too coarse
  for quantiles of step or compute time, so rules read ``_sum`` / ``_count`` means.
* Recorded series follow the ``level:metric:operation`` naming convention.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

# Emitters, named once so docs and the plan say who produces each series.
INSTRUMENT = "obsgen.instrument (the training process, one endpoint per rank)"
NCCL_SIDECAR = ("obsgen.instrument (wrapping torch.distributed calls) or the NCCL sidecar "
                "(obsgen nccl-exporter, from NCCL Inspector dumps)")
NCCL_EXPORTER = ("obsgen nccl-exporter (sidecar reading NCCL Inspector dumps, one per pod "
                 "or node; see obsgen.nccl)")
DCGM = ("NVIDIA dcgm-exporter, one endpoint per GPU host; fields its default counters CSV "
        "leaves out are enabled by examples/dcgm-exporter/obsgen-counters.csv")
DCGM_PROF = DCGM + " (a DCP profiling field: datacenter GPUs only)"
NODE_EXPORTER = "Prometheus node_exporter on every host (infiniband and uname collectors)"
INSPECTOR_TEXTFILE = ("NCCL Inspector 2.30+ (NCCL_INSPECTOR_PROM_DUMP=1) through node_exporter's "
                      "textfile collector on every host; read with the nccl-inspector preset")
KSM = ("kube-state-metrics (Kubernetes only), with the pod label that holds the job id "
       "allowlisted: --metric-labels-allowlist=pods=[<label>]")
INSTRUMENT_RESTART = ("obsgen.instrument, rank 0 of the new processes after a restart, once its "
                      "first step completes (not emitted before the first restart)")
RULER = "Prometheus (or the ruler that evaluates obsgen's rules), for every pending or firing alert"


@dataclass(frozen=True)
class Label:
    key: str
    help: str


@dataclass(frozen=True)
class Metric:
    key: str  # default name, and the key under ``metrics:`` in the config
    type: str
    labels: tuple[str, ...]  # label keys
    unit: str
    help: str
    emitter: str = INSTRUMENT
    # Histogram bucket upper bounds (+Inf last); None means DEFAULT_BUCKETS.
    buckets: tuple[float, ...] | None = None


LABELS: dict[str, Label] = {
    l.key: l
    for l in (
        Label("job_id", "training job (one run, across restarts)"),
        Label("rank", "global rank of the process, 0 .. world_size-1"),
        Label("stage", "pipeline-parallel stage of the rank (0 when PP is not used)"),
        Label("node", "host the rank runs on, where the emitter knows it (on Kubernetes the node "
                      "name from the downward API, not the pod's hostname)"),
        Label("phase", "forward or backward, on pipeline stage timings"),
        # A rank's place in the parallel mesh (obsgen.mesh), on train_rank_mesh_info only.
        Label("tp_rank", "position of the rank in its tensor-parallel group (0 .. TP-1)"),
        Label("cp_rank", "position of the rank in its context-parallel group (0 .. CP-1)"),
        Label("ep_rank", "position of the rank in its expert-parallel group (0 .. EP-1)"),
        Label("dp_rank", "position of the rank in its data-parallel group: its replica (0 .. DP-1)"),
        Label("tp_group", "the rank's tensor-parallel group, named by its lowest global rank"),
        Label("cp_group", "the rank's context-parallel group, named by its lowest global rank"),
        Label("ep_group", "the rank's expert-parallel group, named by its lowest global rank"),
        Label("dp_group", "the rank's data-parallel group, named by its lowest global rank"),
        Label("mesh_axis", "the kind of mesh position a straggler pattern follows (tp, cp or ep), "
                           "on the straggler pattern records and alert only"),
        Label("mesh_position", "the position in that kind of group the pattern follows"),
        Label("reports_wait", "true where the rank reports its wait inside compute "
                              "(train_compute_wait_seconds), false where it does not; on the "
                              "rank place record only"),
        Label("obsgen_part", "tags the negated wait inside the busy-time rule's one sum of "
                             "compute and wait; on a record only on the straggler family's "
                             "placed ranks (ruler: prometheus): held or moving"),
        Label("pp_group", "the rank's pipeline (the ranks of every stage that pass it "
                          "activations), named by its lowest global rank"),
        Label("op", "collective operation, e.g. AllReduce, AllGather, ReduceScatter"),
        Label("group", "parallel group of a collective: dp, tp, pp, ep, cp, fsdp (or another "
                       "name the job declares), unknown when neither the job's group map nor "
                       "a configured rule names it"),
        Label("peer", "global rank of the other side of a Send or Recv (unknown until the NCCL "
                      "sidecar can tell it; other beyond a rank's first 8 peers in a group)"),
        Label("expert", "index of a mixture-of-experts expert"),
        Label("UUID", "GPU UUID (GPU-...) as dcgm-exporter publishes it; joins GPU series to ranks"),
        Label("gpu", "GPU index on its host, as dcgm-exporter publishes it"),
        Label("Hostname", "host name, as dcgm-exporter releases up to 4.5.3 publish it: NODE_NAME "
                          "where set (the Helm chart sets it to the node name), else the "
                          "exporter's own host name (a container's under Docker)"),
        Label("hostname", "the same host name, as dcgm-exporter's main branch publishes it since "
                          "its label was renamed (#655, after 4.5.3); the rules read whichever "
                          "of the two a series carries"),
        Label("nodename", "host name, as node_exporter's node_uname_info publishes it"),
        Label("device", "InfiniBand HCA, e.g. mlx5_0, as node_exporter publishes it"),
        Label("port", "InfiniBand port of the HCA, as node_exporter publishes it"),
        Label("pod", "Kubernetes pod: on dcgm-exporter series the pod the GPU is allocated to "
                     "(its kubelet pod-resources mapping), on kube-state-metrics series the pod "
                     "described. Behind a ServiceMonitor without honorLabels: true, Prometheus "
                     "renames dcgm-exporter's to exported_pod: rename it here"),
        Label("namespace", "Kubernetes namespace of that pod (exported_namespace behind a "
                           "ServiceMonitor without honorLabels: true)"),
        Label("container", "Kubernetes container the GPU is allocated to, as dcgm-exporter "
                           "publishes it"),
        Label("uid", "Kubernetes pod UID, as kube-state-metrics publishes it"),
        Label("label_job_id", "the pod label that holds the training job's id, as "
                              "kube-state-metrics publishes it on kube_pod_labels; set the "
                              "Kubernetes label key with pod_job_label in the config and obsgen "
                              "derives this name (ksm_pod_label); its value must equal the "
                              "ranks' job_id"),
        # The NCCL Inspector's own textfile (nccl-inspector preset): its labels, apart from
        # obsgen's labels of the same name, which mean other things (the preset names them).
        Label("inspector_host", "the host name the NCCL Inspector writes in its node label: "
                                "the process's gethostname(), a pod's name on Kubernetes, "
                                "not the node name obsgen's node label holds"),
        Label("inspector_gpu", "the GPU the NCCL Inspector writes in its gpu label: GPU and "
                               "the process's CUDA device ordinal, e.g. GPU3"),
        Label("comm_name", "the NCCL communicator's name as the application set it (unknown "
                           "when it set none), on the Inspector's series"),
        Label("collective", "NCCL collective, e.g. AllReduce, on the Inspector's series"),
        Label("message_size", "the Inspector's message-size range of a collective, a power of "
                              "two per unit, e.g. 16-17MB"),
        Label("process_host", "the rank process's gethostname(), on train_rank_gpu_info: joins "
                              "the Inspector's node label to the rank"),
        Label("cuda_device", "GPU and the rank's CUDA device ordinal (GPU3), on "
                             "train_rank_gpu_info: joins the Inspector's gpu label to the rank"),
        Label("alertname", "name of an alert, on the ALERTS series"),
        Label("alertstate", "pending or firing, on the ALERTS series"),
        Label("job", "scrape job, added by Prometheus"),
        Label("instance", "scrape target, added by Prometheus; changes on restart"),
        # Labels obsgen itself puts on alerts.
        Label("severity", "alert severity: critical, warning or info"),
        Label("team", "team an alert routes to (platform or workload role)"),
        Label("signal", "which metric of a multi-signal alert tripped it"),
    )
}

_JRS = ("job_id", "rank", "stage")
_INSPECTOR = ("inspector_host", "inspector_gpu", "comm_name", "collective", "message_size")
_DCGM = ("UUID", "gpu", "Hostname", "hostname", "pod", "namespace", "container")
# The sidecar's per-rank collective series name the host of the rank's records (node), as
# obsgen.instrument's do: the all-reduce windows per host need no join over every rank.
_JROG = ("job_id", "rank", "op", "group", "node")
# The alignment counters are per parallel group, all its ops together (no rule or panel
# reads them by op, and per op they were one series per collective type of the group), and
# name the host of the rank's records, so the late-arrival alert needs no join for it.
_JRGN = ("job_id", "rank", "group", "node")
# The point-to-point series of the sidecar name the peer's global rank too.
_JROGP = ("job_id", "rank", "op", "group", "peer", "node")
# Buckets of the NCCL sidecar's time histograms (duration, arrival skew, tail): 10 us .. 10 s,
# 1-2.5-5 per decade. Kernel times below 10 us are launch overhead, not transfer.
NCCL_SECONDS_BUCKETS = (1e-05, 2.5e-05, 5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                        0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))
# Buckets of nccl_bus_bandwidth_gbytes_per_second in GB/s: a congested inter-node link
# (single digits) up to NVLink 4/5 bus bandwidth (several hundred).
NCCL_BUSBW_BUCKETS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 400.0,
                      500.0, 750.0, 1000.0, float("inf"))

_KSM_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_KSM_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def ksm_pod_label(key: str) -> str:
    """The label kube-state-metrics publishes the Kubernetes pod label ``key`` under, on
    ``kube_pod_labels``: ``label_`` + the key with every character outside [a-zA-Z0-9_]
    turned into ``_``, then snake-cased (``_`` between a lower-case letter or digit and the
    upper-case letter after it) and lower-cased, as its internal/store/utils.go does
    (v2.x): ``training.kubeflow.org/jobName`` -> ``label_training_kubeflow_org_job_name``.
    Two keys of one pod that come out the same are published with ``_conflict<n>``
    suffixes instead: keep the job id's key apart from the others."""
    return "label_" + _KSM_CAMEL.sub(r"\1_\2", _KSM_INVALID.sub("_", key)).lower()


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("train_step_seconds", HISTOGRAM, _JRS, "seconds",
               "wall time of one training step (equal on all ranks of a synchronous job)"),
        Metric("train_compute_seconds", HISTOGRAM, _JRS, "seconds",
               "local forward+backward time before the rank reaches the gradient collective"),
        Metric("nccl_collective_duration_seconds", HISTOGRAM, _JROG, "seconds",
               "time a collective ran on this rank: waiting for later peers plus transfer (from "
               "the sidecar: the Inspector's kernel time, coll_exec_time_us, buckets 10 us .. "
               "10 s)", NCCL_SIDECAR, NCCL_SECONDS_BUCKETS),
        Metric("pipeline_stage_seconds", HISTOGRAM, ("job_id", "rank", "stage", "phase"),
               "seconds", "busy time of the pipeline stage per step, by phase"),
        Metric("train_pipeline_stages", GAUGE, ("job_id", "rank"), "count",
               "pipeline-parallel size p"),
        Metric("train_microbatches_per_step", GAUGE, ("job_id", "rank"), "count",
               "microbatches per step m"),
        Metric("train_grad_norm", GAUGE, ("job_id", "rank"), "none",
               "global gradient norm of the last step (may come from one rank only)"),
        Metric("train_loss", GAUGE, ("job_id", "rank"), "none",
               "training loss of the last step (may come from one rank only)"),
        Metric("train_nonfinite", GAUGE, ("job_id", "rank", "signal"), "bool",
               "1 while the last step's loss or gradient norm (signal: loss, grad_norm) is NaN "
               "or Inf, else 0: a value every store keeps, where NaN samples are dropped at "
               "ingestion (VictoriaMetrics) or on the way (some remote-write pipelines)"),
        Metric("train_world_size", GAUGE, ("job_id", "rank"), "count",
               "number of ranks in the job"),
        Metric("train_current_step", GAUGE, ("job_id", "rank"), "steps",
               "last completed step"),
        Metric("train_planned_steps", GAUGE, ("job_id", "rank"), "steps",
               "steps the run is planned to train for"),
        Metric("train_checkpoint_timestamp_seconds", GAUGE, ("job_id", "rank"), "unix seconds",
               "time of the last successful checkpoint, or the job's start before the first; "
               "after a restart, the time of the checkpoint the job resumed from (not the new "
               "processes' start), so a restart is no checkpoint progress"),
        Metric("train_checkpoint_total", COUNTER, ("job_id", "rank"), "checkpoints",
               "checkpoints written"),
        Metric("train_checkpoint_seconds_total", COUNTER, ("job_id", "rank"), "seconds",
               "seconds spent writing checkpoints"),
        Metric("train_run_id", GAUGE, ("job_id", "rank"), "generation",
               "restart generation of the job (increments on every restart)"),
        Metric("checkpoint_bytes_written_total", COUNTER, ("job_id", "rank"), "bytes",
               "bytes the rank wrote to checkpoint storage, added when a save completes (every "
               "rank that writes a shard; 0 on ranks that write nothing)"),
        Metric("job_recovery_seconds", GAUGE, ("job_id", "rank"), "seconds",
               "time from the failure to the first completed step after the last restart: the "
               "previous processes' last completed step (or last heartbeat) to the new "
               "processes' first", emitter=INSTRUMENT_RESTART),
        Metric("job_checkpoint_age_at_failure_seconds", GAUGE, ("job_id", "rank"), "seconds",
               "work lost by the last restart: the previous processes' last completed step "
               "minus the time of the checkpoint the job resumed from",
               emitter=INSTRUMENT_RESTART),
        Metric("train_planned_end_timestamp_seconds", GAUGE, ("job_id", "rank"), "unix seconds",
               "time the run is planned to have finished by (its deadline), from the launch "
               "config; absent when the run has none"),
        Metric("train_exposed_comm_seconds", HISTOGRAM, _JRS, "seconds",
               "time per step the compute stream waited for communication, i.e. communication "
               "not hidden behind compute (CUDA events around the stream waits)"),
        Metric("train_rank_mesh_info", GAUGE, ("job_id", "rank", "stage", "tp_rank", "cp_rank",
                                               "ep_rank", "dp_rank", "tp_group", "cp_group",
                                               "ep_group", "dp_group", "pp_group"), "info",
               "1 per rank, naming its place in the parallel mesh: its position in each kind of "
               "group and which group of each kind it is in (obsgen.mesh); from Megatron's "
               "parallel_state, the job's named process groups, or the mesh sizes"),
        Metric("train_compute_wait_seconds", HISTOGRAM, _JRS, "seconds",
               "time of the rank's compute block (train_compute_seconds) spent in communication "
               "it waits for: its tensor-, context- and expert-parallel collectives and pipeline "
               "send/recv, waiting for slower peers included; the rank's busy time is its "
               "compute minus this, which a peer that waits for a slow GPU does not share"),
        Metric("train_rank_gpu_info", GAUGE, ("job_id", "rank", "node", "UUID", "process_host",
                                              "cuda_device"), "info",
               "1 per rank, naming its host and the UUID of its GPU; joins dcgm-exporter and "
               "node_exporter series to the job's ranks; with the process's host name and "
               "CUDA device (tel.torch.use_cuda_events() sets both), the NCCL Inspector's"),
        Metric("moe_expert_tokens_total", COUNTER, ("job_id", "rank", "expert"), "tokens",
               "tokens routed to an expert, summed over the MoE layers, counted by the rank "
               "that hosts the expert"),
        # Communication volume and fabric events.
        Metric("nccl_collective_bytes_total", COUNTER, _JROG, "bytes",
               "message size of a rank's collectives as NCCL counts it (count x datatype size: "
               "the whole buffer for AllReduce, Broadcast and Reduce, one rank's part for "
               "AllGather and ReduceScatter, the message for Send and Recv); from the sidecar, "
               "the collectives the Inspector recorded", emitter=NCCL_SIDECAR),
        Metric("nccl_link_recovery_total", COUNTER, ("job_id", "rank"), "recoveries",
               "link failures NCCL (2.27+ resilient collectives) recovered from without aborting; "
               "NCCL publishes no counter of its own (its RAS subsystem reports peer health), so "
               "the job counts them with obsgen.instrument's Telemetry.link_recovered() where "
               "its NCCL reports a recovered link (e.g. from its warnings)",
               emitter=INSTRUMENT),
        # GPUs, as dcgm-exporter publishes them (names and labels exactly as it writes them;
        # pod, namespace and container only on Kubernetes with the kubelet mapping).
        Metric("DCGM_FI_PROF_SM_ACTIVE", GAUGE, _DCGM, "ratio",
               "share of cycles at least one warp was resident on an SM, averaged over SMs",
               emitter=DCGM_PROF),
        Metric("DCGM_FI_PROF_NVLINK_TX_BYTES", GAUGE, _DCGM, "bytes/s",
               "NVLink transmit rate of the GPU, payload only", emitter=DCGM_PROF),
        Metric("DCGM_FI_PROF_NVLINK_RX_BYTES", GAUGE, _DCGM, "bytes/s",
               "NVLink receive rate of the GPU, payload only", emitter=DCGM_PROF),
        Metric("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", COUNTER, _DCGM, "errors",
               "single-bit (corrected) volatile ECC errors since the driver loaded", emitter=DCGM),
        Metric("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", COUNTER, _DCGM, "errors",
               "double-bit (uncorrectable) volatile ECC errors since the driver loaded",
               emitter=DCGM),
        Metric("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", COUNTER, _DCGM, "rows",
               "memory rows the GPU remapped after uncorrectable errors (row remapping, A100 "
               "and later; persistent across reboots); in the default counters CSV",
               emitter=DCGM),
        Metric("DCGM_FI_DEV_XID_ERRORS", GAUGE, _DCGM, "xid",
               "code of the last XID error of the GPU", emitter=DCGM),
        Metric("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", COUNTER, _DCGM,
               "errors", "NVLink recovery errors of the GPU, all links", emitter=DCGM),
        Metric("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", COUNTER, _DCGM, "errors",
               "NVLink flow-control CRC errors of the GPU, all links", emitter=DCGM),
        Metric("DCGM_FI_DEV_GPU_TEMP", GAUGE, _DCGM, "celsius", "GPU temperature",
               emitter=DCGM),
        Metric("DCGM_FI_DEV_POWER_USAGE", GAUGE, _DCGM, "watts", "GPU power draw",
               emitter=DCGM),
        Metric("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", GAUGE, _DCGM, "bitmask",
               "why the clocks are held below their maximum, NVML's bitmask: 0x4 software "
               "power cap, 0x8 hardware slowdown, 0x20 software thermal, 0x40 hardware "
               "thermal, 0x80 power brake (older counters CSVs name it "
               "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: rename it under metrics:)", emitter=DCGM),
        Metric("node_infiniband_port_data_transmitted_bytes_total", COUNTER,
               ("instance", "device", "port"), "bytes", "bytes the InfiniBand port sent",
               emitter=NODE_EXPORTER),
        Metric("node_infiniband_port_data_received_bytes_total", COUNTER,
               ("instance", "device", "port"), "bytes", "bytes the InfiniBand port received",
               emitter=NODE_EXPORTER),
        Metric("node_infiniband_rate_bytes_per_second", GAUGE, ("instance", "device", "port"),
               "bytes/s", "line rate of the InfiniBand port (e.g. 50e9 for NDR 400 Gb/s)",
               emitter=NODE_EXPORTER),
        Metric("node_uname_info", GAUGE, ("instance", "nodename"), "info",
               "1 per host, labelled with its uname; maps node_exporter's instance to the host",
               emitter=NODE_EXPORTER),
        # Pods, as kube-state-metrics publishes them.
        Metric("kube_pod_labels", GAUGE, ("namespace", "pod", "uid", "label_job_id"), "info",
               "1 per pod, with its allowlisted Kubernetes labels as label_<key>; maps the pod "
               "dcgm-exporter names on a GPU to the job", emitter=KSM),
        # Alerts, as Prometheus writes them.
        Metric("ALERTS", GAUGE, ("alertname", "alertstate", "job_id", "severity"), "info",
               "1 for every pending or firing alert, with the alert's labels", emitter=RULER),
        # NCCL sidecar (obsgen.nccl): per rank, op and group of each recorded collective.
        # Only collectives the Inspector wrote a record for are counted; see
        # obsgen_nccl_collectives_unrecorded_total for the ones it skipped.
        Metric("nccl_collective_bus_bytes_total", COUNTER, _JROG, "bytes",
               "bytes the rank moved over its links by NCCL's bus-bandwidth model "
               "(AllReduce 2(n-1)/n x size, AllGather and ReduceScatter (n-1) x size, others "
               "1 x size): what a parallel group costs the fabric",
               NCCL_EXPORTER),
        Metric("nccl_bus_bandwidth_gbytes_per_second", HISTOGRAM, _JROG, "GB/s",
               "bus bandwidth of each recorded collective (Inspector coll_busbw_gbs)",
               NCCL_EXPORTER, NCCL_BUSBW_BUCKETS),
        Metric("nccl_collective_aligned_total", COUNTER, _JRGN, "collectives",
               "collectives of the group (every op) this rank took part in that the exporter "
               "joined across every rank of the communicator (by communicator, op and coll_sn)",
               NCCL_EXPORTER),
        Metric("nccl_collective_last_arrival_total", COUNTER, _JRGN, "collectives",
               "aligned collectives of the group (every op) in which this rank arrived last, by "
               "more than the exporter's arrival resolution (the critical rank of that "
               "collective)", NCCL_EXPORTER),
        Metric("nccl_collective_arrival_skew_seconds", HISTOGRAM, ("job_id", "op", "group"),
               "seconds", "aligned collectives: latest minus earliest arrival of the ranks, "
               "from each rank's kernel time (host clocks are not used)",
               NCCL_EXPORTER, NCCL_SECONDS_BUCKETS),
        Metric("nccl_collective_tail_seconds", HISTOGRAM, ("job_id", "op", "group"), "seconds",
               "aligned collectives: time after the last rank arrived (the last arrival's "
               "kernel time), the better estimate of transfer time",
               NCCL_EXPORTER, NCCL_SECONDS_BUCKETS),
        Metric("nccl_p2p_seconds_total", COUNTER, _JROGP, "seconds",
               "kernel time of the rank's Send or Recv with one peer, summed (the Inspector's "
               "p2p_exec_time_us, NCCL 2.30+); peer is the peer's global rank, unknown until "
               "the exporter can tell it, other beyond a rank's first 8 peers in a group",
               NCCL_EXPORTER),
        Metric("nccl_p2p_bytes_total", COUNTER, _JROGP, "bytes",
               "message bytes of the rank's Send or Recv with one peer (p2p_msg_size_bytes)",
               NCCL_EXPORTER),
        Metric("nccl_p2p_transfers_total", COUNTER, _JROGP, "transfers",
               "Send or Recv operations of the rank with one peer that the Inspector recorded",
               NCCL_EXPORTER),
        Metric("nccl_communicator_ranks", GAUGE, ("job_id", "rank", "group", "node"), "count",
               "ranks in the communicator of this group the rank belongs to (smallest when "
               "the rank has several), labelled with the host its process runs on",
               NCCL_EXPORTER),
        Metric("obsgen_nccl_records_total", COUNTER, ("job_id",), "records",
               "Inspector records the exporter parsed", NCCL_EXPORTER),
        Metric("obsgen_nccl_parse_errors_total", COUNTER, ("job_id",), "lines",
               "malformed Inspector lines skipped (not JSON, missing or invalid fields, or cut "
               "off and never completed before the file was truncated or removed)",
               NCCL_EXPORTER),
        Metric("obsgen_nccl_collectives_unrecorded_total", COUNTER, _JROG, "collectives",
               "collectives the Inspector wrote no record for: gaps in coll_sn (Send/Recv: in "
               "the communicator's p2p_sn, counted on the op that shows the gap). NCCL "
               "2.28-2.29 write only the latest collective of a communicator per dump; 2.30+ "
               "write every one from a ring of 1024 per communicator, so gaps are ring "
               "overflow between dumps, collectives under NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES "
               "(8192) and, with NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=1 (the default), ones "
               "without GPU kernel timing",
               NCCL_EXPORTER),
        Metric("obsgen_nccl_alignment_incomplete_total", COUNTER, ("job_id", "group"),
               "collectives", "collectives whose alignment state expired before every rank's "
               "record arrived", NCCL_EXPORTER),
        Metric("obsgen_nccl_alignment_pending", GAUGE, ("job_id",), "collectives",
               "collectives waiting for the records of more ranks (bounded)", NCCL_EXPORTER),
        Metric("obsgen_nccl_files", GAUGE, ("job_id",), "files",
               "Inspector dump files the exporter follows", NCCL_EXPORTER),
        # NCCL Inspector's own textfile (2.30+): one file per GPU, rewritten at each dump
        # with the collectives since the last one, per communicator, collective, message
        # size range and algorithm_protocol; besides the labels read here it writes
        # version, slurm_job_id, n_nodes, nranks and algo_proto.
        Metric("nccl_collective_exec_time_microseconds", GAUGE, _INSPECTOR, "microseconds",
               "mean kernel execution time of the collectives since the Inspector's last dump",
               INSPECTOR_TEXTFILE),
        Metric("nccl_bus_bandwidth_gbs", GAUGE, _INSPECTOR, "GB/s",
               "geometric mean bus bandwidth of the collectives since the Inspector's last "
               "dump (NCCL's bus-bandwidth model)", INSPECTOR_TEXTFILE),
    )
}


@dataclass(frozen=True)
class Recorded:
    """A series obsgen's recording rules write. ``name`` may hold ``{window}`` fields
    (filled from ``windows:`` in the config) so a name never lies about its window."""

    key: str
    name: str
    labels: tuple[str, ...]
    help: str


_RANK = ("job_id", "rank", "stage")
_RANK_NODE = ("job_id", "rank", "stage", "node")  # the host the rank runs on, no join

def shard_record(family: str, rule: str, n: int) -> str:
    """Name of the shard-tier record a sharded render hoists out of a global rule
    (obsgen.shards): the family, the rule it came from, and its number in the family."""
    return f"obsgen_shard:{family}_{rule}:{n}"


RECORDED: dict[str, Recorded] = {
    r.key: r
    for r in (
        # stragglers
        Recorded("busy_mean", "job_rank:train_busy_seconds:mean{straggler}", _RANK_NODE,
                 "mean busy time per step of each rank: its compute minus the time it waited "
                 "inside compute (train_compute_wait_seconds), its compute where it reports "
                 "no wait"),
        Recorded("busy_baseline", "job_stage:train_busy_seconds:baseline{straggler}",
                 ("job_id", "stage"),
                 "median busy time of a stage's ranks with the stage's slowest rank left out "
                 "(in a stage of two, the faster rank's): what a rank of the stage should take"),
        Recorded("busy_ratio", "job_rank:train_busy_seconds:ratio{straggler}", _RANK_NODE,
                 "rank's mean busy time divided by its stage's baseline"),
        Recorded("straggler_settled", "job_stage:train_straggler:settled{straggler_warmup}",
                 ("job_id", "stage"),
                 "1 for a stage whose baseline was recorded at every evaluation of the warm-up "
                 "window but one: its ranks are past the warm-up of a start or restart and "
                 "are judged; no series for a stage that is not"),
        Recorded("straggler_flag", "job_rank:train_straggler:flag{straggler}", _RANK_NODE,
                 "the rank's busy time divided by its stage's baseline, while that is above "
                 "the straggler threshold in a settled stage; no series while it is not"),
        Recorded("straggler_unbroken", "job_rank:train_straggler:unbroken{straggler_spell}",
                 _RANK_NODE,
                 "a rank flagged at every evaluation of its settled stage for longer than a "
                 "spell and the rate window together, valued as its flag; no series for any "
                 "other rank"),
        Recorded("straggler_excess", "job_rank:train_straggler:excess{straggler}", _RANK_NODE,
                 "what a flagged rank costs its job now: its ratio above 1, capped so that one "
                 "spell never reaches the recurrence cost; no series for any other rank"),
        Recorded("straggler_cost", "job_rank:train_straggler:cost{straggler_recurrence}",
                 _RANK_NODE,
                 "share of step time the rank's straggling cost its job over the recurrence "
                 "window (its excess summed over the stage's evaluations there); no series for "
                 "a rank that did not straggle in the window"),
        Recorded("straggler_page", "job_rank:train_straggler:page", _RANK_NODE,
                 "a rank that straggles now and either straggled without a break for longer "
                 "than a spell, or recurs: its cost reaches the recurrence cost and is the "
                 "dominance factor times the next rank's of its stage; valued as its flag"),
        Recorded("straggler_held", "job_rank:train_straggler:held{straggler_hold}", _RANK_NODE,
                 "a rank paged in the hold window that is still exported (or whose job is "
                 "down for a restart), valued as its newest page: what the alerts read"),
        Recorded("rank_place", "job_rank:train_rank_mesh:place",
                 ("job_id", "rank", "stage", "tp_group", "tp_rank", "cp_rank", "ep_rank",
                  "dp_rank", "reports_wait"),
                 "1 per rank that reports its place in the mesh: its TP group, its positions "
                 "in its TP, CP and EP groups, its data-parallel replica, and whether it "
                 "reports its wait inside compute (a fact of the job's shape, recorded every "
                 "facts_interval)"),
        Recorded("tp_pipeline", "job_tp_group:train_rank_mesh:pipeline",
                 ("job_id", "tp_group", "pp_group"),
                 "1 per TP group, naming the pipeline its first rank is in: the TP groups of "
                 "one model replica's stages share it (a fact of the job's shape)"),
        Recorded("mesh_combos", "job_stage:train_rank_mesh:combos",
                 ("job_id", "stage", "tp_rank", "cp_rank", "ep_rank"),
                 "ranks of a stage at each combination of positions in their TP, CP and EP "
                 "groups: the place of every rank read once for the positions (a fact of the "
                 "job's shape)"),
        Recorded("mesh_positions", "job_stage:train_rank_mesh:positions",
                 ("job_id", "stage", "mesh_axis", "mesh_position"),
                 "ranks of a stage at each position of its TP, CP and EP groups: the number of "
                 "the stage's groups of that kind (a fact of the job's shape)"),
        Recorded("straggler_lockstep", "job_rank:train_straggler:lockstep",
                 (*_RANK_NODE, "tp_group"),
                 "a held rank that reports no wait inside compute, with its TP group (its "
                 "straggle may be a peer's, in its TP group or another stage of its pipeline), "
                 "valued as its page; no series for any other rank"),
        Recorded("straggler_placed", "job_rank:train_straggler:placed",
                 (*_RANK_NODE, "tp_rank", "cp_rank", "ep_rank", "dp_rank", "reports_wait",
                  "obsgen_part"),
                 "with ruler: prometheus only: the held ranks (obsgen_part held) and the ranks "
                 "whose excess counts as moving (obsgen_part moving), each with its place in the "
                 "mesh, read once for both; no series for any other rank"),
        Recorded("straggler_positions", "job_rank:train_straggler:positions",
                 (*_RANK_NODE, "tp_rank", "cp_rank", "ep_rank"),
                 "a held rank that reports its wait, with its positions in its TP, CP and EP "
                 "groups, valued as its page; no series for any other rank"),
        Recorded("straggler_pattern", "job_rank:train_straggler:pattern",
                 (*_RANK_NODE, "tp_rank", "cp_rank", "ep_rank", "mesh_axis", "mesh_position"),
                 "a held rank at a position of a kind of group whose rank there is held in "
                 "at least the pattern share of the stage's groups of that kind, and in two or "
                 "more"),
        Recorded("straggler_moving_excess", "job:train_straggler_moving:excess",
                 ("job_id",),
                 "what the job's stragglers cost it now, of the ranks not paged in the "
                 "recurrence window: the largest excess of each data-parallel replica, summed "
                 "over the replicas"),
        Recorded("straggler_moving", "job:train_straggler_moving:cost{straggler_recurrence}",
                 ("job_id",),
                 "share of step time the job lost over the recurrence window to stragglers "
                 "that are not held: slowness that moves between ranks"),
        Recorded("straggler_moving_ranks",
                 "job:train_straggler_moving:ranks{straggler_recurrence}", ("job_id",),
                 "ranks that straggled in the recurrence window and are not held"),
        # gradients
        Recorded("grad_norm_finite", "job:train_grad_norm:finite_max", ("job_id",),
                 "job's gradient norm, NaN and Inf dropped"),
        Recorded("loss_finite", "job:train_loss:finite_max", ("job_id",),
                 "job's loss, NaN and Inf dropped"),
        Recorded("grad_norm_baseline", "job:train_grad_norm:median{grad_baseline}", ("job_id",),
                 "median finite gradient norm (explosion baseline)"),
        Recorded("grad_norm_long_baseline", "job:train_grad_norm:median{grad_long_baseline}",
                 ("job_id",), "median finite gradient norm (vanishing baseline)"),
        # pipeline
        Recorded("bubble", "job_stage:pipeline_bubble:ratio{rate}", ("job_id", "stage"),
                 "observed pipeline bubble of a stage, 1 - busy/wall"),
        Recorded("pp_size", "job:train_pipeline_stages:max", ("job_id",),
                 "pipeline-parallel size p of the job"),
        Recorded("microbatches", "job:train_microbatches_per_step:max", ("job_id",),
                 "microbatches per step m of the job"),
        Recorded("bubble_theoretical", "job:pipeline_bubble:theoretical_ratio", ("job_id",),
                 "1F1B bubble (p-1)/(m+p-1)"),
        # checkpoints
        Recorded("checkpoint_last", "job:train_checkpoint_timestamp_seconds:max", ("job_id",),
                 "time of the job's last checkpoint"),
        Recorded("checkpoint_seconds_rate", "job:train_checkpoint_seconds:rate{rate}", ("job_id",),
                 "checkpoint seconds per second of the job's rank that spends the most"),
        Recorded("train_seconds_rate", "job:train_step_seconds:rate{rate}", ("job_id",),
                 "training seconds per second of the job's rank that trains the most"),
        Recorded("checkpoint_rate", "job:train_checkpoint:rate{rate}", ("job_id",),
                 "checkpoints per second of the job's rank that completes the most"),
        Recorded("checkpoint_bytes_rate", "job:checkpoint_bytes_written:rate{rate}", ("job_id",),
                 "checkpoint bytes per second the job's ranks wrote"),
        Recorded("checkpoint_overhead", "job:train_checkpoint_overhead:ratio{checkpoint_overhead}",
                 ("job_id",),
                 "checkpoint seconds per training second, worst rank of the job"),
        # ranks
        Recorded("ranks_progressing", "job:train_ranks_progressing:count", ("job_id",),
                 "ranks of the job that completed a step in the progress window"),
        Recorded("ranks_stepped", "job:train_ranks_stepped:count", ("job_id",),
                 "ranks of the job whose running process has completed a step"),
        Recorded("world_size", "job:train_world_size:max", ("job_id",),
                 "world size the job's ranks report"),
        Recorded("current_step", "job:train_current_step:max", ("job_id",),
                 "job's last completed step"),
        Recorded("planned_steps", "job:train_planned_steps:max", ("job_id",),
                 "job's planned steps"),
        Recorded("step_mean", "job:train_step_seconds:mean{rate}", ("job_id",),
                 "job's mean step wall time"),
        # gpus: GPUs and hosts mapped to jobs, per-GPU signals
        Recorded("job_nodes", "job_node:train_ranks:count", ("job_id", "node"),
                 "ranks of the job on each host (the ranks' own node label): the host-to-job "
                 "map on any platform"),
        Recorded("job_gpus", "job_gpu:kube_pod_gpu:info", ("job_id", "node", "gpu", "UUID"),
                 "1 per GPU allocated to a pod of the job (dcgm-exporter's pod and namespace "
                 "joined to kube-state-metrics' pod labels): the GPU-to-job map on Kubernetes"),
        Recorded("sm_active_spread", "job_node:dcgm_sm_active:stddev", ("job_id", "node"),
                 "standard deviation of SM-active across the job's GPUs of one host"),
        Recorded("gpu_dbe_recent", "node_gpu:dcgm_ecc_dbe:increase{rate}", ("node", "gpu", "UUID"),
                 "uncorrectable ECC errors of a GPU in the rate window, only GPUs that had any"),
        Recorded("gpu_dbe", "node_gpu:dcgm_ecc_dbe:increase{rate}_max{gpu_errors}",
                 ("node", "gpu", "UUID"),
                 "most uncorrectable ECC errors of a GPU in one rate window within the window"),
        Recorded("gpu_remap_recent", "node_gpu:dcgm_uncorrectable_remapped_rows:increase{rate}",
                 ("node", "gpu", "UUID"),
                 "rows a GPU remapped after uncorrectable errors in the rate window, only GPUs "
                 "that remapped any"),
        Recorded("gpu_remap", "node_gpu:dcgm_uncorrectable_remapped_rows:increase{rate}_max{gpu_errors}",
                 ("node", "gpu", "UUID"),
                 "most rows a GPU remapped after uncorrectable errors in one rate window within "
                 "the window"),
        Recorded("gpu_nodes", "node:dcgm_gpus:count", ("node",),
                 "GPUs dcgm-exporter reports on each host, under its host label"),
        Recorded("gpu_xid_changed", "node_gpu:dcgm_xid:changes{rate}", ("node", "gpu", "UUID"),
                 "changes of a GPU's last XID code in the rate window, only GPUs whose code changed"),
        Recorded("gpu_xid_recent", "node_gpu:dcgm_xid:code_changed{gpu_errors}",
                 ("node", "gpu", "UUID"),
                 "the last XID code of a GPU whose code changed in the window, only those GPUs"),
        Recorded("gpu_xid_ecc", "node_gpu:dcgm_xid:ecc_code{gpu_errors}", ("node", "gpu", "UUID"),
                 "the ECC-class XID code a GPU raised in the window (the gauge changed to it)"),
        # fabric
        Recorded("link_recoveries", "job:nccl_link_recovery:increase{link_recovery}",
                 ("job_id",), "NCCL link recoveries of the job's ranks in the window"),
        Recorded("ib_tx_node", "node:node_infiniband_transmit_bytes:rate{rate}", ("node",),
                 "InfiniBand bytes per second a host sent, all HCAs and ports"),
        Recorded("ib_tx_job_node", "job_node:node_infiniband_transmit_bytes:rate{rate}",
                 ("job_id", "node"),
                 "InfiniBand transmit rate of each host of the job while it all-reduces"),
        Recorded("ib_tx_job_median", "job:node_infiniband_transmit_bytes:median{rate}",
                 ("job_id",), "median over the job's hosts of their InfiniBand transmit rate"),
        # recovery
        Recorded("run_id", "job:train_run_id:max", ("job_id",),
                 "restart generation of the job"),
        Recorded("checkpoint_throughput",
                 "job:checkpoint_write:bytes_per_second{checkpoint_throughput}", ("job_id",),
                 "checkpoint bytes the job wrote per second spent writing checkpoints"),
        # progress
        Recorded("step_baseline", "job:train_step_seconds:median{step_baseline}", ("job_id",),
                 "median of the job's mean step time over the baseline window"),
        Recorded("eta", "job:train_eta:seconds", ("job_id",),
                 "time to completion: remaining steps x current mean step time"),
        Recorded("planned_end", "job:train_planned_end_timestamp_seconds:max", ("job_id",),
                 "job's deadline (Unix seconds), from its ranks' launch config"),
        # inspector (the nccl-inspector preset)
        Recorded("inspector_time", "job_rank_comm:nccl_inspector_exec_seconds:mean",
                 ("job_id", "rank", "comm_name", "collective", "message_size"),
                 "the NCCL Inspector's mean time per collective, mapped to the rank"),
        Recorded("inspector_busbw", "job_rank_comm:nccl_inspector_bus_bandwidth_gbs:gmean",
                 ("job_id", "rank", "comm_name", "collective", "message_size"),
                 "the NCCL Inspector's geometric mean bus bandwidth, mapped to the rank"),
        # panels (dashboards.records)
        Recorded("tp_time_rank", "job_rank:nccl_tp_collective_seconds:mean{rate}", ("job_id", "rank"),
                 "mean time per TP collective of each rank (all TP ops)"),
        Recorded("dp_allreduce_rank", "job_rank:nccl_dp_allreduce_seconds:mean{rate}",
                 ("job_id", "rank"), "mean time per DP all-reduce of each rank"),
        Recorded("sm_active_rank", "job_rank:dcgm_sm_active:max", ("job_id", "rank", "node"),
                 "SM-active of the GPU each rank runs on"),
        Recorded("nvlink_rank", "job_rank:dcgm_nvlink_bytes:sum", ("job_id", "rank", "node"),
                 "NVLink transmit + receive bytes per second of the GPU each rank runs on"),
        Recorded("gpu_dbe_job", "job:dcgm_ecc_dbe:increase{rate}", ("job_id",),
                 "uncorrectable ECC errors of the job's GPUs in the rate window"),
        Recorded("gpu_sbe_job", "job:dcgm_ecc_sbe:increase{rate}", ("job_id",),
                 "corrected ECC errors of the job's GPUs in the rate window"),
        Recorded("gpu_xid_job", "job:dcgm_xid_changed_gpus:count{rate}", ("job_id",),
                 "GPUs of the job whose last XID code changed in the rate window"),
        Recorded("nvlink_recovery_job", "job:dcgm_nvlink_recovery:increase{rate}", ("job_id",),
                 "NVLink recovery errors of the job's GPUs in the rate window"),
        Recorded("exposed_comm_job", "job:train_exposed_comm_seconds:mean{rate}", ("job_id",),
                 "mean communication time per step not overlapped with compute, over the ranks"),
        Recorded("comm_per_step_job", "job:nccl_collective_seconds:per_step{rate}", ("job_id",),
                 "time per step the mean rank spends in collectives, all groups"),
        Recorded("ib_line_rate_job", "job:node_infiniband_rate_bytes_per_second:max", ("job_id",),
                 "InfiniBand line rate of the job's fastest host (all its ports)"),
        # nccl
        Recorded("late_arrival_ratio",
                 "job_rank_group:nccl_collective_last_arrival:ratio{late_arrival}",
                 ("job_id", "rank", "group", "node"),
                 "share of the aligned collectives of a group the rank took part in that it "
                 "arrived last in (only when enough were aligned)"),
        Recorded("late_arrival_ranks", "job_group:nccl_collective_last_arrival:ranks",
                 ("job_id", "group"),
                 "ranks of the job with a late-arrival share in each kind of group: the "
                 "sidecar's alignment runs"),
        Recorded("late_arrival_settled",
                 "job_group:nccl_late_arrival:settled{straggler_warmup}", ("job_id", "group"),
                 "1 for a kind of group whose ranks had a late-arrival share at every "
                 "evaluation of the warm-up window but one; no series for any other"),
        Recorded("late_arrival_flag", "job_rank_group:nccl_late_arrival:flag{late_arrival}",
                 ("job_id", "rank", "group", "node"),
                 "the rank's late-arrival share while it is above the late-arrival fraction "
                 "in a settled kind of group; no series while it is not"),
        Recorded("late_arrival_unbroken",
                 "job_rank_group:nccl_late_arrival:unbroken{straggler_spell}",
                 ("job_id", "rank", "group", "node"),
                 "a rank flagged late at every evaluation for longer than a spell and the "
                 "late-arrival window together, valued as its flag"),
        Recorded("late_arrival_held", "job_rank_group:nccl_late_arrival:held{straggler_hold}",
                 ("job_id", "rank", "group", "node"),
                 "a rank late without a break in the hold window that still takes part (or "
                 "whose group kind has stopped for a restart), valued as its newest flag"),
        Recorded("late_arrival_positions", "job_rank:nccl_late_arrival:positions",
                 ("job_id", "rank", "stage", "tp_rank", "cp_rank", "ep_rank"),
                 "1 for a late rank (held, or flagged now), with its stage and its positions in "
                 "its TP, CP and EP groups (from its place); no series for any other rank"),
        Recorded("late_arrival_pattern", "job_rank:nccl_late_arrival:pattern",
                 ("job_id", "rank", "stage", "tp_rank", "cp_rank", "ep_rank", "mesh_axis",
                  "mesh_position"),
                 "1 for a late rank at a position of a kind of group whose rank there is late "
                 "in at least the pattern share of the stage's groups of that kind, and in "
                 "two or more"),
    )
}

# Bucket boundaries of prometheus_client's default histogram (its DEFAULT_BUCKETS).
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   7.5, 10.0, float("inf"))


class _Names:
    """Attribute access to contract entries (``M.train_step_seconds``), so code outside
    this module refers to a name without spelling it as a string."""

    def __init__(self, entries: dict):
        self.__dict__.update(entries)

    def __iter__(self):
        return iter(self.__dict__.values())


M = _Names(METRICS)
L = _Names(LABELS)
R = _Names(RECORDED)

# The dcgm-exporter fields obsgen reads that its default counters CSV (4.5.3) leaves out,
# commented out or not listed: examples/dcgm-exporter/obsgen-counters.csv enables them.
DCGM_NOT_IN_DEFAULT_CSV = frozenset(m.key for m in (
    M.DCGM_FI_PROF_SM_ACTIVE, M.DCGM_FI_PROF_NVLINK_TX_BYTES, M.DCGM_FI_PROF_NVLINK_RX_BYTES,
    M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
    M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, M.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
    M.DCGM_FI_DEV_CLOCKS_EVENT_REASONS))
