"""How a synthetic job's ranks publish what they did: the contract's series with scrape
labels, counters and prometheus_client's default histogram buckets, and the gauges of
each scrape. A mixin of ``_Sim``: it reads the simulation's state and never changes its
physics."""
from __future__ import annotations

import math

from ..contract import DEFAULT_BUCKETS, L, M
from .job import gpu_uuid


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _le(le: float) -> str:
    """Bucket label as prometheus_client writes it (0.005, 1.0, +Inf)."""
    return "+Inf" if math.isinf(le) else repr(float(le))


# Every histogram with prometheus_client's default buckets, the NCCL sidecar's too (whose
# contract buckets are finer): rules read _sum and _count only, and the fixtures of the
# families that carry nccl_collective_duration_seconds stay as they were.
_BUCKETS = tuple((le, _le(le)) for le in DEFAULT_BUCKETS)


class _Emit:
    def labels(self, rank: int) -> dict[str, str]:
        """Scrape and contract labels of every series of ``rank`` (job, instance, job_id,
        rank, node), as ``run`` writes them."""
        return {k: v for k, v in self._make_key(rank, "_") if k != "__name__"}

    def _key(self, rank: int, name: str, **extra: str) -> tuple:
        cache_key = (rank, self.gen, name, *extra.items())
        key = self._keys.get(cache_key)
        if key is None:
            key = self._keys[cache_key] = self._make_key(rank, name, **extra)
        return key

    def _make_key(self, rank: int, name: str, **extra: str) -> tuple:
        base = self._base.get((rank, self.gen))
        if base is None:
            j = self.j
            node = self._host(rank)
            base = self._base[(rank, self.gen)] = {
                L.job.key: j.scrape_job,
                # New processes after a restart get new pod addresses, hence new instances.
                L.instance.key: (f"10.{j.subnet}.{self.moved * 16 + node // 250}.{node % 250 + 1}:"
                                 f"{9400 + rank % j.ranks_per_node}"),
                L.job_id.key: j.job_id,
                L.rank.key: str(rank),
                L.node.key: self._node_name(rank),
            }
        return tuple(sorted({"__name__": name, **base, **extra}.items()))

    def _inc(self, rank: int, name: str, by: float, **extra: str) -> None:
        key = self._key(rank, name, **extra)
        counters = self.counters[rank]
        counters[key] = counters.get(key, 0.0) + by

    def _observe(self, rank: int, base: str, n: int, total: float, mean: float, sd: float,
                 **extra: str) -> None:
        if base != M.nccl_collective_duration_seconds.key:
            extra = {L.stage.key: str(self.stage_of(rank)), **extra}
        # the histogram's series keys, built once per histogram and process generation
        hist = (rank, self.gen, base, *extra.items())
        keys = self._hists.get(hist)
        if keys is None:
            keys = self._hists[hist] = (
                self._key(rank, base + "_count", **extra), self._key(rank, base + "_sum", **extra),
                tuple(self._key(rank, base + "_bucket", le=label, **extra) for _, label in _BUCKETS))
        count, sum_, buckets = keys
        counters = self.counters[rank]
        counters[count] = counters.get(count, 0.0) + n
        counters[sum_] = counters.get(sum_, 0.0) + max(total, 0.0)
        if not self.j.buckets:
            return
        sd = max(sd, 1e-9)
        for (le, _), key in zip(_BUCKETS, buckets):
            share = 1.0 if le == math.inf else _phi((le - mean) / sd)
            counters[key] = counters.get(key, 0.0) + round(n * share)

    def _other_parallelisms(self, r: int, n: int, wait: float) -> None:
        j = self.j
        for op, group, nbytes, secs in j.collectives:
            self._observe(r, M.nccl_collective_duration_seconds.key, n, n * secs, secs,
                          secs * j.noise, op=op, group=group)
            self._inc(r, M.nccl_collective_bytes_total.key, n * nbytes, op=op, group=group)
        for e in range(r, j.experts, j.ranks):  # expert e lives on rank e % ranks
            share = 1.0 + 0.3 * math.sin(e)  # a fixed, uneven routing
            self._inc(r, M.moe_expert_tokens_total.key, n * j.tokens_per_step / j.experts * share,
                      expert=str(e))
        if j.exposed_share is not None:
            exposed = wait * j.exposed_share
            self._observe(r, M.train_exposed_comm_seconds.key, n, n * exposed, exposed,
                          exposed * j.noise)

    def gauges(self, rank: int, grad: float, loss: float) -> dict[tuple, float]:
        j = self.j
        out = {
            self._key(rank, M.train_world_size.key): float(j.ranks),
            self._key(rank, M.train_current_step.key): float(self.step),
            self._key(rank, M.train_planned_steps.key): float(j.planned_steps),
            self._key(rank, M.train_checkpoint_timestamp_seconds.key): self.last_ckpt_time,
            self._key(rank, M.train_run_id.key): float(self.gen),
            self._key(rank, M.train_pipeline_stages.key): float(j.pp),
            self._key(rank, M.train_microbatches_per_step.key): float(j.microbatches),
        }
        if j.planned_end is not None:
            out[self._key(rank, M.train_planned_end_timestamp_seconds.key)] = j.start + j.planned_end
        if j.reports_mesh:
            place = self.mesh.place(rank).labels()
            out[self._key(rank, M.train_rank_mesh_info.key, **place)] = 1.0
        if j.gpu_info:  # GPU rank % ranks_per_node of its host, as dcgm-exporter names it
            uuid = gpu_uuid(self._node_name(rank), rank % j.ranks_per_node)
            out[self._key(rank, M.train_rank_gpu_info.key, UUID=uuid)] = 1.0
        if j.grad_from_all_ranks or rank == j.ranks - 1:
            out[self._key(rank, M.train_grad_norm.key)] = grad
            out[self._key(rank, M.train_loss.key)] = loss
            if j.nonfinite_gauge:
                for signal, v in (("grad_norm", grad), ("loss", loss)):
                    key = self._key(rank, M.train_nonfinite.key, **{L.signal.key: signal})
                    out[key] = 0.0 if math.isfinite(v) else 1.0
        return out

    def init_counters(self) -> None:
        """Every counter and histogram series exists from process start with 0, as
        prometheus_client serves them once their labels are set."""
        j = self.j
        for r in range(j.ranks):
            if self.counters[r]:
                continue
            self._inc(r, M.train_checkpoint_total.key, 0)
            self._inc(r, M.train_checkpoint_seconds_total.key, 0)
            self._observe(r, M.train_compute_seconds.key, 0, 0.0, 1.0, 1.0)
            if j.exports_wait:
                self._observe(r, M.train_compute_wait_seconds.key, 0, 0.0, 1.0, 1.0)
            self._observe(r, M.train_step_seconds.key, 0, 0.0, 1.0, 1.0)
            self._observe(r, M.nccl_collective_duration_seconds.key, 0, 0.0, 1.0, 1.0,
                          op="AllReduce", group="dp")
            self._inc(r, M.nccl_collective_bytes_total.key, 0, op="AllReduce", group="dp")
            if j.emit_pipeline or (j.emit_pipeline is None and j.pp > 1):
                for phase in ("forward", "backward"):
                    self._observe(r, M.pipeline_stage_seconds.key, 0, 0.0, 1.0, 1.0, phase=phase)
            self._other_parallelisms(r, 0, 0.0)
