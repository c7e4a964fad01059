"""Serve synthetic jobs' metrics over HTTP as their ranks would, in (scaled) real time.

Each job is an ``obsgen.synth`` model driven by the wall clock: model time runs ``speed``
times faster than wall time from the moment the simulator starts. A background thread
takes a snapshot of every job once per model scrape interval and pre-renders the text
exposition of every target, so a scrape only copies bytes.

Targets, as Prometheus discovers them from ``/sd`` (http_sd_configs) or the file that
``file_sd`` keeps up to date, are fixed *slots*, known before the first scrape:

* ``node`` (default): one endpoint per host, the ranks of a node together, like
  obsgen.instrument's multiprocess mode;
* ``rank``: one endpoint per rank, like its default port-per-rank mode;
* ``job``: one endpoint per job (for very large jobs).

A slot whose ranks are gone (rank loss, restart gap, completion) answers 404, so
Prometheus marks its series stale; after a restart the slot serves the new processes
(counters from zero, new ``node`` label), as a job restarted in place on its hosts.
Slots never change, because Prometheus applies discovery changes at most every 5 s of
*wall* time, which in a world 60x faster would be 5 minutes. For the same reason the
model clock can wait for the first scrape (``start_on_scrape``), so Prometheus sees
every job from its first second. ``/metrics`` serves every job as one target.

Values are the model's, in model seconds; the one kind of value that is a point in time
(unit "unix seconds": the checkpoint timestamp) is mapped to the wall clock, so
``time() - timestamp`` in a rule measures model time divided by ``speed``.
"""
from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .. import contract
from ..contract import L
from ..synth import STALE, Job

TARGETS = ("node", "rank", "job")
_SCRAPE_LABELS = (L.job.key, L.instance.key)
_SUFFIXES = ("_bucket", "_sum", "_count")


def _families() -> dict[str, contract.Metric]:
    out = {}
    for m in contract.METRICS.values():
        names = [m.key + s for s in _SUFFIXES] if m.type == contract.HISTOGRAM else [m.key]
        out.update({n: m for n in names})
    return out


FAMILY = _families()
ORDER = {m.key: i for i, m in enumerate(contract.METRICS.values())}
WALL_TIME = {m.key for m in contract.METRICS.values() if m.unit == "unix seconds"}


def fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class Target:
    job_id: str
    key: str  # node name, rank instance or job id
    instance: str
    families: dict[str, list[str]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"/metrics/{_safe(self.job_id)}/{_safe(self.key)}"


def _safe(text: str) -> str:
    """A path segment that needs no URL escaping (Prometheus would re-escape a %)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def render(families: dict[str, list[str]]) -> bytes:
    out = []
    for key in sorted(families, key=ORDER.__getitem__):
        m = contract.METRICS[key]
        out.append(f"# HELP {key} {m.help} ({m.unit})\n# TYPE {key} {m.type}\n")
        out.extend(families[key])
    return "".join(out).encode()


class Simulator:
    def __init__(self, jobs: list[Job], speed: float = 1.0, targets: str = "node",
                 clock=time.time, file_sd: str | None = None, host: str = "127.0.0.1:9400",
                 start_on_scrape: bool = False):
        if targets not in TARGETS:
            raise ValueError(f"targets must be one of {', '.join(TARGETS)}")
        if len({j.job_id for j in jobs}) != len(jobs):
            raise ValueError("job ids must be unique")
        self.jobs, self.speed, self.mode, self.clock = jobs, float(speed), targets, clock
        self.sims = [j.live() for j in jobs]
        self.wall0: float | None = None if start_on_scrape else clock()
        self.interval = min(j.scrape for j in jobs) / self.speed  # wall seconds per snapshot
        self.model_time = -1.0
        self.lock = threading.Lock()
        self._tick_lock = threading.Lock()
        self.targets: dict[str, Target] = {}
        self.bodies: dict[str, bytes] = {}
        self._merged: dict[str, list[str]] = {}
        self._all_body: bytes | None = b""
        self._lines: dict[tuple, tuple] = {}
        self.tick_seconds = 0.0
        self.ticks = 0
        self.max_gap = 0.0  # the longest wall time between two ticks: a stalled ticker
        self.file_sd, self.host = file_sd, host
        self._final: dict[str, tuple[float, dict[str, Target]]] = {}  # completed jobs
        self.slots = {t.path: t for j in jobs for t in self._slots(j)}
        if file_sd:
            self._write_file_sd()

    # model -> text ------------------------------------------------------------------
    def _series(self, job: Job, key: tuple) -> tuple[str, str, str, str, bool]:
        """(slot key, instance, metric family, text up to the value, whether the value is
        a point in time) of a series; worked out once per series, as a tick serves
        thousands of lines and a late tick shifts the data against the scrape times."""
        got = self._lines.get((job.job_id, key))
        if got is None:
            labels = dict(key)
            name = labels.pop("__name__")
            metric = FAMILY[name]
            tkey, instance = self._slot(job, int(labels[L.rank.key]))
            for drop in _SCRAPE_LABELS:
                labels.pop(drop, None)
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            got = self._lines[(job.job_id, key)] = (
                tkey, instance, metric.key, f"{name}{{{inner}}} ",
                metric.key in WALL_TIME)
        return got

    @property
    def all_body(self) -> bytes:
        """Every job as one target (``/metrics``), rendered when first asked for."""
        with self.lock:
            if self._all_body is None:
                self._all_body = render(self._merged)
            return self._all_body

    def _slot(self, job: Job, rank: int) -> tuple[str, str]:
        """(key, instance) of the target that serves ``rank``."""
        node = rank // job.ranks_per_node
        if self.mode == "rank":
            return f"rank-{rank}", f"{job.job_id}-node-{node:03d}:{9400 + rank % job.ranks_per_node}"
        if self.mode == "node":
            return f"node-{node:03d}", f"{job.job_id}-node-{node:03d}:9400"
        return "job", f"{job.job_id}:9400"

    def _slots(self, job: Job) -> list[Target]:
        keys = dict(self._slot(job, r) for r in range(job.ranks))
        return [Target(job.job_id, k, i) for k, i in keys.items()]

    def start(self) -> None:
        """Start the model clock now (when it waits for the first scrape)."""
        with self.lock:
            if self.wall0 is None:
                self.wall0 = self.clock()
        self.tick()

    def tick(self) -> None:
        """Advance every job to the current model time and re-render every target."""
        with self._tick_lock:  # the ticker thread and a first scrape may both call it
            self._tick()

    def _tick(self) -> None:
        started = time.perf_counter()
        if self.wall0 is None:
            return
        t = (self.clock() - self.wall0) * self.speed
        if t <= self.model_time:
            return
        targets: dict[str, Target] = {}
        merged: dict[str, list[str]] = {}
        for job, sim in zip(self.jobs, self.sims):
            scrape = sim.scrape_at(t)
            if sim.completed_at is not None and not any(v != STALE for v in scrape.samples.values()):
                # A job that completed keeps serving its final values for two more scrape
                # intervals, as obsgen.instrument's close(linger) does, so Prometheus sees
                # the last step (and the job as completed, not failed).
                until, final = self._final.get(job.job_id, (0.0, {}))
                if t <= until:
                    targets.update(final)
                    for target in final.values():
                        for key, lines in target.families.items():
                            merged.setdefault(key, []).extend(lines)
                continue
            for key, value in scrape.samples.items():
                if value == STALE:
                    continue  # Prometheus writes staleness markers itself
                slot, instance, family, prefix, wall = self._series(job, key)
                target = targets.get((job.job_id, slot))
                if target is None:
                    target = targets[(job.job_id, slot)] = Target(job.job_id, slot, instance)
                if wall:
                    value = self.wall0 + value / self.speed
                line = f"{prefix}{fmt(value)}\n"
                target.families.setdefault(family, []).append(line)
                merged.setdefault(family, []).append(line)
        for job, sim in zip(self.jobs, self.sims):
            if sim.completed_at is not None and job.job_id not in self._final:
                mine = {k: v for k, v in targets.items() if v.job_id == job.job_id}
                self._final[job.job_id] = (sim.completed_at + 2 * job.scrape, mine)
        bodies = {t.path: render(t.families) for t in targets.values()}
        with self.lock:
            if self.model_time >= 0:
                self.max_gap = max(self.max_gap, (t - self.model_time) / self.speed)
            self.model_time = t
            self.targets = {t.path: t for t in targets.values()}
            self.bodies, self._merged, self._all_body = bodies, merged, None
            self.ticks += 1
            self.tick_seconds = time.perf_counter() - started

    def _write_file_sd(self) -> None:
        """Write the slots for Prometheus' file_sd."""
        groups = self.sd(self.host)
        tmp = f"{self.file_sd}.tmp"
        with open(tmp, "w") as fh:
            json.dump(groups, fh)
        os.replace(tmp, self.file_sd)

    def run(self, stop: threading.Event) -> None:
        """Tick once per model scrape interval until ``stop`` is set."""
        while not stop.is_set():
            began = time.monotonic()
            self.tick()
            stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    # HTTP ---------------------------------------------------------------------------
    def sd(self, host: str) -> list[dict]:
        return [{"targets": [host], "labels": {"__metrics_path__": t.path, "instance": t.instance}}
                for t in sorted(self.slots.values(), key=lambda t: t.path)]

    def status(self) -> dict:
        with self.lock:
            return {"speed": self.speed, "wall0": self.wall0, "model_time": self.model_time, "ticks": self.ticks,
                    "last_tick_seconds": self.tick_seconds, "max_gap_seconds": self.max_gap,
                    "targets": len(self.slots),
                    "serving": len(self.targets),
                    "jobs": {j.job_id: j.ranks for j in self.jobs}, "interval": self.interval}

    def handler(self):
        sim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: a scrape every half second is no news
                pass

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                path = self.path.split("?", 1)[0]
                text = "text/plain; version=0.0.4; charset=utf-8"
                if path.startswith("/metrics") and sim.wall0 is None:
                    sim.start()  # the first scrape starts the model clock
                if path == "/metrics":
                    return self._send(200, sim.all_body, text)
                if path.startswith("/metrics/"):
                    with sim.lock:
                        body = sim.bodies.get(path)
                    if body is None:
                        return self._send(404, b"target gone\n", "text/plain")
                    return self._send(200, body, text)
                if path == "/sd":
                    host = f"{self.server.server_address[0]}:{self.server.server_address[1]}"
                    return self._send(200, json.dumps(sim.sd(host)).encode(), "application/json")
                if path == "/status":
                    return self._send(200, json.dumps(sim.status()).encode(), "application/json")
                if path in ("/", "/-/healthy"):
                    return self._send(200, b"obsgen simulate: /metrics /sd /status\n", "text/plain")
                return self._send(404, b"not found\n", "text/plain")

        return Handler

    def serve(self, addr: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, threading.Event]:
        """Start ticking and serving in background threads; returns the server (its
        ``server_address`` has the bound port) and the event that stops the ticks."""
        server = ThreadingHTTPServer((addr, port), self.handler())
        self.host = f"{addr}:{server.server_address[1]}"
        if self.file_sd:
            self._write_file_sd()
        self.tick()
        server.daemon_threads = True
        stop = threading.Event()
        threading.Thread(target=self.run, args=(stop,), daemon=True, name="sim-tick").start()
        threading.Thread(target=server.serve_forever, daemon=True, name="sim-http").start()
        return server, stop
