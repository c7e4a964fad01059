"""A real PyTorch DDP run with one slow rank, instrumented with obsgen.instrument.

    OBSGEN_PORT_BASE=9400 torchrun --nproc_per_node=4 examples/ddp_straggler.py \\
        --job-id ddp-demo --slow-rank 2 --slow-ms 8 --steps 3000

CPU and gloo, so it runs anywhere. Every rank trains the same small MLP on random
regression batches. Its forward pass also waits ``--compute-ms``, standing for the time
a GPU host waits for its device (so several ranks sharing a few CPU cores do not drown
the signal in scheduling noise), and rank ``--slow-rank`` waits ``--slow-ms`` more:
inside its compute, before the gradient all-reduce. DDP's all-reduce waits for the
slowest rank, so every rank's *step* time is the same and a step-time comparison finds
nothing; obsgen's comm hook marks when each rank's gradients are ready, so its
``train_compute_seconds`` shows the slow rank, and ``Train_Straggler_Persistent`` fires
for it. The slow rank also shows the *least* time inside the all-reduce: it arrives last
and waits for nobody.

Rank 0 writes a checkpoint every ``--checkpoint-every`` seconds. Each rank serves its
metrics on OBSGEN_PORT_BASE + LOCAL_RANK (0: a free port), and with OBSGEN_SD_DIR writes
a Prometheus file_sd target for itself.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from obsgen.instrument import Telemetry


class DeviceTime(nn.Module):
    """Wraps a module; every forward pass also waits ``delay`` seconds, as a host waits for
    its accelerator. The straggler's extra ``--slow-ms`` is added here."""

    def __init__(self, inner: nn.Module, delay: float):
        super().__init__()
        self.inner, self.delay = inner, delay

    def forward(self, x):
        if self.delay:
            time.sleep(self.delay)
        return self.inner(x)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job-id", default=os.environ.get("OBSGEN_JOB_ID", "ddp-straggler"))
    p.add_argument("--slow-rank", type=int, default=2, help="the straggler (-1: none)")
    p.add_argument("--compute-ms", type=float, default=20.0, help="device time per forward pass")
    p.add_argument("--slow-ms", type=float, default=8.0, help="extra compute of the straggler")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--max-seconds", type=float, default=600.0,
                   help="stop early after this long (the job then did not complete)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--checkpoint-every", type=float, default=10.0, help="seconds")
    p.add_argument("--checkpoint-dir", default=None)
    return p.parse_args(argv)


def _stop(mine: bool) -> bool:
    """Whether any rank wants to stop (all ranks must leave the loop at the same step)."""
    flag = torch.tensor([1.0 if mine else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main(argv=None) -> int:
    args = parse(argv)
    torch.set_num_threads(1)  # several ranks share the CPU cores
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tel = Telemetry.from_env(args.job_id, planned_steps=args.steps).start()
    torch.manual_seed(0)  # the same initial weights on every rank
    net = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden),
                        nn.ReLU(), nn.Linear(args.hidden, 1))
    delay = (args.compute_ms + (args.slow_ms if rank == args.slow_rank else 0.0)) / 1000.0
    model = DDP(DeviceTime(net, delay))
    tel.torch.register_ddp(model)  # gradient-ready marks, bytes and time of the dp all-reduce
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1000 + rank)
    ckpt_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="obsgen-ddp-")
    started = last_ckpt = time.monotonic()
    for step in range(args.steps):
        if step % 50 == 0 and _stop(time.monotonic() - started > args.max_seconds):
            break
        x = torch.randn(args.batch, 64, generator=gen)
        y = x[:, :1] * 0.5 + 0.1 * torch.randn(args.batch, 1, generator=gen)
        with tel.step():
            with tel.compute():
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
        tel.loss(loss.item())
        tel.grad_norm(norm.item())
        if rank == 0 and time.monotonic() - last_ckpt >= args.checkpoint_every:
            with tel.checkpoint():
                torch.save(net.state_dict(), os.path.join(ckpt_dir, "model.pt"))
            last_ckpt = time.monotonic()
    dist.barrier()
    tel.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
