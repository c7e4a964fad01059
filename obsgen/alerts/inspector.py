"""Inspector: the NCCL Inspector's own Prometheus textfile, mapped to the job's ranks.

Rendered only with the ``nccl-inspector`` preset. From NCCL 2.30 the Inspector profiler
plugin can write, instead of its JSON lines, one node_exporter textfile per GPU
(``NCCL_INSPECTOR_PROM_DUMP=1``): at every dump (at least 30 s apart) it rewrites the file
with the mean kernel time (``nccl_collective_exec_time_microseconds``) and the geometric
mean bus bandwidth (``nccl_bus_bandwidth_gbs``) of the collectives since the last dump,
per communicator name, collective, message-size range and algorithm_protocol. Its series
name no job and no global rank: each carries the process's host name (``node``, what
``gethostname()`` returns: a pod's name on Kubernetes) and its CUDA device (``gpu``,
``GPU`` and the ordinal the process set).

obsgen.instrument's ``tel.torch.use_cuda_events()`` publishes, on ``train_rank_gpu_info``,
the same two for every rank (``process_host``, ``cuda_device``). These records join the
two, so the Inspector's figures land on the rank that produced them:
``job_rank_comm:nccl_inspector_exec_seconds:mean``, the mean time per collective in
seconds, and ``job_rank_comm:nccl_inspector_bus_bandwidth_gbs:gmean``, the bus bandwidth
in GB/s (a dump whose collectives had none, written as 0 by the Inspector, is left out),
per rank, communicator name, collective and message-size range (the algorithms of one
range averaged). Each reads the newest dump within ``windows.inspector`` (2m), which bridges
a scrape that met a half-written file: the Inspector rewrites the file in place, and
node_exporter skips a file it cannot parse.

A host and device that two live ranks claim is mapped to neither: when every process sees
only its own GPU (``CUDA_VISIBLE_DEVICES`` set per task, as some Slurm GPU bindings do),
every rank of a host writes ``gpu="GPU0"`` and their files' series carry the same labels. A finished job's files stay on disk and node_exporter keeps serving them,
but its ranks' ``train_rank_gpu_info`` ends with their processes, so nothing is mapped;
a new job on the same GPU inherits the old file until its first dump.

No alert reads these records. The textfile gives a mean over an interval of unknown size
(no count), so neither time per step nor a rate can be had from it, and no record per
collective, so nobody can tell who arrived last (Train_Straggler_LateArrival and the NCCL
panels of the views need the NCCL sidecar: docs/guides/nccl-sidecar.md). In a collective
every rank waits for the last one, so the rank with the shortest time per collective of
its communicator is the one the others waited for; the DP view's NCCL Inspector row
shows it.
"""
from __future__ import annotations

from ..contract import L, M, R
from ..model import Family, Record, expr
from ..promql import Ctx, quote

NAME = "inspector"
MICRO = "0.000001"


def build(c: Ctx) -> Family:
    window = c.w("inspector")
    host, dev = c.l(L.process_host), c.l(L.cuda_device)
    keys = (L.process_host, L.cuda_device)
    kept = (L.comm_name, L.collective, L.message_size)
    info = c.m(M.train_rank_gpu_info, extra=(f'{host}!=""', f'{dev}!=""'))
    claimed = f"max {c.by(*keys, L.job_id, L.rank)} ({info})"

    def per_rank(metric, tail: str = "", positive: bool = False) -> str:
        newest = f"last_over_time({c.m(metric)}[{window}])"
        if positive:
            newest = f"({newest} > 0)"
        # a host and device that one live rank claims: two (one GPU per process) name nobody
        return f"""
            max {c.by(L.job_id, L.rank, *kept)} (
              avg {c.by(*keys, *kept)} (
                label_replace(
                  label_replace({newest}, {quote(host)}, "$1", {quote(c.l(L.inspector_host))}, "(.*)"),
                  {quote(dev)}, "$1", {quote(c.l(L.inspector_gpu))}, "(.*)"
                )
              ){tail}
              * {c.on(*keys)} group_left ({c.l(L.job_id)}, {c.l(L.rank)})
              (
                {claimed}
                unless {c.on(*keys)}
                (count {c.by(*keys)} ({claimed}) > 1)
              )
            )
        """

    rules = (
        Record(c.rname(R.inspector_time),
               expr(per_rank(M.nccl_collective_exec_time_microseconds, f" * {MICRO}"))),
        Record(c.rname(R.inspector_busbw),
               expr(per_rank(M.nccl_bus_bandwidth_gbs, positive=True))),
    )
    return Family(NAME, __doc__, rules)
