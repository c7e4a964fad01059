"""VictoriaMetrics (single node) and vmalert beside a Prometheus of their own, all fed by
one simulator, for the parity test (tests/e2e/test_vm_parity.py).

VictoriaMetrics scrapes the simulator itself, with the scrape configuration Prometheus
gets, and vmalert evaluates the same rendered rule files against it: it queries
VictoriaMetrics and writes every recorded series and ALERTS back to it. Their time
constants are scaled with the world as Prometheus' are (obsgen/simulate/prometheus.py);
those VictoriaMetrics cannot scale are listed in ``FIXED``.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import yaml

from obsgen import config, registry, timescale
from obsgen.config import duration
from obsgen.scenarios import late
from obsgen.simulate import prometheus as promconfig

from . import harness

BINARIES = ("victoria-metrics", "vmalert")

# Delays of VictoriaMetrics 1.79 in wall seconds, whatever the speed of the world:
FIXED = {
    # -search.latencyOffset: an instant query for "now" is answered for now - offset;
    # values under one second count as one second.
    "latency_offset": 1.0,
    # a sample becomes searchable when the in-memory rows are flushed: once a second on
    # 1.79, and within FORCE_FLUSH on both lines, as the harness asks (Flusher)
    "ingest_flush": 1.0,
    # A series VictoriaMetrics has not stored before is missed by a selector that was
    # queried since its creation, until the tag-filter cache is reset: at most once per
    # 10 s, after the index rows are flushed (one more second).
    "new_series": 11.0,
}
REMOTE_WRITE_FLUSH = 0.1  # vmalert's default is 5 s
# VictoriaMetrics 1.145 makes ingested rows searchable on a 2 s ticker, and a row waits for
# the first tick after it is 2 s old (lib/storage/partition.go: pendingRowsFlushInterval,
# 1 s in 1.79), so a sample stays unsearchable for up to 4 s (3.4 to 4.5 s seen here), with
# no flag to shorten it. At 20x that is longer than the evaluation interval (1.5 s): a 1m
# rate window (3 s) held one searchable sample every few evaluations, the busy means
# dropped out and Train_Straggler_Persistent never fired. Raising -rule.evalDelay does not
# help, since vmalert stamps its records with the delayed time, so its own newest records
# are still unsearchable when the next rule counts them. The harness asks VictoriaMetrics
# to flush (/internal/force_flush, which its docs give for tests) this often, in wall
# seconds, on both lines: the flush scaled with the world, as every interval is.
FORCE_FLUSH = 0.25


def missing() -> list[str]:
    return [b for b in BINARIES if not shutil.which(b)]


def render(out: Path, factor: float, extra: dict | None = None) -> Path:
    """Rules rendered into ``out/render`` from the time-scaled profile of ``factor`` (and
    the config keys of ``extra``): the committed e2e profile when it is that one, otherwise
    one written by obsgen.timescale."""
    profile = harness.PROFILE
    if extra or timescale.check(config.load(profile, alert_names=registry.alert_names())) != factor:
        profile = out / "profile.yaml"
        profile.write_text(yaml.safe_dump({**yaml.safe_load(timescale.profile_yaml(factor)),
                                           **(extra or {})}))
    r = subprocess.run([sys.executable, "-m", "obsgen", "render", "--config", str(profile),
                        "--out", str(out / "render")], capture_output=True, text=True,
                       cwd=harness.ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return profile


def scrape_config(speed: float, sd_file: Path) -> dict:
    """The simulator's targets from ``sd_file``, the scrape interval scaled; the same for
    both engines. No refresh_interval, which VictoriaMetrics refuses: the file is complete
    before either engine starts, and the simulator's slots never change."""
    interval = duration(timescale.SCRAPE_INTERVAL / speed)
    return {"global": {"scrape_interval": interval, "scrape_timeout": interval},
            "scrape_configs": [{"job_name": "training",
                                "file_sd_configs": [{"files": [str(sd_file)]}]}]}


def victoria_metrics_flags(speed: float) -> list[str]:
    """-search.maxLookback is Prometheus' --query.lookback-delta, scaled: without it the
    lookback of a bare selector is the query's step, 5m from vmalert, and a vanished
    series would linger 100 model minutes at 20x. -search.latencyOffset at its floor: the
    default 30s hides the last 30 s from every rule. No answer from the response cache,
    whatever its idea of which time ranges are final (-search.cacheTimestampOffset then
    matters no more). No -dedup.minScrapeInterval: every sample is kept, as in Prometheus."""
    return [f"-search.maxLookback={duration(timescale.LOOKBACK_DELTA / speed)}",
            f"-search.latencyOffset={FIXED['latency_offset']:g}s",
            "-search.disableCache", "-loggerLevel=WARN"]


