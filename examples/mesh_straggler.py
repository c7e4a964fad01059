"""A real PyTorch job on a TP x PP x DP mesh with one slow GPU, instrumented with
obsgen.instrument: tensor-parallel layers that all-reduce their output in their TP group,
pipeline stages that pass activations and gradients with send/recv, and a gradient
all-reduce in the DP group.

    torchrun --nproc_per_node=4 examples/mesh_straggler.py --tp 2 --slow-rank 3
    torchrun --nproc_per_node=4 examples/mesh_straggler.py --pp 2 --slow-rank 3

Ranks follow Megatron's default order (TP fastest, then DP, the stage slowest), built
with obsgen.mesh; every group is named, ``patch_distributed`` times every collective and
p2p op, and the rank's place in the mesh is published from the named groups. Each layer
waits ``--layer-ms`` (standing for its device time on CPU), the slow rank's layers
``--slow-ms`` more: its TP peers then wait for it inside every layer's all-reduce and
the other stage of its pipeline waits for it in recv, so they report its compute time as
theirs. Their *busy* time (compute minus the wait inside it) stays their own, and
Train_Straggler_Persistent names the slow GPU alone.
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

from obsgen.instrument import Telemetry
from obsgen.mesh import Mesh


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job-id", default="mesh-demo")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--layers", type=int, default=4, help="layers per stage")
    p.add_argument("--microbatches", type=int, default=2)
    p.add_argument("--layer-ms", type=float, default=3.0, help="device time of a layer")
    p.add_argument("--slow-rank", type=int, default=-1, help="the slow GPU (-1: none)")
    p.add_argument("--slow-ms", type=float, default=1.5, help="extra time of its layers")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--stop-file", help="stop (every rank, at the same step) once this file exists")
    return p.parse_args(argv)


def groups(mesh: Mesh, rank: int) -> dict[str, object]:
    """Every rank creates every group, in the same order; each keeps its own."""
    mine = {}
    for kind in ("tp", "dp", "pp"):
        done = set()
        for r in range(mesh.world):
            members = mesh.group(r, kind)
            if members in done:
                continue
            done.add(members)
            group = dist.new_group(list(members))
            if rank in members:
                mine[kind] = (group, members)
    return mine


def main(argv=None) -> int:
    args = parse(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = Mesh.of_world(world, tp=args.tp, pp=args.pp)
    coords = mesh.coords(rank)
    mine = groups(mesh, rank)
    tel = Telemetry.from_env(args.job_id, pp=args.pp, stage=coords["pp"],
                             microbatches=args.microbatches).start()
    for kind, (group, _) in mine.items():
        tel.torch.name_group(group, kind)
    tel.torch.mesh_from_groups()
    undo = tel.torch.patch_distributed()
    tp_group, dp_group = mine["tp"][0], mine["dp"][0]
    pipeline = mine["pp"][1]
    prev = pipeline[coords["pp"] - 1] if coords["pp"] > 0 else None
    nxt = pipeline[coords["pp"] + 1] if coords["pp"] < args.pp - 1 else None
    pp_group = mine["pp"][0]
    torch.manual_seed(rank)
    weights = [torch.randn(args.hidden, args.hidden) / args.hidden ** 0.5 for _ in range(args.layers)]
    layer_s = (args.layer_ms + (args.slow_ms if rank == args.slow_rank else 0.0)) / 1000.0

    def layers(x: torch.Tensor) -> torch.Tensor:
        for w in weights:
            x = torch.tanh(x @ w)
            time.sleep(layer_s)  # the layer's device time
            if args.tp > 1:
                dist.all_reduce(x, group=tp_group)  # row-parallel output: every TP peer waits
        return x

    act = torch.zeros(8, args.hidden)
    started = time.monotonic()
    for step in range(args.steps):
        if step % 20 == 0:
            stop = torch.tensor([float(time.monotonic() - started > args.max_seconds or bool(
                args.stop_file and os.path.exists(args.stop_file)))])
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            if stop.item():
                break
        with tel.step():
            with tel.compute():
                for _ in range(args.microbatches):  # forward
                    x = torch.randn(8, args.hidden)
                    if prev is not None:
                        dist.recv(act, src=prev, group=pp_group)
                        x = act
                    with tel.phase("forward"):  # the stage's busy time, not its recv
                        y = layers(x)
                    if nxt is not None:
                        dist.send(y.contiguous(), dst=nxt, group=pp_group)
                for _ in range(args.microbatches):  # backward: the gradients flow back
                    g = torch.ones(8, args.hidden)
                    if nxt is not None:
                        dist.recv(act, src=nxt, group=pp_group)
                        g = act
                    with tel.phase("backward"):
                        g = layers(g)
                    if prev is not None:
                        dist.send(g.contiguous(), dst=prev, group=pp_group)
            grad = torch.cat([w.flatten() for w in weights])
            dist.all_reduce(grad, group=dp_group)  # the gradient all-reduce (dp)
        tel.loss(float(act.abs().mean()))
    undo()
    dist.barrier()
    tel.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
