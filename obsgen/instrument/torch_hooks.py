"""PyTorch helpers: per-group collective time and bytes, DDP comm hook, CUDA-event clock.

Imported only when a loop uses ``tel.torch`` (``obsgen.instrument`` itself never imports
torch). Three ways in:

* ``tel.torch.register_ddp(ddp_model)``: a DDP comm hook around torch's own
  ``allreduce_hook`` (or the hook you pass). Each bucket handed to the hook marks the
  rank's gradient as ready (the end of its compute) and the bucket's all-reduce is timed
  to completion, with the bucket's bytes, in the group DDP reduces over.
* ``tel.torch.patch_distributed()``: wraps ``torch.distributed``'s collective and p2p
  functions (all_reduce, all_gather[_into_tensor], reduce_scatter[_tensor], broadcast,
  reduce, all_to_all[_single], send/recv, isend/irecv, batch_isend_irecv), so every call
  made through the module (``torch.distributed.all_reduce(...)``, as Megatron does) is
  timed and counted. Names imported before patching (``from torch.distributed import
  all_reduce``) are not seen. Returns an undo function.
* ``tel.torch.name_group(group, "tp")``: names a process group (dp, tp, pp, ep, cp, fsdp)
  so its collectives are labelled with it; ``group=None`` means the default (WORLD)
  group. Unnamed groups are ``unknown``, never a guess.
* ``tel.torch.mesh_from_megatron()`` names Megatron's groups from its ``parallel_state``
  and publishes the rank's place in the mesh (``train_rank_mesh_info``);
  ``tel.torch.mesh_from_groups()`` publishes it from the groups named by hand.

Collectives of a non-gradient group (tp, cp, ep, pp) and p2p ops inside a compute block
are the block's wait (``train_compute_wait_seconds``): time the rank does not compute,
waiting for its peers or the transfer, the union of their intervals within the block.
An asynchronous one counts while it is in flight, so a pipeline recv posted early and
overlapped with compute (Megatron's ``overlap_p2p_comm``) counts as wait though the rank
computed meanwhile.

Bytes are what this rank contributes to the collective: its input buffer (the whole list
for list-based calls), the received tensor for recv. That answers "how much does each
parallel group move" per rank; the wire bytes of an algorithm (ring all-reduce moves
2(n-1)/n of it) follow from the op and group size.

Time is the interval from the call to completion, waiting for late peers included. For
synchronous calls it is the call itself; for asynchronous ones (``async_op=True``, DDP
buckets) completion is observed through the work's future. On GPU, ``use_cuda_events()``
switches the clock to CUDA events recorded on the current stream, resolved without
synchronising (see ``CudaClock``).
"""
from __future__ import annotations

import collections
import functools
import threading

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from ..contract import M
from .clock import union_within

GROUP_NAMES = ("dp", "tp", "pp", "ep", "cp", "fsdp")
UNKNOWN = "unknown"
MAX_PENDING = 100_000  # CUDA measurements kept waiting for the GPU before the oldest are dropped

# function -> (op label, index of the tensor(s) argument, its keyword, index of group,
# index of async_op or None when the call is always synchronous / always asynchronous)
SYNC, ASYNC = "sync", "async"
CALLS: dict[str, tuple] = {
    "all_reduce": ("AllReduce", 0, "tensor", 2, 3),
    "all_gather": ("AllGather", 1, "tensor", 2, 3),
    "all_gather_into_tensor": ("AllGather", 1, "input_tensor", 2, 3),
    "reduce_scatter": ("ReduceScatter", 1, "input_list", 3, 4),
    "reduce_scatter_tensor": ("ReduceScatter", 1, "input", 3, 4),
    "broadcast": ("Broadcast", 0, "tensor", 2, 3),
    "reduce": ("Reduce", 0, "tensor", 3, 4),
    "all_to_all": ("AllToAll", 1, "input_tensor_list", 2, 3),
    "all_to_all_single": ("AllToAll", 1, "input", 4, 5),
    "send": ("Send", 0, "tensor", 2, SYNC),
    "recv": ("Recv", 0, "tensor", 2, SYNC),
    "isend": ("Send", 0, "tensor", 2, ASYNC),
    "irecv": ("Recv", 0, "tensor", 2, ASYNC),
}

_local = threading.local()  # .quiet: inside a hook that already counts its collective


def nbytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(nbytes(t) for t in x)
    return 0


