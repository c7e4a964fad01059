"""NCCL sidecar throughput and memory: `make bench` (or python -m benchmarks.nccl_parse).

Records per CPU second (process time, so other load on the machine does not count) for:

* baseline: ``json.loads(line.decode())`` of every line, the floor of a JSON-lines
  reader in Python;
* parse: ``obsgen.nccl.inspector.parse`` (decode + strict checks), target 100,000/s;
* exporter: the whole path of ``obsgen nccl-exporter`` from the files on disk: reading,
  parsing, labels, metrics and cross-rank alignment.

Memory: peak Python allocations of the exporter (tracemalloc) over 1x, 4x and 16x as many
records while one rank stops writing, so collectives that are never completed pile up;
``--max-pending`` (here 5,000) caps them (in a live exporter the 60 s timeout expires them
first): the peak stays flat instead of growing with the input.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from obsgen.nccl.exporter import Exporter, Options
from obsgen.nccl.inspector import parse
from tests.nccl_job import InspectorJob


def rate(n: int, fn) -> float:
    t0 = time.process_time()
    fn()
    return n / max(time.process_time() - t0, 1e-9)


def write(d: Path, steps: int, verbose: bool, skip=None) -> list[bytes]:
    job = InspectorJob(ranks=8, late={5: 3000.0}, verbose=verbose, skip=skip or {},
                       clock_offset_us={"gpu-node-001": -20_000.0})
    job.write_group_maps(d)
    truth = job.run(d, steps=steps)
    return [line.encode() for lines in truth.lines.values() for line in lines]


def drain(d: Path, **kw) -> Exporter:
    e = Exporter(Options(dump_dir=d, state_file=d.parent / f"{d.name}.state", **kw))
    e.drain()
    return e


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6000, help="collectives per communicator")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        print("| input | records | json.loads /s | parse /s | parse/json | exporter /s | exporter/json |")
        print("|---|---|---|---|---|---|---|")
        for verbose in (False, True):
            d = Path(tmp) / f"dump-{verbose}"
            lines = write(d, args.steps, verbose)
            n = len(lines)
            base = rate(n, lambda: [json.loads(l.decode()) for l in lines])
            parsed = rate(n, lambda: [parse(l) for l in lines])
            e = None

            def run():
                nonlocal e
                e = drain(d)
            full = rate(n, run)
            assert e.store.records == n and e.store.parse_errors == 0
            print(f"| {'verbose' if verbose else 'plain'} ({len(lines[0])} B/line) | {n} | "
                  f"{base:,.0f} | {parsed:,.0f} | {parsed / base:.2f} | {full:,.0f} | {full / base:.2f} |")
        print()
        print("| records (rank 2 silent after step 5) | exporter peak MiB | held records at end |")
        print("|---|---|---|")
        for factor in (1, 4, 16):
            d = Path(tmp) / f"silent-{factor}"
            steps = args.steps * factor // 16
            write(d, steps, False, skip={2: set(range(5, steps))})
            tracemalloc.start()
            e = drain(d, max_pending=5_000)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"| {e.store.records} | {peak / 2**20:.1f} | {e.aligner.held} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
