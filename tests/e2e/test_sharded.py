"""The sharded topology live (obsgen.shards): two Prometheus shards split the simulator's
hosts with the rendered ``hashmod`` relabelling, evaluate the shard tier and remote-write
the rendered keep-list to VictoriaMetrics, where vmalert evaluates the global tier and
sends to a live Alertmanager. Beside them one Prometheus scrapes every target and
evaluates the single rendering: the reference. Both must fire the same alerts with the
same labels, those the scenarios expect and nothing else.

The run includes what breaks a naive split:

* stages whose ranks sit on both shards: the hashed labels are ``instance`` (one
  simulator target per host) and ``job``, which split the straggler's job, the healthy
  ones, the Megatron-style one and the gradient spike's across the shards, while the NaN
  job and the rank loss sit on one. The test checks the placement from the shards' own
  data before it compares a single alert;
* a shard restart: shard 1 is stopped at model minute RESTART_AT and started again on
  the same storage (its WAL: the rate windows go on, its remote write resumes).

The remote write's own delay is measured from shard metrics
(prometheus_remote_storage_highest_timestamp_in_seconds minus
prometheus_remote_storage_queue_highest_sent_timestamp_seconds, sampled every POLL) and
printed with each alert's first firing on both sides. Speed as in the parity test (20x,
for VictoriaMetrics' fixed delays: tests/e2e/test_vm_parity.py); the remote write's
batch deadline (5 s by default) is scaled with the world as every other interval is.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from obsgen import timescale
from obsgen.config import duration
from obsgen.simulate import prometheus as promconfig
from obsgen.simulate.scenarios import SCENARIOS

from . import harness, vm
from .expected import EXPECTED, MIN, job_id
from .test_vm_parity import fired

FACTOR = 20.0
CHOSEN = ("healthy", "megatron", "straggler", "grad-explosion", "nan", "bubble", "rank-loss",
          "restart")
END = 45 * MIN
SHARDS = 2
BY = ["instance", "job"]
RESTART_AT = 15 * MIN  # model seconds: shard 1 stops then, and starts again
POLL = 0.5
EXPECT = {job_id(s): alerts for s, alerts in EXPECTED.values() if s in CHOSEN}
ONSET = {job_id(s): SCENARIOS[s].onset for s in CHOSEN}
# the jobs whose (first) stage the hashed labels put on both shards, and those on one
SPLIT = ("straggler", "healthy", "megatron", "grad-explosion")
WHOLE = ("nan", "rank-loss")


class Lag(threading.Thread):
    """The shards' remote-write lag: newest sample appended minus newest sent, in seconds,
    every POLL; the largest seen."""

    def __init__(self, shards: list[harness.Prometheus]):
        super().__init__(daemon=True)
        self.shards, self.stop, self.worst = shards, threading.Event(), 0.0

    def run(self):
        expr = ("max(prometheus_remote_storage_highest_timestamp_in_seconds) - "
                "max(prometheus_remote_storage_queue_highest_sent_timestamp_seconds)")
        while not self.stop.wait(POLL):
            for shard in self.shards:
                try:
                    got = shard.query(expr)
                except (OSError, ValueError):
                    continue
                for s in got:
                    self.worst = max(self.worst, float(s["value"][1]))


@dataclass
class Sharded:
    wall0: float
    single: harness.Prometheus
    shards: list[harness.Prometheus]
    vm: harness.Prometheus
    webhook: harness.Webhook
    lag: float
    fired: dict[str, dict]  # "single" and "sharded": what fired, from their ALERTS

    def model(self, t: float, job: str) -> float:
        return ((t - self.wall0) * FACTOR - ONSET.get(job, 0)) / MIN


def _shard_config(doc: dict, rendered: Path, index: int, scrape: dict) -> dict:
    """Shard ``index``'s Prometheus config: the rendered relabelling appended to the
    simulator's scrape job, the rendered remote write (its batch deadline scaled), the
    shard tier's rules."""
    shard = yaml.safe_load((rendered / "sharding" / f"shard-{index}.yaml").read_text())
    jobs = [{**job, "relabel_configs": [*job.get("relabel_configs", []),
                                        *shard["relabel_configs"]]}
            for job in scrape["scrape_configs"]]
    writes = [{**w, "queue_config": {"batch_send_deadline": duration(5 / FACTOR)}}
              for w in shard["remote_write"]]
    return {**doc, "scrape_configs": jobs, "remote_write": writes,
            "rule_files": sorted(str(p) for p in (rendered / "rules" / "shard").glob("*.yaml"))}


