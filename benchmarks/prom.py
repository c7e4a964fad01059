"""Debian's prometheus on loopback over a TSDB directory, and its HTTP API.

The process gets its own session (process group) and is always stopped by ``stop()``,
which the context manager calls in a ``finally``; nothing else is ever signalled.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

CONFIG = "global: {scrape_interval: 30s, evaluation_interval: 30s}\n"


def binary(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise SystemExit(f"{name} not found: install Debian's prometheus package "
                         "(scripts/ensure-tools.sh prometheus promtool)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Timing:
    seconds: float  # Prometheus' own evaluation time (stats evalTotalTime): no HTTP, no JSON
    wall: float  # client-side round trip, HTTP and JSON included
    samples: int  # samples the query read (stats totalQueryableSamples)
    peak: int  # most samples the query held at once (stats peakSamples)
    series: int  # series in the result


class QueryError(RuntimeError):
    pass


class Prometheus:
    def __init__(self, data: Path, log: Path, extra_args: tuple[str, ...] = ()):
        self.data, self.log, self.extra = Path(data), Path(log), extra_args
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "Prometheus":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 600) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        cfg = self.data.parent / "prometheus.yml"
        cfg.write_text(CONFIG)
        self._logf = open(self.log, "a")
        self.proc = subprocess.Popen(
            [binary("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={self.data}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
             "--log.level=warn", *self.extra],
            stdout=self._logf, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"prometheus not ready after {timeout:.0f}s; see {self.log}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self._logf.close()

    # memory ------------------------------------------------------------------------------
    def _status(self, field: str) -> int:
        """A /proc/<pid>/status field in bytes (VmHWM: peak resident set, VmRSS: now)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field} for pid {self.proc.pid}")

    def peak_rss(self) -> int:
        return self._status("VmHWM")

    def rss(self) -> int:
        return self._status("VmRSS")

    # queries -----------------------------------------------------------------------------
    def _get(self, path: str, params: dict, timeout: float = 600) -> dict:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise QueryError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float) -> Timing:
        return self._timed("/api/v1/query", {"query": expr, "time": at, "stats": "all"})

    def query_range(self, expr: str, start: float, end: float, step: float) -> Timing:
        return self._timed("/api/v1/query_range",
                           {"query": expr, "start": start, "end": end, "step": step, "stats": "all"})

    def _timed(self, path: str, params: dict) -> Timing:
        t0 = time.perf_counter()
        data = self._get(path, params)
        wall = time.perf_counter() - t0
        stats = data["stats"]
        return Timing(stats["timings"]["evalTotalTime"], wall,
                      stats["samples"]["totalQueryableSamples"], stats["samples"]["peakSamples"],
                      len(data["result"]) if isinstance(data["result"], list) else 1)

    def value(self, expr: str, at: float) -> float | None:
        res = self._get("/api/v1/query", {"query": expr, "time": at})["result"]
        return float(res[0]["value"][1]) if res else None


def blocks(data: Path) -> list[dict]:
    """meta.json of every block in a TSDB directory. A running Prometheus deletes the
    blocks it compacted away at any moment: one gone between the listing and the read
    is skipped (a 16,384-rank run failed on one after 33 minutes)."""
    out = []
    for meta in sorted(Path(data).glob("*/meta.json")):
        try:
            out.append(json.loads(meta.read_text()))
        except FileNotFoundError:
            continue
    return out


def overlapping(data: Path) -> bool:
    spans = sorted((b["minTime"], b["maxTime"]) for b in blocks(data))
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def compact(data: Path, log: Path, timeout: float = 1800) -> float:
    """Let Prometheus merge overlapping blocks (its vertical compaction runs a minute
    after start, then every minute) until none overlap; returns the seconds it took."""
    t0 = time.monotonic()
    if not overlapping(data):
        return 0.0
    with Prometheus(data, log):
        while overlapping(data):
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"blocks in {data} still overlap after {timeout:.0f}s")
            time.sleep(2)
    return time.monotonic() - t0


def free_disk(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
