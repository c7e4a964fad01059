"""The NCCL sidecar of a synthetic job (``Job.nccl``): ``obsgen nccl-exporter`` on every
node, aligning the ranks of each communicator in each collective (the rank whose own work
finished last arrives last, noise deciding between equals), and restarting without its
state on an ``ExporterRestart``. The communicators are the TP groups in a job with tensor
parallelism (lockstep peers wait for the slowest in every per-layer collective), the DP
groups with ``NcclExporter(group="dp")``, each node's ranks otherwise. A mixin of ``_Sim``."""
from __future__ import annotations

from ..contract import L, M, METRICS
from .faults import ExporterRestart


class _Sidecar:
    def exporter_down(self, t: float) -> bool:
        restarts = [f for f in self.j.faults if isinstance(f, ExporterRestart)]
        due = sum(1 for f in restarts if f.at + f.gap <= t)
        if due > self.exporter_gen:  # back without its state: counters from zero
            self.exporter_gen = due
            self.ncounters.clear()
        return any(f.at <= t < f.at + f.gap for f in restarts)

    def _nkey(self, rank: int, name: str, **extra: str) -> tuple:
        j = self.j
        node = self._host(rank)
        labels = {L.job.key: j.nccl.scrape_job,
                  L.instance.key: f"10.{j.subnet}.{self.gen * 16 + node // 250}.{node % 250 + 1}:{j.nccl.port}",
                  L.job_id.key: j.job_id, L.rank.key: str(rank), **extra}
        return tuple(sorted({"__name__": name, **labels}.items()))

    def _ninc(self, rank: int, name: str, by: float) -> None:
        nc = self.j.nccl
        labels = {L.op.key: nc.op, L.group.key: nc.group}
        if L.op.key not in METRICS[name].labels:  # the alignment counters: per group, on
            del labels[L.op.key]                  # the host of the rank's records
            labels[L.node.key] = self._node_name(rank)
        key = self._nkey(rank, name, **labels)
        self.ncounters[key] = self.ncounters.get(key, 0.0) + by

    def nccl_advance(self, steps: int, means: list[float], t: float) -> None:
        """``steps`` steps of aligned collectives on every node's communicator."""
        j, nc = self.j, self.j.nccl
        for comm in self.communicators():
            members = [r for r in comm if not self.lost(r, t)]
            if len(members) < 2:
                continue
            count = steps * nc.aligned_per_step
            last: dict[int, int] = {}
            for _ in range(count):
                arrive = sorted((means[r] * (1 + j.noise * self.nrng.gauss(0, 1)), r)
                                for r in members)
                if arrive[-1][0] - arrive[-2][0] >= nc.resolution:
                    last[arrive[-1][1]] = last.get(arrive[-1][1], 0) + 1
            for r in members:
                self._ninc(r, M.nccl_collective_aligned_total.key, count)
                self._ninc(r, M.nccl_collective_last_arrival_total.key, last.get(r, 0))
                self._ninc(r, M.nccl_collective_bytes_total.key, count * nc.bytes_per_collective)

    def communicators(self) -> list[tuple[int, ...]]:
        j = self.j
        if (j.nccl.group == "tp" and j.tp > 1) or j.nccl.group == "dp":
            return sorted({self.mesh.group(r, j.nccl.group) for r in range(j.ranks)})
        return [tuple(range(first, min(first + j.ranks_per_node, j.ranks)))
                for first in range(0, j.ranks, j.ranks_per_node)]

    def nccl_samples(self) -> dict[tuple, float]:
        j, nc = self.j, self.j.nccl
        if not self.ncounters:  # every series from the exporter's start, at 0
            for r in range(j.ranks):
                for m in (M.nccl_collective_aligned_total, M.nccl_collective_last_arrival_total,
                          M.nccl_collective_bytes_total):
                    self._ninc(r, m.key, 0)
        out = dict(self.ncounters)
        for comm in self.communicators():
            for r in comm:
                out[self._nkey(r, M.nccl_communicator_ranks.key, **{
                    L.group.key: nc.group, L.node.key: self._node_name(r)})] = float(len(comm))
        return out
