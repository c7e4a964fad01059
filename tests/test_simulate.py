"""obsgen simulate: scenarios on obsgen.synth, served as the ranks' exposition."""
from __future__ import annotations

import copy
import json
import re
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from obsgen import config, contract, pipeline
from obsgen.cli import main
from obsgen.instrument.metrics import EMITTERS
from obsgen.simulate import scenarios
from obsgen.simulate.server import Simulator


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self):
        return self.now


def sim_at(jobs, minutes: float, speed=60.0, targets="node", step=0.5):
    clock = Clock()
    sim = Simulator(jobs, speed=speed, targets=targets, clock=clock)
    while (clock.now - sim.wall0) * speed < minutes * 60:
        clock.now += step
        sim.tick()
    return sim, clock


def samples(body: bytes) -> list:
    return [s for f in text_string_to_metric_families(body.decode()) for s in f.samples]


def test_every_scenario_builds_a_job_of_the_requested_size():
    for name in scenarios.SCENARIOS:
        job = scenarios.job(name, ranks=16)
        assert job.ranks == 16 and job.job_id == f"sim-{name}"


TARGETS = {"one target per node of 4 ranks": ("node", 4), "one per rank": ("rank", 16),
           "one per job": ("job", 1)}


@pytest.mark.parametrize("job_id", ["sim-healthy", "team/run-7"])
@pytest.mark.parametrize("mode,count", list(TARGETS.values()), ids=list(TARGETS))
def test_targets(mode, count, job_id):
    """Every slot discovery lists serves its ranks, whatever the job id holds (a slash too)."""
    sim, _ = sim_at([scenarios.job("healthy", job_id=job_id, ranks=16)], 5, targets=mode)
    groups = sim.sd("127.0.0.1:1")
    assert len(groups) == count
    ranks = set()
    for g in groups:
        for s in samples(sim.bodies[g["labels"]["__metrics_path__"]]):
            ranks.add(s.labels["rank"])
    assert ranks == {str(r) for r in range(16)}


def test_series_carry_the_contract_labels_and_every_metric_the_rules_read():
    sim, clock = sim_at([scenarios.job("bubble")], 20)
    seen = set()
    for s in samples(sim.all_body):
        name = next(k for k in contract.METRICS if s.name in (k, k + "_bucket", k + "_sum", k + "_count"))
        m = contract.METRICS[name]
        want = set(m.labels) | {"node"} | ({"le"} if s.name.endswith("_bucket") else set())
        assert set(s.labels) == want, (s.name, s.labels)
        seen.add(name)
    rules = "".join(t for p, t in pipeline.render_all(config.Config(
        copy.deepcopy(config.DEFAULTS), "(defaults)")).items() if p.startswith("rules/"))
    # every metric a rule reads that a training process emits, except NCCL's own link
    # recoveries and the two that are not time-scale invariant (see obsgen/timescale.py)
    left_out = {"nccl_link_recovery_total", "checkpoint_bytes_written_total",
                "train_planned_end_timestamp_seconds"}
    read = {m for m, metric in contract.METRICS.items()
            if metric.emitter in EMITTERS and m not in left_out
            and re.search(rf"\b{m}(_sum|_count|_bucket)?\b", rules)}
    assert read and read <= seen, read - seen


def test_the_checkpoint_timestamp_is_wall_clock_and_counters_are_model_seconds():
    sim, clock = sim_at([scenarios.job("healthy")], 25)
    ts = {s.value for s in samples(sim.all_body) if s.name == "train_checkpoint_timestamp_seconds"}
    # the last checkpoint completed at model minute 20:20 -> 20.33 wall seconds after start
    assert len(ts) == 1 and ts.pop() == pytest.approx(sim.wall0 + (20 * 60 + 20) / 60)
    steps = {s.value for s in samples(sim.all_body) if s.name == "train_current_step"}
    assert len(steps) == 1 and 600 < steps.pop() < 1000  # ~25 minutes of 1.5-2 s steps


def test_checkpoints_go_on_after_the_ticker_stalls_past_one():
    """A loaded machine can stall the ticker for longer than a checkpoint interval (10
    model minutes, 10 wall seconds at 60x). The job writes the one it missed late and keeps
    its schedule: a skipped checkpoint once stopped every job's checkpoints for good, and
    Train_NoCheckpoints fired for all of them (a CI run of make e2e)."""
    sim, clock = sim_at([scenarios.job("healthy")], 15)
    clock.now += 25.5  # no tick from model minute 15 past 40: three checkpoints inside
    sim.tick()
    while (clock.now - sim.wall0) * 60 < 75 * 60:
        clock.now += 0.5
        sim.tick()
    ts = {s.value for s in samples(sim.all_body) if s.name == "train_checkpoint_timestamp_seconds"}
    # on schedule again: the one due at model minute 70 completed 20 s later
    assert len(ts) == 1 and ts.pop() == pytest.approx(sim.wall0 + (70 * 60 + 20) / 60)
    count = {s.value for s in samples(sim.all_body) if s.name == "train_checkpoint_total"}
    assert count == {7.0}  # every 10 minutes to 70: none lost to the jump


