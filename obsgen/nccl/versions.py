"""What each NCCL release line's Inspector writes, and the settings the sidecar needs.

Read from NVIDIA/nccl: ``ext-profiler/inspector/`` at v2.28.3-1 (the plugin's first
release), ``plugins/profiler/inspector/`` at v2.29.7-1 and v2.30.3-1 .. v2.30.7-1 (the
README, ``inspector.cc`` for the defaults, ``inspector_json.cc`` for the records). The
rows are rendered into docs/nccl.md; the NCCL sidecar guide points there.
"""
from __future__ import annotations

# (what the sidecar gets, first NCCL version, what it reads)
FEATURES = (
    ("collective kernel time, bytes, bus bandwidth per rank, op and group", "2.28.3",
     "coll_perf records"),
    ("cross-rank alignment: last arrival, arrival skew, tail", "2.28.3",
     "coll_perf with coll_timing_source kernel_gpu or kernel_cpu"),
    ("every completed collective, not one per dump", "2.30",
     "the ring of NCCL_INSPECTOR_DUMP_COLL_RING_SIZE (1024) per communicator"),
    ("pipeline Send/Recv time and bytes, per peer", "2.30",
     "p2p_perf records (NCCL_INSPECTOR_ENABLE_P2P=1, the default)"),
    ("parallel group from the communicator's name, without a group map", "2.30",
     "header.comm_name, when the framework names its communicators"),
)

# (variable, 2.28-2.29, 2.30+, what the sidecar needs)
SETTINGS = (
    ("NCCL_PROFILER_PLUGIN", "path of libnccl-profiler-inspector.so",
     "same", "set"),
    ("NCCL_INSPECTOR_ENABLE", "1 enables the plugin (default 0)", "same", "1"),
    ("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS",
     "unset or 0: no dump thread, nothing written; N > 0: a dump every N us",
     "unset or -1: written only when the communicator is torn down; 0: dumps continuously; "
     "N > 0: a dump every N us",
     "a positive interval: 2.28-2.29 500 .. 10000 (each dump writes one collective per "
     "communicator), 2.30 1000000 (each dump drains the ring)"),
    ("NCCL_INSPECTOR_DUMP_DIR", "output directory (default nccl-inspector-<SLURM_JOBID> or "
     "nccl-inspector-unknown-jobid)", "same", "a directory the sidecar can read"),
    ("NCCL_INSPECTOR_DUMP_VERBOSE", "1 adds event traces (default 0)", "same",
     "either; 0 keeps the files small"),
    ("NCCL_INSPECTOR_PROM_DUMP", "1 writes a node_exporter textfile instead of JSON "
     "(2.29+)", "same", "0: the sidecar reads the JSON lines"),
    ("NCCL_INSPECTOR_ENABLE_P2P", "-", "1 (default) records Send/Recv", "1 for the PP panels"),
    ("NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING", "-",
     "1 (default): operations without GPU kernel timing are not written", "either"),
    ("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "-",
     "operations below this size (default 8192) are not written", "the default"),
    ("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE / _P2P_RING_SIZE", "-",
     "completed operations kept per communicator between dumps (default 1024; the oldest "
     "are overwritten)", "above the operations of one dump interval"),
)
