"""Start and stop the real components of the end-to-end tests, and talk to their APIs.

Every process is started in its own session, so its whole process group (torchrun's
workers included) can be killed, with its output in a log file under the run's
temporary directory. ``Processes.stop_all`` sends SIGTERM to every group, then SIGKILL
to what is left; the fixtures call it in their finalizers and ``atexit`` calls it again.

When the test process dies without running any of that (SIGKILL, an OOM kill), a
watchdog started first notices: it holds the read end of a pipe whose write end only
the test process has, wakes up on EOF and kills every process group still listed.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from obsgen import config, timescale
from obsgen.simulate import prometheus as promconfig

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "e2e" / "obsgen-e2e.yaml"


def torchrun() -> str:
    """torchrun beside this Python (the venv's), else the one on PATH."""
    here = Path(sys.executable).with_name("torchrun")
    return str(here) if here.exists() else shutil.which("torchrun")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


WATCHDOG = """
import os, signal, sys
sys.stdin.buffer.read()  # returns at EOF: the test process is gone
try:
    groups = open(sys.argv[1]).read().split()
except OSError:
    groups = []
for pgid in groups:
    try:
        os.killpg(int(pgid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError, ValueError):
        pass
"""


class Processes:
    """The processes a test run started, by name."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.groups = logs / "process-groups"
        self.groups.write_text("")
        read, self._lifeline = os.pipe()
        self.watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(self.groups)],
                                         stdin=read, start_new_session=True,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(read)
        atexit.register(self.stop_all)

    def start(self, name: str, argv: list[str], env: dict | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=env, cwd=cwd, pass_fds=())
        log.close()
        self.procs[name] = proc
        self._write_groups()
        return proc

    def _write_groups(self) -> None:
        self.groups.write_text("".join(f"{p.pid}\n" for p in self.procs.values()))

    def log(self, name: str, tail: int = 3000) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def stop(self, name: str, timeout: float = 10) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                # the leader is gone; members of its group may not be
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
            break
        self._write_groups()

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        self._write_groups()
        if self._lifeline is not None:  # the watchdog finds nothing left and exits
            os.close(self._lifeline)
            self._lifeline = None
            self.watchdog.wait(10)


class Stalls(threading.Thread):
    """Wall time this machine did not run the tests: each overshoot of a short sleep of at
    least ``LEAST``. A loaded or paused VM stops the simulator, the stores and the rulers
    alike, so a bound in wall time (a latency, a deadline) allows for the stalls inside it
    and says how much it allowed; a machine that runs on time allows nothing."""

    TICK, LEAST = 0.05, 0.5

    def __init__(self):
        super().__init__(daemon=True, name="stalls")
        self.seen: list[tuple[float, float]] = []  # (wall time the sleep began, overshoot)

    def run(self) -> None:
        while True:
            began = time.time()
            time.sleep(self.TICK)
            over = time.time() - began - self.TICK
            if over >= self.LEAST:
                self.seen.append((began, over))

    def within(self, start: float, end: float) -> float:
        """Seconds of stall that began between ``start`` and ``end`` (wall time)."""
        return sum(over for began, over in list(self.seen) if start <= began <= end)


STALLS = Stalls()
STALLS.start()


def get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_until(what: str, predicate, timeout: float, interval: float = 0.5, on_fail=None):
    """Poll ``predicate`` until it is true, for ``timeout`` seconds plus the machine's
    stalls meanwhile (Stalls)."""
    began, last = time.time(), None
    while time.time() < began + timeout + STALLS.within(began, time.time()):
        try:
            last = predicate()
            if last:
                return last
        except (OSError, ValueError) as exc:
            last = exc
        time.sleep(interval)
    detail = on_fail() if on_fail else ""
    stalled = STALLS.within(began, time.time())
    raise AssertionError(f"timed out after {timeout:g}s (and {stalled:.1f}s of the machine's "
                         f"stalls) waiting for {what} (last: {last!r})\n{detail}")


@dataclass
class Webhook:
    """A local Alertmanager webhook receiver that keeps every notification (also vmalert's
    notifier in the parity test, whose posts are lists of alerts: kept under "alerts")."""
    notifications: list[dict] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                hook.notifications.append({"path": self.path,
                                           **(body if isinstance(body, dict) else {"alerts": body})})
                self.send_response(200)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def received(self) -> list[tuple[str, str, dict]]:
        """(receiver, status, labels) of every alert in every Alertmanager notification."""
        return [(n["receiver"], a["status"], a["labels"])
                for n in list(self.notifications) if "receiver" in n for a in n["alerts"]]


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def api(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params)
        doc = json.loads(get(f"{self.url}/api/v1/{path}?{query}"))
        if doc.get("status") != "success":
            raise ValueError(f"{path} {params}: {doc}")
        return doc["data"]

    def query(self, expr: str, time_: float | None = None) -> list[dict]:
        params = {"query": expr}
        if time_ is not None:
            params["time"] = f"{time_:.3f}"
        return self.api("query", **params)["result"]

    def query_raw(self, expr: str) -> dict:
        """The whole answer, errors included (for the dashboard check)."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            return json.loads(get(url))
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read() or b"{}") or {"status": "error", "error": str(exc)}

    def query_range_raw(self, expr: str, start: float, end: float, step: float) -> dict:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        url = f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
        try:
            return json.loads(get(url, timeout=30))
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read() or b"{}") or {"status": "error", "error": str(exc)}

    def alerts(self) -> list[dict]:
        return self.api("alerts")["alerts"]

    def targets_up(self) -> int:
        return sum(1 for t in self.api("targets")["activeTargets"] if t["health"] == "up")