def _start_prometheus(procs, name: str, cfg: Path, data: Path, port: int) -> harness.Prometheus:
    procs.start(name, [shutil.which("prometheus"), f"--config.file={cfg}",
                       f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
                       "--log.level=warn", *promconfig.flags(FACTOR)])
    prom = harness.Prometheus(f"http://127.0.0.1:{port}")
    harness.wait_until(f"{name} ready", lambda: harness.get(f"{prom.url}/-/ready", timeout=2),
                       60, on_fail=lambda: procs.log(name))
    return prom


@pytest.fixture(scope="module")
def sharded(procs, tmp_path_factory):
    missing = vm.missing()
    if missing:
        message = f"{', '.join(missing)} missing: install Debian's victoria-metrics"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("sharded")
    vm_port = harness.free_port()
    profile = vm.render(tmp / "single", FACTOR)
    vm.render(tmp / "sharded", FACTOR, {"sharding": {
        "shards": SHARDS, "by": BY,
        "remote_write_url": f"http://127.0.0.1:{vm_port}/api/v1/write"}})
    single_rules, rendered = tmp / "single" / "render" / "rules", tmp / "sharded" / "render"
    names, webhook, flushers = [], harness.Webhook(), []
    lag = None
    try:
        hook = webhook.start()
        am_port = harness.free_port()
        am_cfg = tmp / "alertmanager.yaml"
        am_cfg.write_text(yaml.safe_dump(harness.alertmanager_config(
            rendered / "alertmanager" / "obsgen-routes.yaml", hook, FACTOR)))
        names.append("sharded-alertmanager")
        procs.start(names[-1], [
            shutil.which("prometheus-alertmanager") or shutil.which("alertmanager"),
            f"--config.file={am_cfg}", f"--storage.path={tmp / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address=",
            "--log.level=warn"])
        harness.wait_until("alertmanager ready", lambda: harness.get(
            f"http://127.0.0.1:{am_port}/-/ready", timeout=2), 60)

        sd, port_file = tmp / "sim-sd.json", tmp / "sim-port"
        argv = [sys.executable, "-m", "obsgen", "simulate", "--config", str(profile),
                "--port", "0", "--port-file", str(port_file), "--file-sd", str(sd),
                "--start-on-scrape"]
        for s in CHOSEN:
            argv += ["--scenario", s]
        names.append("sharded-simulator")
        procs.start(names[-1], argv, cwd=harness.ROOT)
        harness.wait_until("simulator port",
                           lambda: port_file.exists() and port_file.read_text().strip(), 30,
                           on_fail=lambda: procs.log("sharded-simulator"))
        sim_url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        scrape = vm.scrape_config(FACTOR, sd)

        names.append("sharded-victoria-metrics")
        vm_store = vm.start_victoria_metrics(procs, names[-1], tmp, FACTOR, flushers, port=vm_port)

        base = promconfig.config(None, FACTOR, [])
        shard_cfgs, shards = [], []
        for i in range(SHARDS):
            cfg = tmp / f"shard-{i}.yaml"
            cfg.write_text(yaml.safe_dump(_shard_config(base, rendered, i, scrape)))
            port = harness.free_port()
            shard_cfgs.append((cfg, tmp / f"shard-{i}-data", port))
            names.append(f"sharded-shard-{i}")
            shards.append(_start_prometheus(procs, names[-1], *shard_cfgs[-1]))
        # the reference: one Prometheus, every target, the single rendering
        single_cfg = tmp / "single.yaml"
        single_cfg.write_text(yaml.safe_dump({**promconfig.config(None, FACTOR, sorted(
            str(p) for p in single_rules.glob("*.yaml"))), "scrape_configs": scrape["scrape_configs"]}))
        names.append("sharded-single")
        single = _start_prometheus(procs, names[-1], single_cfg, tmp / "single-data",
                                   harness.free_port())
        names.append("sharded-vmalert")
        vm_url = f"http://127.0.0.1:{vm_port}"
        vm.start_vmalert(procs, names[-1], rendered / "rules", FACTOR, vm_url,
                         f"http://127.0.0.1:{am_port}")

        status = harness.wait_until("the first scrape", lambda: (lambda s: s["wall0"] and s)(
            json.loads(harness.get(f"{sim_url}/status"))), 60)
        targets = status["targets"]
        harness.wait_until("the shards scraping every target between them",
                           lambda: sum(s.targets_up() for s in shards) >= targets, 30)
        assert all(s.targets_up() for s in shards), "a shard scrapes nothing"
        harness.wait_until("the single Prometheus scraping every target",
                           lambda: single.targets_up() >= targets, 30)
        wall0 = status["wall0"]
        lag = Lag(shards)
        lag.start()

        # shard 1 restarts on its own storage at RESTART_AT
        while (time.time() - wall0) * FACTOR < RESTART_AT:
            time.sleep(0.2)
        procs.stop(names[names.index("sharded-shard-1")])
        names.remove("sharded-shard-1")
        names.append("sharded-shard-1-restarted")
        shards[1] = _start_prometheus(procs, names[-1], *shard_cfgs[1])
        lag.shards = shards

        want = {(j, a) for j, alerts in EXPECT.items() for a in alerts}
        deadline = wall0 + END / FACTOR + 120
        while time.time() < deadline and (time.time() - wall0) * FACTOR < END:
            time.sleep(1)
        time.sleep(30)  # what the centre may still have on its way
        span = int(time.time() - wall0) + 5
        got = {"single": fired(single, span), "sharded": fired(vm_store, span)}
        assert want  # the scenarios expect something
        yield Sharded(wall0, single, shards, vm_store, webhook, lag.worst, got)
    finally:
        if lag:
            lag.stop.set()
        for f in flushers:
            f.stop()
        for name in reversed(names):
            procs.stop(name)
        webhook.stop()