def vmalert_flags(speed: float, vm_url: str, notifier_url: str) -> list[str]:
    """vmalert reads and writes VictoriaMetrics (remote read only restores alert state at
    start). Groups without an interval of their own evaluate at the scaled global one, as
    in Prometheus. Without -disableAlertgroupLabel every alert and ALERTS series would have
    a label Prometheus' lack. -datasource.lookback stays 0, and -datasource.queryStep and
    -datasource.queryTimeAlignment at their defaults: vmalert 1.79 sends ``time`` in
    whole seconds, which VictoriaMetrics replaces by now - latency offset for a query of
    the last second, and a bare selector's lookback is -search.maxLookback anyway."""
    flags = [f"-datasource.url={vm_url}", f"-remoteWrite.url={vm_url}",
             f"-remoteRead.url={vm_url}",
             f"-evaluationInterval={duration(timescale.EVALUATION_INTERVAL / speed)}",
             f"-remoteWrite.flushInterval={duration(REMOTE_WRITE_FLUSH)}",
             f"-notifier.url={notifier_url}", "-disableAlertgroupLabel", "-loggerLevel=WARN"]
    if has_flag("vmalert", "rule.evalDelay"):
        # Newer vmalert (1.145) asks for the data as of ``now - evalDelay`` itself, 30 s by
        # default: 30 model minutes at 60x. Its help says to set it to VictoriaMetrics'
        # latency offset, which is what 1.79 got from VictoriaMetrics.
        flags.append(f"-rule.evalDelay={FIXED['latency_offset']:g}s")
    return flags


def has_flag(tool: str, flag: str) -> bool:
    """Whether the ``tool`` on PATH knows ``-flag``: a line of its -help that starts with
    it (a boolean flag's line holds nothing else; a mention in another's text does not count)."""
    out = subprocess.run([shutil.which(tool), "-help"], capture_output=True, text=True, timeout=60)
    return re.search(rf"^\s+-{re.escape(flag)}(\s|$)", out.stdout + out.stderr, re.M) is not None


@dataclass(frozen=True)
class Rules:
    """The rendered rule files as the budget reads them."""
    chains: dict[str, late.Chain]  # by alert: the record chains behind it
    exprs: dict[str, str]  # by alert: its expression


def rules(rules_dir: Path, speed: float) -> Rules:
    """Every alert of the rendered files with its record chains (late.chains: the right
    side of an ``unless`` and the ``-facts`` groups, recorded long before any fault, are on
    no firing path), the groups without an interval at the scaled evaluation interval."""
    docs = [yaml.safe_load(p.read_text()) for p in sorted(rules_dir.glob("*.yaml"))]
    exprs = {r["alert"]: str(r["expr"]) for d in docs for g in d["groups"] for r in g["rules"]
             if "alert" in r}
    return Rules(late.chains(docs, timescale.EVALUATION_INTERVAL / speed), exprs)


class Flusher:
    """Asks VictoriaMetrics every FORCE_FLUSH to make what it ingested searchable."""

    def __init__(self, url: str):
        self.url, self.done = url, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(FORCE_FLUSH):
            try:
                harness.get(f"{self.url}/internal/force_flush", timeout=2)
            except OSError:  # stopping, or busy for a moment: the next tick asks again
                pass

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)


def start_victoria_metrics(procs: harness.Processes, name: str, tmp: Path, factor: float,
                           flushers: list[Flusher], *flags: str,
                           port: int | None = None) -> harness.Prometheus:
    """A VictoriaMetrics single node storing into ``tmp/vm-data`` with the scaled flags and
    ``flags`` (on ``port``, or a free one), once it answers; its Flusher is appended to
    ``flushers`` to stop."""
    url = f"http://127.0.0.1:{port or harness.free_port()}"
    procs.start(name, [shutil.which("victoria-metrics"), f"-storageDataPath={tmp / 'vm-data'}",
                       f"-httpListenAddr={url.removeprefix('http://')}", *flags,
                       *victoria_metrics_flags(factor)])
    harness.wait_until(f"{name} ready", lambda: harness.get(f"{url}/health", timeout=2), 60,
                       on_fail=lambda: procs.log(name))
    flushers.append(Flusher(url))
    return harness.Prometheus(url)


def start_vmalert(procs: harness.Processes, name: str, rules_dir: Path, factor: float,
                  vm_url: str, notifier_url: str) -> harness.Prometheus:
    """vmalert on ``vm_url`` evaluating every rule file of ``rules_dir``, once it answers."""
    url = f"http://127.0.0.1:{harness.free_port()}"
    procs.start(name, [shutil.which("vmalert"), f"-rule={rules_dir / '*.yaml'}",
                       f"-httpListenAddr={url.removeprefix('http://')}",
                       *vmalert_flags(factor, vm_url, notifier_url)])
    harness.wait_until(f"{name} ready", lambda: harness.get(f"{url}/health", timeout=2), 60,
                       on_fail=lambda: procs.log(name))
    return harness.Prometheus(url)