def test_a_completed_job_serves_its_final_step_two_scrapes_longer_then_vanishes():
    job = scenarios.job("completion")
    sim, clock = sim_at([job], 1)
    final = None
    while clock.now < sim.wall0 + 30:
        clock.now += 0.5
        sim.tick()
        steps = [s.value for s in samples(sim.all_body) if s.name == "train_current_step"]
        if steps and steps[0] == job.planned_steps:
            final = final or clock.now
        if final and not steps:
            break
    assert final, "the final step was never served"
    assert 1.0 <= clock.now - final <= 1.6  # two model scrape intervals (30 s / 60)
    assert sim.bodies == {} and len(sim.sd("x")) == 2  # the slots stay, answering 404


def test_lost_ranks_vanish_from_their_node_target():
    sim, _ = sim_at([scenarios.job("rank-loss")], 12)
    ranks = {s.labels["rank"] for s in samples(sim.all_body)}
    assert ranks == {str(r) for r in range(6)}


def test_http_serves_metrics_sd_and_404_for_gone_targets():
    sim = Simulator([scenarios.job("straggler", ranks=4)], speed=60)
    server, stop = sim.serve("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        sd = json.loads(urllib.request.urlopen(f"{base}/sd").read())
        assert sd[0]["targets"] == [f"127.0.0.1:{server.server_address[1]}"]
        body = urllib.request.urlopen(base + sd[0]["labels"]["__metrics_path__"]).read()
        assert any(s.name == "train_world_size" and s.value == 4 for s in samples(body))
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/metrics/sim-straggler/gone")
        assert err.value.code == 404
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_file_sd_lists_the_slots_before_any_tick(tmp_path):
    path = tmp_path / "targets.json"
    Simulator([scenarios.job("healthy", ranks=8)], speed=60, file_sd=str(path), host="127.0.0.1:1")
    groups = json.loads(path.read_text())
    assert [g["labels"]["instance"] for g in groups] == ["sim-healthy-node-000:9400",
                                                        "sim-healthy-node-001:9400"]


def test_the_clock_can_wait_for_the_first_scrape():
    clock = Clock()
    sim = Simulator([scenarios.job("healthy", ranks=4)], speed=60, clock=clock,
                    start_on_scrape=True)
    clock.now += 100
    sim.tick()
    assert sim.wall0 is None and sim.bodies == {} and len(sim.sd("x")) == 1
    sim.start()
    assert sim.wall0 == clock.now and sim.model_time == 0 and sim.bodies


ERRORS = {
    "an unknown scenario": (["--scenario", "nope"], "--scenario: unknown scenario 'nope'"),
    "a job id for several scenarios": (["--scenario", "nan", "--scenario", "bubble", "--job-id", "x"],
                                       "--job-id: only with a single --scenario"),
    "zero ranks": (["--ranks", "0"], "--ranks: must be >= 1, got 0"),
}


@pytest.mark.parametrize("argv,message", list(ERRORS.values()), ids=list(ERRORS))
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    assert main(["simulate", *argv]) == 2
    assert capsys.readouterr().err.strip().startswith(message)


def test_a_profile_that_is_not_uniformly_scaled_is_refused(tmp_path, capsys):
    cfg = tmp_path / "p.yaml"
    cfg.write_text("windows: {rate: 5s}\n")
    assert main(["simulate", "--config", str(cfg)]) == 2
    assert "windows.rate: 5s is the default 300s divided by 60, not 1" in capsys.readouterr().err


def test_prometheus_config_scales_its_intervals(tmp_path, capsys):
    out = tmp_path / "prom.yml"
    assert main(["simulate", "--speed", "60", "--prometheus-config", str(out), "--port", "9999"]) == 0
    import yaml

    doc = yaml.safe_load(out.read_text())
    assert doc["global"] == {"scrape_interval": "500ms", "scrape_timeout": "500ms",
                             "evaluation_interval": "500ms"}
    assert doc["scrape_configs"][0]["http_sd_configs"][0]["url"] == "http://127.0.0.1:9999/sd"
    assert "--query.lookback-delta=5s" in capsys.readouterr().out