def _alerts(run: Sharded, side: str, job: str) -> dict:
    return {a: f for (j, a), f in run.fired[side].items() if j == job}


def _stage_shards(run: Sharded, job: str) -> dict[str, set[int]]:
    """Which shards hold the ranks of each stage of ``job``, from the shards' own series."""
    out: dict[str, set[int]] = {}
    for i, shard in enumerate(run.shards):
        for s in shard.query(f'group by (stage) (last_over_time(train_step_seconds_count'
                             f'{{job_id="{job}"}}[1h]))'):
            out.setdefault(s["metric"].get("stage", "0"), set()).add(i)
    return out


@pytest.mark.parametrize("scenario", SPLIT)
def test_the_jobs_stage_sits_on_both_shards(sharded, scenario):
    placed = _stage_shards(sharded, job_id(scenario))
    assert placed.get("0") == set(range(SHARDS)), placed


@pytest.mark.parametrize("scenario", WHOLE)
def test_the_job_sits_on_one_shard(sharded, scenario):
    placed = _stage_shards(sharded, job_id(scenario))
    assert placed and all(len(s) == 1 for s in placed.values()), placed


@pytest.mark.parametrize("scenario", CHOSEN)
def test_the_sharded_alerts_are_the_single_prometheus_alerts(sharded, scenario):
    job = job_id(scenario)
    single, split = _alerts(sharded, "single", job), _alerts(sharded, "sharded", job)
    assert set(split) == set(single) == EXPECT[job], (sorted(single), sorted(split))
    for a in split:
        assert sorted(map(sorted, (l.items() for l in split[a].labels))) == sorted(
            map(sorted, (l.items() for l in single[a].labels))), a
        print(f"{job} {a[0]} {dict(a[1]) or ''}: single at model minute "
              f"{sharded.model(single[a].first, job):.2f}, sharded "
              f"{sharded.model(split[a].first, job):.2f}: "
              f"{split[a].first - single[a].first:+.2f} s wall, "
              f"{(split[a].first - single[a].first) * FACTOR / MIN:+.2f} model min")


def test_no_alert_fires_for_a_job_the_simulator_does_not_run(sharded):
    for side in ("single", "sharded"):
        assert {j for j, _ in sharded.fired[side]} <= set(EXPECT), side


def test_vmalert_sent_the_global_tiers_alerts_to_alertmanager(sharded):
    sent = {(a["labels"].get("job_id"), a["labels"]["alertname"])
            for _, _, body in sharded.webhook.received() for a in body.get("alerts", [])}
    want = {(j, a[0]) for j, alerts in EXPECT.items() for a in alerts}
    assert want and want <= sent, sorted(want - sent)


def test_the_remote_write_lag_is_measured(sharded):
    print(f"remote write lag of the shards, worst seen: {sharded.lag:.2f} s wall "
          f"({sharded.lag * FACTOR / MIN:.2f} model min)")
    assert 0 <= sharded.lag < timescale.EVALUATION_INTERVAL / FACTOR * 4
