"""Where a rank's metrics are served.

* One HTTP endpoint per rank (default): port ``port_base + local_rank`` (``port_base``
  0 picks a free port), so every rank is its own Prometheus target.
* A multiprocess directory: every rank of a node writes prometheus_client's mmap files
  into one directory and local rank 0 serves them all on ``port_base``. The directory
  must be empty when the job (or a restart of it) begins: give each attempt its own.

Either way, ``sd_dir`` makes each serving process write a Prometheus file_sd target file
``<sd_dir>/<job_id>-<rank>.json`` (atomically; removed on close), for Slurm or bare-metal
jobs on a shared filesystem: ``file_sd_configs: [{files: [<sd_dir>/*.json]}]``.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENV_MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable


class MultiprocessUnavailable(RuntimeError):
    pass


def enable_multiprocess(directory: str | Path) -> None:
    """Point prometheus_client at ``directory``. prometheus_client picks its value storage
    when it is first imported, so this must run before anything imports it."""
    directory = str(directory)
    Path(directory).mkdir(parents=True, exist_ok=True)
    current = os.environ.get(ENV_MULTIPROC)
    if "prometheus_client" in sys.modules and current != directory:
        raise MultiprocessUnavailable(
            "prometheus_client was imported before obsgen.instrument could enable its "
            f"multiprocess mode; set {ENV_MULTIPROC}={directory} in the launcher's "
            "environment instead")
    os.environ[ENV_MULTIPROC] = directory


@dataclass
class Endpoint:
    host: str
    port: int
    server: object | None = None  # the HTTP server when this process serves
    sd_file: Path | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.sd_file is not None:
            self.sd_file.unlink(missing_ok=True)
            self.sd_file = None


class ScrapeWatch:
    """A collector registered first: it yields nothing, applies the queued updates
    (``on_collect``) before the metrics are read, and counts scrapes, so a finishing rank
    can wait for Prometheus to read its final values."""

    def __init__(self, on_collect=None):
        self.scrapes = 0
        self.on_collect = on_collect

    def describe(self):
        return []

    def collect(self):
        if self.on_collect is not None:
            self.on_collect()
        self.scrapes += 1
        return []


def serve(registry, port: int, addr: str, multiprocess_dir: str | None,
          watch: ScrapeWatch) -> object:
    import prometheus_client as pc

    if multiprocess_dir:
        from prometheus_client import multiprocess

        registry = pc.CollectorRegistry(auto_describe=True)
        registry.register(watch)  # this process's own updates reach its files first
        multiprocess.MultiProcessCollector(registry, path=multiprocess_dir)
    server, _thread = pc.start_http_server(port, addr=addr, registry=registry)
    return server


def write_sd(sd_dir: str | Path, name: str, address: str) -> Path:
    """Write a file_sd target file atomically (Prometheus may read it at any moment)."""
    sd_dir = Path(sd_dir)
    sd_dir.mkdir(parents=True, exist_ok=True)
    path = sd_dir / f"{name}.json"
    fd, tmp = tempfile.mkstemp(dir=sd_dir, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump([{"targets": [address]}], fh)
    os.replace(tmp, path)
    return path


def advertised_host(addr: str) -> str:
    """The host name other machines reach this endpoint at."""
    if addr in ("", "0.0.0.0", "::"):
        return socket.gethostname()
    return addr