def start_prometheus(procs: "Processes", name: str, tmp: Path, prom: dict) -> "Prometheus":
    """A Prometheus on a loopback port, configured by ``prom`` (written to ``tmp``), its
    TSDB under ``tmp``; started as ``name`` among ``procs``."""
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(prom))
    port = free_port()
    procs.start(name, [shutil.which("prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
                       f"--storage.tsdb.path={tmp / 'data'}",
                       f"--web.listen-address=127.0.0.1:{port}"])
    return Prometheus(f"http://127.0.0.1:{port}")


def render_profile(out: Path) -> Path:
    """Rules and routing rendered from the time-scaled e2e profile into ``out``."""
    r = subprocess.run([sys.executable, "-m", "obsgen", "render", "--config", str(PROFILE),
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def alertmanager_config(routes: Path, webhook: str, speed: float) -> dict:
    """The rendered routing, each receiver pointed at the test's webhook, timings scaled."""
    doc = yaml.safe_load(routes.read_text())
    for rcv in doc["receivers"]:
        rcv["webhook_configs"] = [{"url": f"{webhook}/{rcv['name']}", "send_resolved": True}]

    def scale(node):
        for key in ("group_wait", "group_interval", "repeat_interval"):
            if key in node:
                node[key] = config.duration(config.seconds(node[key]) / speed)
        for child in node.get("routes", []):
            scale(child)
    scale(doc["route"])
    doc["global"] = {"resolve_timeout": config.duration(timescale.AM_RESOLVE_TIMEOUT / speed)}
    return doc


@dataclass
class Stack:
    """Prometheus and Alertmanager on loopback, evaluating the e2e profile's rules."""
    procs: Processes
    tmp: Path
    speed: float
    prom: Prometheus
    am_url: str
    webhook: Webhook
    sd_dir: Path
    sim_sd: Path
    nccl_sd: Path  # file_sd targets of the scrape job ``nccl-exporter``
    rendered: Path  # everything rendered from the e2e profile: rules/, dashboards/, ...

    def am_alerts(self) -> list[dict]:
        return json.loads(get(f"{self.am_url}/api/v2/alerts"))


def start_stack(procs: Processes, tmp: Path, speed: float) -> Stack:
    """Prometheus scrapes three jobs: ``training`` (the simulator's targets, from the file
    ``<tmp>/sim-sd/targets.json``), ``pytorch`` (one file per rank in ``<tmp>/sd``,
    written by obsgen.instrument) and ``nccl-exporter`` (``<tmp>/nccl-sd``, written by the
    test that starts one), all through file_sd, which sees new files at once."""
    out = render_profile(tmp / "render")
    webhook = Webhook()
    hook_url = webhook.start()
    am_port, prom_port = free_port(), free_port()
    am_cfg = tmp / "alertmanager.yaml"
    am_cfg.write_text(yaml.safe_dump(alertmanager_config(
        out / "alertmanager" / "obsgen-routes.yaml", hook_url, speed)))
    check = subprocess.run(["amtool", "check-config", str(am_cfg)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    procs.start("alertmanager", [
        shutil.which("prometheus-alertmanager") or "alertmanager", f"--config.file={am_cfg}",
        f"--storage.path={tmp / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=", "--log.level=warn"])
    sd_dir, sim_sd, nccl_sd = tmp / "sd", tmp / "sim-sd", tmp / "nccl-sd"
    for d in (sd_dir, sim_sd, nccl_sd):
        d.mkdir()
    doc = promconfig.config(None, speed, sorted(str(p) for p in (out / "rules").glob("*.yaml")),
                            alertmanagers=[f"127.0.0.1:{am_port}"])
    for job, d in (("training", sim_sd), ("pytorch", sd_dir), (NCCL_SCRAPE_JOB, nccl_sd)):
        doc["scrape_configs"].append({"job_name": job, "file_sd_configs": [
            {"files": [str(d / "*.json")], "refresh_interval": "1s"}]})
    prom_cfg = tmp / "prometheus.yaml"
    prom_cfg.write_text(yaml.safe_dump(doc))
    procs.start("prometheus", [
        shutil.which("prometheus"), f"--config.file={prom_cfg}",
        f"--storage.tsdb.path={tmp / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
        "--rules.alert.resend-delay=1s", "--log.level=warn", *promconfig.flags(speed)])
    prom = Prometheus(f"http://127.0.0.1:{prom_port}")
    am_url = f"http://127.0.0.1:{am_port}"
    for name, url in (("prometheus", prom.url), ("alertmanager", am_url)):
        wait_until(f"{name} ready", lambda u=url: get(f"{u}/-/ready", timeout=2), 60,
                   on_fail=lambda n=name: procs.log(n))
    return Stack(procs, tmp, speed, prom, am_url, webhook, sd_dir, sim_sd / "targets.json",
                 nccl_sd, out)


NCCL_SCRAPE_JOB = "nccl-exporter"


def nccl_exporter_flags(speed: float) -> list[str]:
    """The NCCL exporter's own time constants (poll, state save, alignment timeout), its
    defaults divided by ``speed`` like every other clock of the time-scaled world."""
    import argparse

    from obsgen.nccl import exporter

    p = argparse.ArgumentParser()
    exporter.add_arguments(p)
    return [f"--{name.replace('_', '-')}={p.get_default(name) / speed:g}"
            for name in ("poll_interval", "state_interval", "align_timeout")]
