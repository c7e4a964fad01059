"""The NCCL Inspector's own Prometheus textfile, as node_exporter's textfile collector
serves it, emulated from the code that writes it (not from obsgen's idea of it), NCCL
v2.30.7-1 (the newest tag; the same at v2.30.3-1):

* plugins/profiler/inspector/inspector_prom.cc: one file per GPU,
  ``<NCCL_INSPECTOR_DUMP_DIR>/nccl_inspector_metrics_<device UUID>.prom``, rewritten at
  each dump with the collectives drained since the last one, one bucket per
  (nranks, n_nodes, collective, message-size range, communicator name, algo_proto);
  each bucket as two lines, ``nccl_bus_bandwidth_gbs{...} %.6g`` (the geometric mean of
  the collectives' bus bandwidth, 0 when none had one) and
  ``nccl_collective_exec_time_microseconds{...} %.6g`` (the mean execution time), with
  the labels in the order ``inspectorPromGetLabelsColl`` writes them: version ("v" and
  NCCL_PROFILER_INTERFACE_VERSION 5 "." the format minor 1), slurm_job_id (``unknown``
  off Slurm), node (``gethostname()``), gpu (``GPU`` and the process's CUDA device id),
  comm_name, n_nodes, nranks, collective (``ncclFuncToString``), message_size
  (``inspectorPromFormatMessageSizeRange`` of the range's lower bound), algo_proto; no
  ``# TYPE`` line.
* inspector.cc: a Prometheus dump interval under 30 s is raised to 30 s.
* node_exporter's textfile collector reads every ``*.prom`` file at each scrape and leaves
  out a file it cannot parse (a dump caught half-written: the plugin writes in place).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from obsgen.synth import STALE
from obsgen.synth.job import Scrape

VERSION = "v5.1"
UNITS = ("B", "KB", "MB", "GB", "TB")


def size_range(nbytes: int) -> str:
    """inspectorPromFormatMessageSizeRange: ``<floor>-<floor+1><unit>`` in powers of 1024."""
    if nbytes == 0:
        return "0B"
    value, unit = float(nbytes), 0
    while value >= 1024.0 and unit < 4:
        value /= 1024.0
        unit += 1
    lower = max(math.floor(max(value, 1.0)), 1)
    return f"{lower}-{lower + 1}{UNITS[unit]}"


def g6(v: float) -> str:
    """C's %.6g."""
    return "%.6g" % v


@dataclass(frozen=True)
class Bucket:
    comm_name: str
    collective: str
    nbytes: int
    nranks: int
    n_nodes: int
    algo_proto: str = "Ring_Simple"


def file_text(node: str, gpu: str, buckets: list[tuple[Bucket, float, float]]) -> str:
    """One dump: (bucket, bus bandwidth GB/s, execution time us) per bucket with data."""
    out = []
    for b, busbw, exec_us in buckets:
        labels = (f'version="{VERSION}",slurm_job_id="unknown",node="{node}",gpu="{gpu}",'
                  f'comm_name="{b.comm_name}",n_nodes="{b.n_nodes}",nranks="{b.nranks}",'
                  f'collective="{b.collective}",message_size="{size_range(b.nbytes)}",'
                  f'algo_proto="{b.algo_proto}"')
        out.append(f"nccl_bus_bandwidth_gbs{{{labels}}} {g6(busbw)}\n"
                   f"nccl_collective_exec_time_microseconds{{{labels}}} {g6(exec_us)}\n")
    return "".join(out)


def served(text: str) -> dict[tuple, float]:
    """What node_exporter's textfile collector serves of one file (its scrape adds job and
    instance): parsed as Prometheus' text format."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[tuple(sorted({"__name__": s.name, **s.labels}.items()))] = s.value
    return out


@dataclass(frozen=True)
class InspectorJob:
    """A job of ``hosts`` x ``gpus`` ranks (rank = host * gpus + local rank) whose processes
    run the Inspector with ``NCCL_INSPECTOR_PROM_DUMP=1`` and obsgen.instrument's
    ``use_cuda_events()``. One communicator per host (``comm_name`` ``tp``, node-local) and
    one across hosts per local rank (``dp``). ``one_gpu_per_process``: every process sees
    only its GPU (CUDA device 0). ``slow``: (rank, factor) computes that much slower, so it
    arrives last and its peers wait for it. ``ends``: seconds, when the processes end
    (their files stay). ``torn``: scrape times that meet every file half-written."""
    job_id: str = "llm-a"
    hosts: int = 2
    gpus: int = 4
    dump_every: float = 30.0
    tp_us: float = 1200.0  # mean TP AllReduce time of a rank nobody waits for
    dp_us: float = 25000.0
    slow: tuple[int, float] | None = None
    one_gpu_per_process: bool = False
    ends: float | None = None
    torn: tuple[float, ...] = ()
    no_busbw: bool = False  # the DP bucket's collectives carried no bus bandwidth

    def host(self, rank: int) -> str:
        return f"{self.job_id}-worker-{rank // self.gpus}"

    def device(self, rank: int) -> str:
        return "GPU0" if self.one_gpu_per_process else f"GPU{rank % self.gpus}"

    def dumps(self, rank: int) -> list[tuple[Bucket, float, float]]:
        """The buckets of one of this rank's dumps: in a collective the peers of a slow
        rank wait for it, so it is the one with the least time inside."""
        wait = 0.0
        if self.slow:
            r, factor = self.slow
            same_host = r // self.gpus == rank // self.gpus
            wait = 0.0 if rank == r else (factor - 1.0) * 800.0 if same_host else 0.0
        tp = Bucket("tp", "AllReduce", 8 << 20, self.gpus, 1)
        dp = Bucket("dp", "AllReduce", 16 << 20, self.hosts, self.hosts)
        return [(tp, 180.0, self.tp_us + wait), (dp, 0.0 if self.no_busbw else 42.5, self.dp_us)]

    def run(self, until: float):
        ranks = range(self.hosts * self.gpus)
        t = 0.0
        while t <= until:
            samples: dict[tuple, float | str] = {}
            alive = self.ends is None or t < self.ends
            for rank in ranks:
                scrape = {"job": "node-exporter", "instance": f"{self.host(rank)}:9100"}
                # a file exists from the first dump on, and stays after the process ends
                if t >= self.dump_every:
                    text = file_text(self.host(rank), self.device(rank), self.dumps(rank))
                    for key, v in served(text).items():
                        # node_exporter left the half-written file out of a scrape that
                        # succeeded: Prometheus marks the file's series stale
                        samples[tuple(sorted({**dict(key), **scrape}.items()))] = (
                            STALE if t in self.torn else v)
                info = {"__name__": "train_rank_gpu_info", "job": "training",
                        "instance": f"{self.host(rank)}:{9400 + rank % self.gpus}",
                        "job_id": self.job_id, "rank": str(rank), "node": f"node-{rank // self.gpus}",
                        "UUID": f"GPU-{rank:08d}-0000-0000-0000-000000000000",
                        "process_host": self.host(rank), "cuda_device": self.device(rank)}
                samples[tuple(sorted(info.items()))] = 1.0 if alive else STALE
            yield Scrape(t, samples)
            t += 30.0
