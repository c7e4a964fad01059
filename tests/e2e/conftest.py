"""Fixtures of the end-to-end tests: one Prometheus and Alertmanager per session, fed by
the simulator (every scenario as its own job) and by real PyTorch runs."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from obsgen import config, registry, timescale

from . import expected, harness

# The line of tools the suite runs on: Debian 12's on PATH (Prometheus 2.42, Alertmanager
# 0.25, VictoriaMetrics 1.79), or those of a folder put first on PATH, such as the one
# `make e2e-tools` unpacks from Debian's unstable suite (.tools/unstable/bin: Prometheus
# 3.5, Alertmanager 0.33, VictoriaMetrics 1.145). Subprocesses (promtool, amtool) follow.
TOOLS_DIR = os.environ.get("OBSGEN_E2E_TOOLS")
if TOOLS_DIR:
    os.environ["PATH"] = f"{Path(TOOLS_DIR).resolve()}{os.pathsep}{os.environ['PATH']}"

MISSING = [t for t in ("prometheus", "prometheus-alertmanager", "amtool") if not shutil.which(t)]


def pytest_report_header(config):
    """The packages the live tests run on (Debian's VictoriaMetrics builds print no
    version of their own)."""
    import subprocess
    packages = {"prometheus": "prometheus", "prometheus-alertmanager": "prometheus-alertmanager",
                "victoria-metrics": "victoria-metrics"}
    unpacked = {}
    if TOOLS_DIR and (Path(TOOLS_DIR).resolve().parent / "VERSIONS").exists():
        text = (Path(TOOLS_DIR).resolve().parent / "VERSIONS").read_text()
        unpacked = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    lines = []
    for tool, package in packages.items():
        path = shutil.which(tool)
        if not path:
            continue
        if TOOLS_DIR and Path(path).parent.resolve() == Path(TOOLS_DIR).resolve():
            version = unpacked.get(package, "?")
        else:
            out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                                 capture_output=True, text=True, timeout=30)
            version = out.stdout.strip() or "?"
        lines.append(f"e2e {tool}: {path} ({package} {version})")
    return lines


def pytest_collection_modifyitems(config, items):
    """Every test under tests/e2e is marked e2e. Without Debian's prometheus and
    prometheus-alertmanager they skip locally and fail under CI=true."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)
            if MISSING and os.environ.get("CI") != "true":
                item.add_marker(pytest.mark.skip(
                    reason=f"{', '.join(MISSING)} missing: run `make e2e` (installs them)"))


@pytest.fixture(scope="session")
def speed() -> float:
    cfg = config.load(harness.PROFILE, alert_names=registry.alert_names())
    return timescale.check(cfg)


@pytest.fixture(scope="session")
def procs(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    p = harness.Processes(logs)
    yield p
    p.stop_all()


@pytest.fixture(scope="session")
def stack(procs, tmp_path_factory, speed):
    s = harness.start_stack(procs, tmp_path_factory.mktemp("stack"), speed)
    yield s
    s.webhook.stop()


@pytest.fixture(scope="session")
def simulator(procs, tmp_path_factory, stack, speed):
    """Every scenario as its own job, 8 ranks each, one target per node. The jobs' clock
    starts at Prometheus' first scrape, so Prometheus sees each job from its first second."""
    tmp = tmp_path_factory.mktemp("sim")
    port_file = tmp / "port"
    procs.start("simulator", [sys.executable, "-m", "obsgen", "simulate", "--scenario", "all",
                              "--config", str(harness.PROFILE), "--port", "0",
                              "--port-file", str(port_file), "--file-sd", str(stack.sim_sd),
                              "--start-on-scrape"],
                cwd=harness.ROOT)
    harness.wait_until("simulator port", lambda: port_file.exists() and port_file.read_text().strip(),
                       30, on_fail=lambda: procs.log("simulator"))
    url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    status = harness.wait_until("the first scrape", lambda: (lambda s: s["wall0"] and s)(
        json.loads(harness.get(f"{url}/status"))), 60, on_fail=lambda: procs.log("simulator"))
    assert status["speed"] == speed
    return {"url": url, "status": status}


@pytest.fixture(scope="session")
def run(stack, simulator):
    """All scenarios to the end: see tests/e2e/expected.py."""
    return expected.collect(stack, simulator)
