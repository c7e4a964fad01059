"""NCCL sidecar throughput and memory: `make bench` (or python -m benchmarks.nccl_parse
[--steps 6000] [--repeat 3] [--out benchmarks/nccl_parse.md]).

Records per CPU second (process time) for:

* baseline: ``json.loads(line.decode())`` of every line, the floor of a JSON-lines
  reader in Python with the standard library;
* parse_json: ``obsgen.nccl.inspector.parse_json``, the standard library's decoder and
  the strict checks (the parser before orjson; ``parse`` still falls back to it);
* parse: ``obsgen.nccl.inspector.parse`` (orjson + the same checks), target 100,000/s;
* exporter: the whole path of ``obsgen nccl-exporter`` from the files on disk: reading,
  parsing, labels, metrics and cross-rank alignment.

Process time leaves out waiting for the CPU, but not what a busy neighbour on the same
core costs (shared caches, clock): on a loaded machine one run can be half as fast as the
next. Each measurement is therefore the best of ``--repeat`` runs, interleaved so a slow
phase of the machine hits all of them alike, and the slowest run is printed beside it.

Memory: peak Python allocations of the exporter (tracemalloc) over 1x, 4x and 16x as many
records while one rank stops writing, so collectives that are never completed pile up;
``--max-pending`` (here 5,000) caps them (in a live exporter the 60 s timeout expires them
first): the peak stays flat instead of growing with the input.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from obsgen.nccl.exporter import Exporter, Options
from obsgen.nccl.inspector import parse, parse_json
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
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement (best counts)")
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")),
                    help="markdown report ('' for none)")
    args = ap.parse_args(argv)
    out = [f"# NCCL sidecar parse rate and memory", "",
           f"Records per CPU second, best of {args.repeat} interleaved runs (slowest run in "
           "brackets); target 100,000/s for `parse`. Measured by `make bench` "
           f"(`python -m benchmarks.nccl_parse`) on {platform.machine()}, "
           f"{os.cpu_count()} cores, Python {platform.python_version()}, a machine shared with "
           "other work. `parse_json` is the standard library's decoder with the same checks "
           "(the parser before orjson; `parse` still hands it every line orjson refuses); "
           "`exporter` is the whole sidecar from the files on disk.", "",
           "| input | records | json.loads /s | parse_json /s | parse /s | parse/json | "
           "exporter /s | exporter/json |",
           "|---|---|---|---|---|---|---|---|"]

    def emit(text=""):
        print(text, flush=True)

    for text in out[4:]:
        emit(text)
    with tempfile.TemporaryDirectory() as tmp:
        for verbose in (False, True):
            d = Path(tmp) / f"dump-{verbose}"
            lines = write(d, args.steps, verbose)
            n = len(lines)
            runs = {k: [] for k in ("base", "json", "parse", "full")}
            for _ in range(args.repeat):
                runs["base"].append(rate(n, lambda: [json.loads(l.decode()) for l in lines]))
                runs["json"].append(rate(n, lambda: [parse_json(l) for l in lines]))
                runs["parse"].append(rate(n, lambda: [parse(l) for l in lines]))
                e = None

                def run():
                    nonlocal e
                    e = drain(d)
                Path(f"{d}.state").unlink(missing_ok=True)  # every run reads from the start
                runs["full"].append(rate(n, run))
                assert e.store.records == n and e.store.parse_errors == 0
            best = {k: max(v) for k, v in runs.items()}
            cell = lambda k: f"{best[k]:,.0f} ({min(runs[k]):,.0f})"
            row = (f"| {'verbose' if verbose else 'plain'} ({len(lines[0])} B/line) | {n} | "
                   f"{cell('base')} | {cell('json')} | {cell('parse')} | "
                   f"{best['parse'] / best['base']:.2f} | {cell('full')} | "
                   f"{best['full'] / best['base']:.2f} |")
            out.append(row)
            emit(row)
        out += ["", "| records (rank 2 silent after step 5) | exporter peak MiB | held records at end |",
                "|---|---|---|"]
        emit()
        for text in out[-2:]:
            emit(text)
        for factor in (1, 4, 16):
            d = Path(tmp) / f"silent-{factor}"
            steps = args.steps * factor // 16
            write(d, steps, False, skip={2: set(range(5, steps))})
            tracemalloc.start()
            e = drain(d, max_pending=5_000)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            row = f"| {e.store.records} | {peak / 2**20:.1f} | {e.aligner.held} |"
            out.append(row)
            emit(row)
    if args.out:
        Path(args.out).write_text("\n".join(out) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
