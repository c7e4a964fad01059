"""Overhead of obsgen.instrument on a 50 ms training step, as ratios within one run.

    python benchmarks/instrument_overhead.py [--steps 300] [--out benchmarks/instrument_overhead.md]

Three measurements, each against a baseline in the same run so a noisy machine cancels:

1. Paired loops: a 50 ms step of busy CPU work (a third "forward", two thirds
   "backward"), bare and instrumented as a training loop instruments it (step, compute,
   two pipeline phases, one collective, loss, grad norm), interleaved step by step in
   ABBA order; overhead = median instrumented / median bare - 1.
2. Direct cost: the same instrumentation calls without the work, many times; their mean
   cost per step as a share of 50 ms (the precise number the paired loops bound).
3. With torch installed: a DDP step (gloo, one process) with torch's own allreduce comm
   hook against obsgen's hook around it, interleaved; the difference per step as a share
   of 50 ms.

The target is < 1% of a 50 ms step. The numbers are written as a markdown table.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from obsgen.instrument import Telemetry

STEP = 0.050


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def bare_step(work: float) -> None:
    busy(work / 3)
    busy(2 * work / 3)


def instrumented_step(tel: Telemetry, work: float) -> None:
    with tel.step():
        with tel.compute():
            with tel.phase("forward"):
                busy(work / 3)
            with tel.phase("backward"):
                busy(2 * work / 3)
        with tel.collective("AllReduce", "dp", 4 << 20):
            pass
    tel.loss(2.0)
    tel.grad_norm(1.0)


def paired(tel: Telemetry, steps: int) -> tuple[float, float]:
    bare, inst = [], []
    for i in range(steps):  # ABBA order, so drift and cache effects fall on both sides
        for kind in (("bare", "inst") if i % 2 == 0 else ("inst", "bare")):
            t0 = time.perf_counter()
            if kind == "bare":
                bare_step(STEP)
            else:
                instrumented_step(tel, STEP)
            (bare if kind == "bare" else inst).append(time.perf_counter() - t0)
    return statistics.median(bare), statistics.median(inst)


def direct(tel: Telemetry, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        instrumented_step(tel, 0.0)
    return (time.perf_counter() - t0) / n


def ddp(steps: int) -> tuple[float, float] | None:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.set_num_threads(1)
    tel = Telemetry("bench-ddp", port_base=0, addr="127.0.0.1").start()
    try:
        def model():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                       torch.nn.Linear(256, 1))
        plain = torch.nn.parallel.DistributedDataParallel(model())
        plain.register_comm_hook(None, default_hooks.allreduce_hook)
        timed = torch.nn.parallel.DistributedDataParallel(model())
        tel.torch.register_ddp(timed)
        x = torch.randn(32, 256)
        a, b = [], []
        for i in range(steps):
            for m, out in ((plain, a), (timed, b)):
                t0 = time.perf_counter()
                if m is timed:
                    with tel.step():
                        with tel.compute():
                            m(x).sum().backward()
                else:
                    m(x).sum().backward()
                out.append(time.perf_counter() - t0)
        return statistics.median(a), statistics.median(b)
    finally:
        tel.close()
        dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    args = ap.parse_args(argv)
    tel = Telemetry("bench", port_base=0, addr="127.0.0.1").start()
    try:
        direct(tel, 2000)  # warm up
        bare, inst = paired(tel, args.steps)
        per_step = direct(tel, 20000)
    finally:
        tel.close()
    rows = [
        ("paired 50 ms steps (median, interleaved)", f"{bare * 1e3:.3f} ms bare, {inst * 1e3:.3f} ms instrumented",
         f"{(inst / bare - 1) * 100:+.3f}%"),
        ("instrumentation calls alone, per step", f"{per_step * 1e6:.1f} us", f"{per_step / STEP * 100:.3f}%"),
    ]
    d = ddp(max(args.steps, 200))
    if d:
        rows.append(("DDP step, obsgen comm hook vs torch's allreduce_hook (median, interleaved)",
                     f"{d[0] * 1e3:.3f} ms vs {d[1] * 1e3:.3f} ms ({(d[1] - d[0]) * 1e6:+.1f} us)",
                     f"{(d[1] - d[0]) / STEP * 100:+.3f}% of 50 ms"))
    table = ["| measurement | time | overhead |", "|---|---|---|"]
    table += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    text = (f"# obsgen.instrument overhead\n\nTarget: < 1% of a 50 ms step. Measured by "
            f"`make bench` ({args.steps} paired steps) on {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}.\n\n" + "\n".join(table) + "\n")
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
