"""The ``obsgen simulate`` subcommand (a row in ``obsgen.cli.COMMANDS``)."""
from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from .. import config, registry, timescale, userfile
from . import prometheus, scenarios
from .server import TARGETS, Simulator


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", action="append", metavar="NAME",
                   help="a scenario (repeat for several jobs; 'all' for every one); "
                        "default: straggler. --list shows them")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--ranks", type=int, default=8, help="ranks per job (default 8)")
    p.add_argument("--job-id", help="job_id (one scenario only; default sim-<scenario>)")
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--speed", type=float, help="model seconds per wall second (default 1)")
    speed.add_argument("--config", help="a time-scaled profile (e.g. e2e/obsgen-e2e.yaml): "
                                        "the speed is the factor it divides every duration by")
    p.add_argument("--addr", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9400, help="listen port (0: a free one)")
    p.add_argument("--targets", choices=TARGETS, default="node",
                   help="one scrape target per node (default), rank or job")
    p.add_argument("--duration", type=float, help="stop after this many wall seconds")
    p.add_argument("--port-file", help="write the bound port to this file once serving")
    p.add_argument("--file-sd", metavar="FILE",
                   help="write the targets to this Prometheus file_sd file")
    p.add_argument("--start-on-scrape", action="store_true",
                   help="start the jobs' clock at the first scrape, not at start-up")
    p.add_argument("--prometheus-config", metavar="FILE",
                   help="write a Prometheus config that scrapes this simulator and exit")
    p.add_argument("--rules", default="rules",
                   help="rules directory for --prometheus-config (default rules/)")


def _speed(args) -> float:
    if args.config:
        cfg = config.load(args.config, alert_names=registry.alert_names())
        try:
            return timescale.check(cfg)
        except timescale.NotUniform as exc:
            raise config.ConfigError(str(exc).splitlines()) from None
    return args.speed or 1.0


def _names(args) -> list[str]:
    names = args.scenario or ["straggler"]
    if "all" in names:
        names = list(scenarios.SCENARIOS)
    unknown = [n for n in names if n not in scenarios.SCENARIOS]
    if unknown:
        raise config.ConfigError([f"--scenario: unknown scenario {n!r} (known: "
                                  f"{', '.join(scenarios.SCENARIOS)}, all)" for n in unknown])
    if args.job_id and len(names) > 1:
        raise config.ConfigError(["--job-id: only with a single --scenario"])
    if args.ranks < 1:
        raise config.ConfigError([f"--ranks: must be >= 1, got {args.ranks}"])
    return names


def main(args) -> int:
    if args.list:
        for name, sc in scenarios.SCENARIOS.items():
            print(f"{name:20} {sc.help}")
        return 0
    names, speed = _names(args), _speed(args)
    for flag in ("prometheus_config", "port_file", "file_sd"):
        if getattr(args, flag):
            userfile.check_output_file(getattr(args, flag), "--" + flag.replace("_", "-"))
    if speed <= 0:
        raise config.ConfigError([f"--speed: must be > 0, got {speed:g}"])
    try:
        jobs = [scenarios.job(n, job_id=args.job_id, ranks=args.ranks, seed=i + 1, subnet=i)
                for i, n in enumerate(names)]
        for j in jobs:
            j.physics()  # the mesh must divide the ranks
    except ValueError as exc:
        raise config.ConfigError([f"--ranks: {exc}"]) from None
    if args.prometheus_config:
        userfile.check_dir(args.rules, "--rules", must_exist=True)
        rules = sorted(str(p.resolve()) for p in Path(args.rules).glob("*.yaml"))
        doc = prometheus.config(f"http://{args.addr}:{args.port}/sd", speed, rules)
        Path(args.prometheus_config).write_text(prometheus.dump(doc))
        print(f"wrote {args.prometheus_config}; run: prometheus "
              f"--config.file={args.prometheus_config} {' '.join(prometheus.flags(speed))}")
        return 0
    sim = Simulator(jobs, speed=speed, targets=args.targets, file_sd=args.file_sd,
                    start_on_scrape=args.start_on_scrape)
    server, stop = sim.serve(args.addr, args.port)
    port = server.server_address[1]
    if args.port_file:
        Path(args.port_file).write_text(f"{port}\n")
    print(f"serving {len(jobs)} job(s) x {args.ranks} ranks at http://{args.addr}:{port}/metrics "
          f"(targets: http://{args.addr}:{port}/sd), speed {speed:g}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait(args.duration)
    stop.set()
    server.shutdown()
    server.server_close()
    return 0