class CudaClock:
    """CUDA events on the current stream; elapsed times are read once the end event has
    completed (``poll``, called at every step end), so the loop never synchronises. An
    interval measured in a future's ``then`` callback ends where the stream waits for the
    collective, which is its completion in stream order."""

    name = "cuda"

    def __init__(self):
        self.pending: collections.deque = collections.deque()
        self.dropped = 0
        self._lock = threading.Lock()

    def mark(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def measure(self, pairs, observe) -> None:
        with self._lock:
            self.pending.append((tuple(pairs), observe))
            while len(self.pending) > MAX_PENDING:
                self.pending.popleft()
                self.dropped += 1

    def measure_within(self, windows, observe) -> None:
        """Like WallClock.measure_within; the events' times are read, relative to each
        window's start, once all of them have completed."""
        windows = tuple((lo, hi, tuple(iv)) for lo, hi, iv in windows)
        events = tuple((lo, e) for lo, hi, iv in windows for e in (hi, *(x for p in iv for x in p)))

        def value(_pairs):
            ms = lambda lo, e: lo.elapsed_time(e)
            return sum(union_within(0.0, ms(lo, hi), ((ms(lo, a), ms(lo, b)) for a, b in iv))
                       for lo, hi, iv in windows) / 1000.0
        with self._lock:
            self.pending.append((events, observe, value))
            while len(self.pending) > MAX_PENDING:
                self.pending.popleft()
                self.dropped += 1

    def poll(self) -> None:
        done = []
        with self._lock:
            while self.pending and all(end.query() for _, end in self.pending[0][0]):
                done.append(self.pending.popleft())
        for pairs, observe, *value in done:
            if value:
                observe(value[0](pairs))
            else:
                observe(sum(start.elapsed_time(end) for start, end in pairs) / 1000.0)


class TorchTelemetry:
    """The torch side of a ``Telemetry`` (``tel.torch``)."""

    def __init__(self, tel):
        self.tel = tel
        self._names: dict[int, tuple[object, str]] = {}  # id(group) -> (group, name)

    # groups ---------------------------------------------------------------------------
    def name_group(self, group, name: str) -> None:
        if name not in GROUP_NAMES:
            raise ValueError(f"group name {name!r} is not one of {', '.join(GROUP_NAMES)}")
        group = group if group is not None else dist.group.WORLD
        self._names[id(group)] = (group, name)

    def group_name(self, group) -> str:
        group = group if group is not None else dist.group.WORLD
        entry = self._names.get(id(group))
        return entry[1] if entry else UNKNOWN

    # the mesh ---------------------------------------------------------------------------
    def mesh_from_groups(self):
        """Publish this rank's place in the mesh from the groups named with ``name_group``
        (tp, cp, ep, dp, pp; a kind not named is a group of the rank alone) and return it."""
        from ..mesh import KINDS, Place
        groups = {name: tuple(dist.get_process_group_ranks(g))
                  for g, name in self._names.values() if name in KINDS}
        place = Place.of(dist.get_rank(), groups)
        self.tel.mesh(place)
        return place

    def mesh_from_megatron(self, parallel_state=None):
        """Publish this rank's place in the mesh from Megatron-LM's ``parallel_state``
        (after ``initialize_model_parallel``) and return it. Megatron's tensor-, pipeline-,
        data-, context- and expert-parallel groups are named too (unless named already), so
        their collectives are labelled tp, pp, dp, cp and ep."""
        import importlib
        ps = parallel_state or importlib.import_module("megatron.core.parallel_state")
        if not ps.model_parallel_is_initialized():
            raise RuntimeError("Megatron's model parallel state is not initialized: call "
                               "mesh_from_megatron() after initialize_model_parallel()")
        getters = {"tp": "get_tensor_model_parallel_group", "pp": "get_pipeline_model_parallel_group",
                   "dp": "get_data_parallel_group", "cp": "get_context_parallel_group",
                   "ep": "get_expert_model_parallel_group"}
        for kind, getter in getters.items():
            try:
                group = getattr(ps, getter)()
            except (AttributeError, AssertionError, RuntimeError):
                continue  # an older Megatron without this kind, or not initialized: size 1
            if group is not None and self.group_name(group) == UNKNOWN:
                self.name_group(group, kind)
        return self.mesh_from_groups()

    def use_cuda_events(self) -> None:
        """Measure compute, stage and collective time with CUDA events (GPU jobs), and
        publish the UUID of the current GPU and its CUDA ordinal (``train_rank_gpu_info``)."""
        self.tel.clock = CudaClock()
        device = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(device)
        self.tel.gpu_info(f"GPU-{props.uuid}", cuda_device=device)

    # DDP ------------------------------------------------------------------------------
    def comm_hook(self, inner=None, op: str = "AllReduce"):
        """A DDP comm hook that runs ``inner`` (torch's allreduce_hook by default) and
        reports the bucket as gradient-ready, its bytes and its time to completion."""
        inner = inner or default_hooks.allreduce_hook
        tel = self.tel

        def hook(state, bucket):
            group = self.group_name(state)
            size = nbytes(bucket.buffer())
            start = tel.collective_started(op, group)
            _local.quiet = True
            try:
                fut = inner(state, bucket)
            finally:
                _local.quiet = False

            def done(f):
                tel.record_collective(op, group, size, start, tel.clock.mark())
                return f.value()
            return fut.then(done)

        hook.__name__ = f"obsgen_{getattr(inner, '__name__', 'hook')}"
        return hook

    def register_ddp(self, model, inner=None, group_name: str = "dp") -> None:
        """Register the timing comm hook on a DistributedDataParallel model and name the
        group it reduces over (``model.process_group``) as ``group_name``."""
        group = getattr(model, "process_group", None)
        if self.group_name(group) == UNKNOWN:
            self.name_group(group, group_name)
        model.register_comm_hook(group, self.comm_hook(inner))

    # torch.distributed ------------------------------------------------------------------
    def patch_distributed(self):
        """Wrap torch.distributed's collectives; returns a function that undoes it."""
        originals = {name: getattr(dist, name) for name in CALLS if hasattr(dist, name)}
        originals["batch_isend_irecv"] = dist.batch_isend_irecv
        for name, fn in originals.items():
            if name == "batch_isend_irecv":
                setattr(dist, name, self._wrap_batch(fn))
            else:
                setattr(dist, name, self._wrap(fn, *CALLS[name]))

        def undo():
            for name, fn in originals.items():
                setattr(dist, name, fn)
        return undo

    def _wrap(self, fn, op, ti, tkw, gi, ai):
        tel = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if getattr(_local, "quiet", False):
                return fn(*args, **kwargs)
            tensors = args[ti] if len(args) > ti else kwargs.get(tkw)
            group = tel.group_name(args[gi] if len(args) > gi else kwargs.get("group"))
            if ai == SYNC:
                is_async = False
            elif ai == ASYNC:
                is_async = True
            else:
                is_async = bool(args[ai] if len(args) > ai else kwargs.get("async_op", False))
            size = nbytes(tensors)
            if not is_async:
                with tel.tel.collective(op, group, size):
                    return fn(*args, **kwargs)
            start = tel.tel.collective_started(op, group)
            work = fn(*args, **kwargs)
            tel._on_complete(work, op, group, size, start)
            return work
        return wrapper

    def _wrap_batch(self, fn):
        tel = self

        @functools.wraps(fn)
        def wrapper(p2p_op_list):
            if getattr(_local, "quiet", False):
                return fn(p2p_op_list)
            items = []
            for p in p2p_op_list:
                name = getattr(p.op, "__name__", "")
                op = "Recv" if "recv" in name else "Send"
                items.append((op, tel.group_name(p.group), nbytes(p.tensor),
                              tel.tel.collective_started(op, tel.group_name(p.group))))
            _local.quiet = True
            try:
                works = fn(p2p_op_list)
            finally:
                _local.quiet = False
            if works and len(works) == len(items):
                for work, item in zip(works, items):
                    tel._on_complete(work, *item)
            else:  # coalesced into fewer works: the bytes are known, the split of time is not
                for op, group, size, _ in items:
                    tel.tel._labels(M.nccl_collective_bytes_total, op=op, group=group).inc(size)
            return works
        return wrapper

    def _on_complete(self, work, op, group, size, start) -> None:
        tel = self.tel
        try:
            fut = work.get_future()
        except (AttributeError, RuntimeError):  # a backend without futures: bytes only
            tel._labels(M.nccl_collective_bytes_total, op=op, group=group).inc(size)
            return

        def done(f):
            tel.record_collective(op, group, size, start, tel.clock.mark())
            return None
        fut.then(done)

