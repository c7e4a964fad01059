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

The delay the remote write adds is measured (``Lag``: a shard record's newest sample on
the shards against the newest the centre answers, every POLL) and printed with each
alert's first firing on both sides. Speed as in the parity test (20x,
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
SPLIT = ("straggler", "healthy", "grad-explosion")
WHOLE = ("nan", "rank-loss")
# the jobs whose pipeline stages sit on different shards
STAGES_APART = ("megatron",)


class Lag(threading.Thread):
    """How much later a shard's record can be read at the centre: every POLL, the newest
    sample of a shard-tier record on the shards against the newest the central store
    answers for it (its ingestion, flush and latency offset included), in wall seconds."""

    def __init__(self, shards: list[harness.Prometheus], centre: harness.Prometheus,
                 record: str):
        super().__init__(daemon=True)
        self.shards, self.centre, self.stop = shards, centre, threading.Event()
        self.record = record  # the busy-time mean, named for the scaled windows
        self.seen: list[float] = []
        self.errors: list[str] = []  # what a poll could not read, for the test's message
        self.empty = {"shards": 0, "centre": 0}  # polls where a side answered nothing

    def _newest(self, store: harness.Prometheus) -> float | None:
        try:
            got = store.query(f"max(timestamp({self.record}))")
        except Exception as exc:
            raise RuntimeError(f"{store.url}: {exc!r}") from exc
        return float(got[0]["value"][1]) if got else None

    def run(self):
        while not self.stop.wait(POLL):
            try:
                shards = [t for t in map(self._newest, self.shards) if t is not None]
                centre = self._newest(self.centre)
            except Exception as exc:  # a shard restarting; anything else, the test says
                if len(self.errors) < 5:
                    self.errors.append(f"{time.time():.1f} {exc}")
                continue
            if not shards:
                self.empty["shards"] += 1
            if centre is None:
                self.empty["centre"] += 1
            if shards and centre is not None:
                self.seen.append(max(0.0, max(shards) - centre))

    def summary(self) -> tuple[float, float, int, list[str]]:
        """(median, largest) delay, how many polls measured it, the last errors."""
        ordered = sorted(self.seen) or [float("nan")]
        return (ordered[len(ordered) // 2], ordered[-1], len(self.seen),
                list(self.errors) + [f"empty answers: {self.empty}"])


@dataclass
class Sharded:
    wall0: float
    single: harness.Prometheus
    shards: list[harness.Prometheus]
    vm: harness.Prometheus
    webhook: harness.Webhook
    lag: tuple  # Lag.summary(): median and largest delay at the centre (wall s), polls, errors
    ingest: dict  # shard 0's remote write against its scrapes (_ingest)
    rendered: Path  # the sharded render
    keep: list[str]  # its keep-list
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
    for side in ("single", "sharded"):
        (tmp / side).mkdir()
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
        keep = _keep(rendered)
        lag = Lag(shards, vm_store, next(n for n in keep if n.startswith("job_rank:train_busy")))
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
        ingest = _ingest(shards[0], vm_store, span)
        yield Sharded(wall0, single, shards, vm_store, webhook, lag.summary(), ingest, rendered, keep, got)
    finally:
        if lag:
            lag.stop.set()
        for f in flushers:
            f.stop()
        for name in reversed(names):
            procs.stop(name)
        webhook.stop()


def _counter(text: str, name: str) -> float:
    """The sum of a counter's series in a /metrics page (0 when it has none)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith((name + "{", name + " ")))


def _keep(rendered: Path) -> list[str]:
    """The series names of the rendered write_relabel keep-list (the same on every shard)."""
    shard = yaml.safe_load((rendered / "sharding" / "shard-0.yaml").read_text())
    (rule,) = shard["remote_write"][0]["write_relabel_configs"]
    return rule["regex"].split("|")


def _scalar(store: harness.Prometheus, expr: str) -> float:
    got = store.query(expr)
    return float(got[0]["value"][1]) if got else 0.0


def _ingest(shard: harness.Prometheus, centre: harness.Prometheus, span: float) -> dict:
    """What shard 0 (never restarted, so its counters cover the run) sent to the centre
    against what it scraped (samples, and bytes when its Prometheus counts them), its ranks,
    and the series names the centre holds."""
    page = harness.get(f"{shard.url}/metrics").decode()
    window = f"[{int(span)}s]"
    names = centre.query(f'count by (__name__) (last_over_time({{__name__=~".+"}}{window}))')
    return {"sent": _counter(page, "prometheus_remote_storage_samples_total"),
            "bytes": _counter(page, "prometheus_remote_storage_bytes_total"),
            "scraped": _scalar(shard, f"sum(sum_over_time(scrape_samples_scraped{window}))"),
            "scrapes": _scalar(shard, f"max(count_over_time(scrape_samples_scraped{window}))"),
            "ranks": _scalar(shard, "count(count by (job_id, rank) (last_over_time("
                                    f"train_step_seconds_count{window})))"),
            "names": {n["metric"].get("__name__", ""): int(float(n["value"][1])) for n in names}}


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


@pytest.mark.parametrize("scenario", STAGES_APART)
def test_the_jobs_stages_sit_on_different_shards(sharded, scenario):
    placed = _stage_shards(sharded, job_id(scenario))
    assert len(placed) > 1 and set().union(*placed.values()) == set(range(SHARDS)), placed
    assert all(len(s) == 1 for s in placed.values()), placed


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
    sent = {(labels.get("job_id"), labels["alertname"])
            for _, status, labels in sharded.webhook.received() if status == "firing"}
    want = {(j, a[0]) for j, alerts in EXPECT.items() for a in alerts}
    assert want and want <= sent, sorted(want - sent)


def test_a_shard_record_reaches_the_centre_within_an_evaluation_and_the_reads(sharded):
    """The delay the remote write adds to detection: a shard's newest record against the
    newest the centre answers, polled through the run (the shard's restart included)."""
    median, worst, polls, errors = sharded.lag
    assert polls > 10, (polls, errors, sharded.wall0)
    print(f"shard record at the centre: median {median:.2f} s, largest {worst:.2f} s wall "
          f"(x{FACTOR:g}: {median * FACTOR:.0f} s and {worst * FACTOR:.0f} s model time)")
    reads = vm.FIXED["latency_offset"] + vm.FIXED["ingest_flush"] + vm.FORCE_FLUSH
    assert median <= timescale.EVALUATION_INTERVAL / FACTOR + reads + 5 / FACTOR, sharded.lag


def test_the_centre_holds_only_the_keep_list_and_the_global_tiers_records(sharded):
    """The shards' write relabelling works: the centre holds the keep-list's series, what
    vmalert records and its alert state, nothing the shards scraped raw. Printed: what
    shard 0 sent against what it scraped (issue 38's ingest measure), per rank too."""
    got = sharded.ingest
    glob = {r["record"] for path in sharded.rendered.joinpath("rules").glob("*.yaml")
            for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]
            if "record" in r}
    allowed = set(sharded.keep) | glob | {"ALERTS", "ALERTS_FOR_STATE"}
    assert got["names"] and set(got["names"]) <= allowed, sorted(set(got["names"]) - allowed)
    assert set(sharded.keep) & set(got["names"]), "no shard record reached the centre"
    assert got["scraped"] > 0 and got["sent"] > 0 and got["ranks"] > 0, got
    per = f", {got['bytes'] / got['sent']:.1f} bytes a sample on the wire" if got["bytes"] else ""
    sent, scraped = (got[k] / got["scrapes"] / got["ranks"] for k in ("sent", "scraped"))
    top = sorted(((v, n) for n, v in got["names"].items() if n in sharded.keep), reverse=True)
    print(f"shard 0 ({got['ranks']:.0f} ranks) sent the centre {got['sent']:.0f} samples for "
          f"{got['scraped']:.0f} scraped, {got['sent'] / got['scraped']:.2%}{per}; per rank and "
          f"scrape interval {sent:.2f} sent, {scraped:.1f} scraped. Most series at the centre: "
          + ", ".join(f"{n} {v}" for v, n in top[:6]))
