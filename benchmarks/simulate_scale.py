"""How far ``obsgen simulate`` scales: the cost of one snapshot for jobs of N ranks.

    python benchmarks/simulate_scale.py [--ranks 8 256 1024 4096] [--out benchmarks/simulate_scale.md]

A snapshot advances the synthetic job by one model scrape interval (30 s) and renders
every target's exposition. The simulator keeps up with a speed of at most
30 s / (snapshot time): real time (speed 1) needs a snapshot under 30 s; the e2e speed of
60 one under 0.5 s. Each row is the median of 5 snapshots after warm-up.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from obsgen.simulate import scenarios
from obsgen.simulate.server import Simulator


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def measure(ranks: int) -> dict:
    clock = Clock()
    sim = Simulator([scenarios.job("straggler", ranks=ranks)], speed=1.0, clock=clock)
    times = []
    for i in range(8):
        clock.now += 30.0
        t0 = time.perf_counter()
        sim.tick()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    body = sim.all_body
    series = body.count(b"\n") - body.count(b"\n#")
    snap = statistics.median(times)
    return {"ranks": ranks, "series": series, "per_rank": series / ranks, "snapshot": snap,
            "bytes": len(body), "targets": len(sim.slots), "max_speed": 30.0 / snap}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 256, 1024, 4096])
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    args = ap.parse_args(argv)
    rows = ["| ranks | series | series/rank | targets (node) | snapshot | exposition | max speed |",
            "|---|---|---|---|---|---|---|"]
    for n in args.ranks:
        r = measure(n)
        rows.append(f"| {r['ranks']} | {r['series']} | {r['per_rank']:.0f} | {r['targets']} | "
                    f"{r['snapshot'] * 1e3:.0f} ms | {r['bytes'] / 1e6:.1f} MB | {r['max_speed']:.0f}x |")
        print(rows[-1], flush=True)
    text = ("# obsgen simulate at scale\n\nOne snapshot = one model scrape interval (30 s) of a "
            "straggler job, every target rendered. Measured by `python benchmarks/simulate_scale.py`."
            "\n\n" + "\n".join(rows) + "\n")
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
