"""Serve synthetic jobs' metrics over HTTP as their ranks would, in (scaled) real time.

Each job is an ``obsgen.synth`` model driven by the wall clock: model time runs ``speed``
times faster than wall time from the moment the simulator starts. A background thread
takes a snapshot of every job once per model scrape interval and pre-renders the text
exposition of every target, so a scrape only copies bytes.

Targets, as Prometheus discovers them from ``/sd`` (http_sd_configs):

* ``node`` (default): one endpoint per host, the ranks of a node together, like
  obsgen.instrument's multiprocess mode;
* ``rank``: one endpoint per rank, like its default port-per-rank mode;
* ``job``: one endpoint per job (for very large jobs).

A target whose ranks are gone (rank loss, restart gap, completion) answers 404, so
Prometheus marks its series stale, and a restarted job's processes come back as new
targets with new ``instance`` labels. ``/metrics`` serves every job as one target.

Values are the model's, in model seconds; the one kind of value that is a point in time
(unit "unix seconds": the checkpoint timestamp) is mapped to the wall clock, so
``time() - timestamp`` in a rule measures model time divided by ``speed``.
"""
from __future__ import annotations

import json
import math
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
                 clock=time.time):
        if targets not in TARGETS:
            raise ValueError(f"targets must be one of {', '.join(TARGETS)}")
        if len({j.job_id for j in jobs}) != len(jobs):
            raise ValueError("job ids must be unique")
        self.jobs, self.speed, self.mode, self.clock = jobs, float(speed), targets, clock
        self.sims = [j.live() for j in jobs]
        self.wall0 = clock()
        self.interval = min(j.scrape for j in jobs) / self.speed  # wall seconds per snapshot
        self.model_time = -1.0
        self.lock = threading.Lock()
        self.targets: dict[str, Target] = {}
        self.bodies: dict[str, bytes] = {}
        self.all_body = b""
        self.tick_seconds = 0.0
        self.ticks = 0

    # model -> text ------------------------------------------------------------------
    def _target_of(self, job: Job, labels: dict) -> tuple[str, str]:
        if self.mode == "rank":
            return labels[L.instance.key], labels[L.instance.key]
        if self.mode == "node":
            node = labels[L.node.key]
            return node, f"{node}:{9400}"
        return job.job_id, job.job_id

    def tick(self) -> None:
        """Advance every job to the current model time and re-render every target."""
        started = time.perf_counter()
        t = (self.clock() - self.wall0) * self.speed
        if t <= self.model_time:
            return
        targets: dict[str, Target] = {}
        merged: dict[str, list[str]] = {}
        for job, sim in zip(self.jobs, self.sims):
            scrape = sim.scrape_at(t)
            for key, value in scrape.samples.items():
                if value == STALE:
                    continue  # Prometheus writes staleness markers itself
                labels = dict(key)
                name = labels.pop("__name__")
                metric = FAMILY[name]
                tkey, instance = self._target_of(job, labels)
                target = targets.get(f"{job.job_id}/{tkey}")
                if target is None:
                    target = targets[f"{job.job_id}/{tkey}"] = Target(job.job_id, tkey, instance)
                for drop in _SCRAPE_LABELS:
                    labels.pop(drop, None)
                if metric.key in WALL_TIME:
                    value = self.wall0 + value / self.speed
                inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
                line = f"{name}{{{inner}}} {fmt(value)}\n"
                target.families.setdefault(metric.key, []).append(line)
                merged.setdefault(metric.key, []).append(line)
        bodies = {t.path: render(t.families) for t in targets.values()}
        all_body = render(merged)
        with self.lock:
            self.model_time = t
            self.targets = {t.path: t for t in targets.values()}
            self.bodies, self.all_body = bodies, all_body
            self.ticks += 1
            self.tick_seconds = time.perf_counter() - started

    def run(self, stop: threading.Event) -> None:
        """Tick once per model scrape interval until ``stop`` is set."""
        while not stop.is_set():
            began = time.monotonic()
            self.tick()
            stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    # HTTP ---------------------------------------------------------------------------
    def sd(self, host: str) -> list[dict]:
        with self.lock:
            targets = sorted(self.targets.values(), key=lambda t: t.path)
        return [{"targets": [host], "labels": {"__metrics_path__": t.path, "instance": t.instance}}
                for t in targets]

    def status(self) -> dict:
        with self.lock:
            return {"speed": self.speed, "model_time": self.model_time, "ticks": self.ticks,
                    "last_tick_seconds": self.tick_seconds, "targets": len(self.targets),
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
                if path == "/metrics":
                    with sim.lock:
                        body = sim.all_body
                    return self._send(200, body, text)
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
        self.tick()
        server = ThreadingHTTPServer((addr, port), self.handler())
        server.daemon_threads = True
        stop = threading.Event()
        threading.Thread(target=self.run, args=(stop,), daemon=True, name="sim-tick").start()
        threading.Thread(target=server.serve_forever, daemon=True, name="sim-http").start()
        return server, stop
