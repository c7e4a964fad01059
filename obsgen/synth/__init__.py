"""A synthetic distributed training job that emits the metric contract as scrapes would.

One model serves the promtool fixtures, ``obsgen simulate`` and the scale benchmark, so
they all see the same physics:

* Synchronous steps: every rank's step ends at the gradient collective, so step wall
  time is the same on every rank: the slowest rank's compute plus the transfer. A rank's
  time inside the collective is the step time minus its own compute, so the slow rank
  shows the *least* collective time (it arrives last and waits for nobody).
* Noise: per-step compute varies by ``noise`` (relative), ranks differ persistently by
  ``rank_spread`` (a normal spread cut at twice that: healthy GPUs stay that close), the gradient norm by 10%, and warm-up steps after every (re)start are
  slower, with a large early gradient norm.
* Histograms have prometheus_client's default buckets, filled from the step-time
  distribution; counters reset on restart and the scrape labels (``job``, ``instance``)
  change with the new processes; vanished targets get staleness markers, as Prometheus
  writes them.

* With ``nccl`` set, the NCCL sidecar's series (``obsgen nccl-exporter``, one per node)
  come along: each node's ranks form one communicator, and in every aligned collective
  the rank whose compute finished last arrives last (noise decides between equals).

Time is in seconds from 0. ``Job.run()`` yields one ``Scrape`` per scrape interval.
``elastic(job, at, gap, ranks)`` gives the two runs of an elastic resize (the world size
changes, the ranks take new places in the mesh); scrape them together.

The parts: ``faults`` (what can go wrong), ``job`` (a job's shape and settings),
``sim`` (the physics, step by step), ``emit`` (the series the ranks publish),
``sidecar`` (the NCCL exporter's series).
"""
from __future__ import annotations

from .faults import (CheckpointStall, ExporterRestart, GradNaN, GradSpike, GradVanish,
                     HostWork, MovingSlow, Pauses, RankLoss, Recurring, Restart, RotatingSlow,
                     ScrapeMisses, SeqImbalance, SlowRank, StageBubble, WarmRank)
from .job import STALE, Job, NcclExporter, Scrape, elastic, gpu_uuid
from .sim import _Sim

__all__ = ["STALE", "CheckpointStall", "ExporterRestart", "GradNaN", "GradSpike", "GradVanish",
           "HostWork", "Job", "MovingSlow", "Pauses", "NcclExporter", "RankLoss", "Recurring",
           "Restart", "RotatingSlow", "Scrape", "ScrapeMisses", "SeqImbalance", "SlowRank",
           "StageBubble", "WarmRank", "elastic", "gpu_uuid", "_Sim"]