@dataclass
class Engines:
    """The simulator and the two engines that scrape it, by their APIs."""
    rendered: Path  # everything rendered from the profile: rules/, ...
    sim_url: str
    wall0: float  # the first scrape, when the jobs' clock started
    prom: harness.Prometheus
    vm: harness.Prometheus  # VictoriaMetrics answers Prometheus' query API
    vmalert: harness.Prometheus  # and vmalert its /api/v1/alerts
    names: list[str]
    sink: harness.Webhook  # vmalert's notifier: it will not start without one
    flusher: Flusher

    def stop(self, procs: harness.Processes) -> None:
        self.flusher.stop()
        for name in reversed(self.names):
            procs.stop(name)
        self.sink.stop()


def start(procs: harness.Processes, tmp: Path, factor: float, scenarios: list[str],
          prefix: str = "parity") -> Engines:
    """One simulator (``scenarios``, each its own job), a Prometheus with the rendered
    rules and a VictoriaMetrics that both scrape it, and vmalert on VictoriaMetrics.
    Prometheus starts first, so the jobs' clock starts at its first scrape, as in the
    other e2e tests; VictoriaMetrics follows within a second or two. What started is
    stopped again when the rest cannot start."""
    names = [f"{prefix}-{n}" for n in ("simulator", "prometheus", "victoria-metrics", "vmalert")]
    sink, flushers = harness.Webhook(), []
    try:
        return _start(procs, tmp, factor, scenarios, names, sink, flushers)
    except BaseException:
        for f in flushers:
            f.stop()
        for name in reversed(names):
            procs.stop(name)
        sink.stop()
        raise


def _start(procs: harness.Processes, tmp: Path, factor: float, scenarios: list[str],
           names: list[str], sink: harness.Webhook, flushers: list[Flusher]) -> Engines:
    profile = render(tmp, factor)
    rules_dir = tmp / "render" / "rules"
    sim, prom_name, vm_name, vmalert_name = names
    sd, port_file = tmp / "sim-sd.json", tmp / "sim-port"
    argv = [sys.executable, "-m", "obsgen", "simulate", "--config", str(profile), "--port", "0",
            "--port-file", str(port_file), "--file-sd", str(sd), "--start-on-scrape"]
    for s in scenarios:
        argv += ["--scenario", s]
    procs.start(sim, argv, cwd=harness.ROOT)
    # the port file comes after the targets file has its final port
    harness.wait_until("simulator port",
                       lambda: port_file.exists() and port_file.read_text().strip(), 30,
                       on_fail=lambda: procs.log(sim))
    sim_url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    scrape = scrape_config(factor, sd)

    prom_port = harness.free_port()
    doc = promconfig.config(None, factor, sorted(str(p) for p in rules_dir.glob("*.yaml")))
    doc["scrape_configs"] = scrape["scrape_configs"]
    (tmp / "prometheus.yaml").write_text(yaml.safe_dump(doc))
    procs.start(prom_name, [
        shutil.which("prometheus"), f"--config.file={tmp / 'prometheus.yaml'}",
        f"--storage.tsdb.path={tmp / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
        "--log.level=warn", *promconfig.flags(factor)])
    prom = harness.Prometheus(f"http://127.0.0.1:{prom_port}")
    harness.wait_until("prometheus ready", lambda: harness.get(f"{prom.url}/-/ready", timeout=2),
                       60, on_fail=lambda: procs.log(prom_name))

    (tmp / "scrape.yaml").write_text(yaml.safe_dump(scrape))
    vm = start_victoria_metrics(procs, vm_name, tmp, factor, flushers,
                                f"-promscrape.config={tmp / 'scrape.yaml'}")
    vmalert = start_vmalert(procs, vmalert_name, rules_dir, factor, vm.url, sink.start())

    status = harness.wait_until("the first scrape", lambda: (lambda s: s["wall0"] and s)(
        json.loads(harness.get(f"{sim_url}/status"))), 60, on_fail=lambda: procs.log(sim))
    assert status["speed"] == factor
    targets = status["targets"]
    for name, engine in (("prometheus", prom), ("victoria-metrics", vm)):
        harness.wait_until(f"{name} scraping every target",
                           lambda e=engine: e.targets_up() >= targets, 30)
    return Engines(tmp / "render", sim_url, status["wall0"], prom, vm, vmalert, names, sink,
                   flushers[0])
