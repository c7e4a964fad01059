"""A real PyTorch DDP job (torchrun, 4 ranks, gloo on CPU) instrumented with
obsgen.instrument, scraped by the real Prometheus: Train_Straggler_Persistent fires for
the slow rank and nothing else fires, while the naive step-time comparison of the
reference document sees four equal ranks and the time inside the all-reduce points at
everyone but the straggler.

"Nothing else" is judged once the job is older than the persistence window (30 s in the
e2e profile) plus the rate window: within its first window the persistent-straggler rule
averages over a partly filled window, and a rank whose first steps were slower (rank 0
initialises more) can be flagged for a few seconds. That is a property of the rule, not
of this job; the report of issue 4 describes it."""
from __future__ import annotations

import copy
import importlib.util
import os
import time
from datetime import datetime, timezone

import pytest

from obsgen import config, pipeline, scenarios

from . import harness

JOB, SLOW, RANKS = "ddp-e2e", "2", 4
P = "Train_Straggler_Persistent"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true",
    reason="torch not installed: `make e2e` installs obsgen[torch]")


def per_rank(stack, expr: str) -> dict[str, float]:
    return {s["metric"]["rank"]: float(s["value"][1]) for s in stack.prom.query(expr)}


def mean(metric: str, window: str, extra: str = "") -> str:
    sel = f'{{job_id="{JOB}"{extra}}}'
    return (f"sum by (rank) (rate({metric}_sum{sel}[{window}])) / "
            f"sum by (rank) (rate({metric}_count{sel}[{window}]))")


@pytest.fixture(scope="module")
def ddp(stack, procs, tmp_path_factory):
    """Start the job; yield once the straggler alert fired, while it still trains."""
    tmp = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OBSGEN_PORT_BASE": "0", "OBSGEN_ADDR": "127.0.0.1",
           "OBSGEN_SD_DIR": str(stack.sd_dir), "OMP_NUM_THREADS": "1"}
    started = time.time()
    proc = procs.start("torchrun", [
        harness.torchrun(), "--standalone",
        f"--nproc_per_node={RANKS}", str(harness.ROOT / "examples" / "ddp_straggler.py"),
        "--job-id", JOB, "--slow-rank", SLOW, "--slow-ms", "20", "--steps", "1500", "--max-seconds", "200",
        "--checkpoint-every", "8", "--checkpoint-dir", str(tmp)], env=env)
    harness.wait_until(f"{RANKS} ranks scraped", lambda: len(stack.prom.query(
        f'train_world_size{{job_id="{JOB}"}}')) == RANKS, 120,
        on_fail=lambda: procs.log("torchrun"))
    first = time.time()
    settled = first + (30 + 5) * 60 / stack.speed  # persistence + rate window, scaled
    harness.wait_until(f"{P} for rank {SLOW} of job {JOB}", lambda: stack.prom.query(
        f'ALERTS{{alertname="{P}", alertstate="firing", job_id="{JOB}", rank="{SLOW}"}}'), 120,
        on_fail=lambda: procs.log("torchrun"))
    time.sleep(max(0.0, settled - time.time()))
    yield {"proc": proc, "started": started, "settled": settled}


def test_persistent_straggler_fires_for_the_slow_rank(stack, ddp):
    (alert,) = stack.prom.query(f'ALERTS{{alertstate="firing", job_id="{JOB}"}}')
    assert alert["metric"]["alertname"] == P
    assert (alert["metric"]["rank"], alert["metric"]["stage"]) == (SLOW, "0")
    assert alert["metric"]["node"]  # the host name, from obsgen.instrument


def test_the_naive_step_time_comparison_does_not_single_it_out(stack, ddp):
    window = "30s"
    step = per_rank(stack, mean("train_step_seconds", window))
    assert len(step) == RANKS
    median = sorted(step.values())[RANKS // 2 - 1]
    assert step[SLOW] / median < 1.05, step  # the straggler's steps are no longer
    # the reference document's rule (section 3.1), its many-to-one match made explicit
    naive = stack.prom.query(f"""
        max by (job_id) (histogram_quantile(0.5, sum by (job_id, rank, le)
          (rate(train_step_seconds_bucket{{job_id="{JOB}"}}[{window}]))))
        / quantile by (job_id) (0.5, histogram_quantile(0.5, sum by (job_id, rank, le)
          (rate(train_step_seconds_bucket{{job_id="{JOB}"}}[{window}])))) > 1.10""")
    assert naive == []
    compute = per_rank(stack, mean("train_compute_seconds", window))
    assert max(compute, key=compute.get) == SLOW
    others = sorted(v for r, v in compute.items() if r != SLOW)
    assert compute[SLOW] > 1.2 * others[len(others) // 2], compute


def test_the_slow_rank_waits_least_inside_the_all_reduce(stack, ddp):
    coll = per_rank(stack, mean("nccl_collective_duration_seconds", "30s",
                                ', group="dp", op="AllReduce"'))
    assert len(coll) == RANKS and min(coll, key=coll.get) == SLOW, coll


def test_every_rank_all_reduces_the_same_bytes_per_step_in_the_dp_group(stack, ddp):
    sel = f'{{job_id="{JOB}", group="dp", op="AllReduce"}}'
    per_step = per_rank(stack, f"sum by (rank) (rate(nccl_collective_bytes_total{sel}[10s])) / "
                               f"sum by (rank) (rate(train_step_seconds_count{{job_id=\"{JOB}\"}}[10s]))")
    params = 64 * 128 + 128 + 128 * 128 + 128 + 128 + 1  # the example's MLP, float32
    assert per_step and all(abs(v - 4 * params) / (4 * params) < 0.02 for v in per_step.values()), per_step


def _all_gone_fires_within() -> float:
    """Model seconds within which the rendered scenarios state that a job whose ranks are
    all gone fires Train_RankFailed, for the config of model time the e2e profile is scaled
    from (the progress window, windows.restart_gap, the for and two evaluations)."""
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(model time)")
    (within,) = [e.within for item in scenarios.stated(pipeline.families(cfg), cfg)["ranks"]
                 if getattr(item, "sentence", "").startswith("all ranks gone")
                 for e in item.expects if e.alert == "Train_RankFailed"]
    return within * 60


def test_only_the_straggler_fires_and_a_completed_job_is_not_a_failed_one(stack, ddp, procs):
    proc = ddp["proc"]
    assert proc.wait(240) == 0, procs.log("torchrun")
    procs.procs.pop("torchrun", None)
    # as long as the e2e profile's scenarios say a job whose processes all exited takes to
    # fire Train_RankFailed (the progress window, windows.restart_gap, its for), and a scrape
    time.sleep((_all_gone_fires_within() + 30) / stack.speed)
    since = int(time.time() - ddp["settled"])
    # evaluations each alert fired in since the job settled: the straggler throughout; in
    # this world 60 times faster a rate window is 5 s of real steps, and another rank of a
    # CPU job sharing 2 cores can be named for a moment (issue 18's note), never for long
    fired = {(s["metric"]["alertname"], s["metric"].get("rank")): float(s["value"][1])
             for s in stack.prom.query(
                 f'count_over_time(ALERTS{{alertstate="firing", job_id="{JOB}"}}[{since}s])')}
    assert {a for a, _ in fired} == {P} and (P, SLOW) in fired, fired
    assert all(n <= 0.2 * fired[(P, SLOW)] for k, n in fired.items() if k != (P, SLOW)), fired
    whole_run = int(time.time() - ddp["started"]) + 5
    assert not stack.prom.query(f'ALERTS{{alertname="Train_RankFailed", alertstate="firing", '
                                f'job_id="{JOB}"}}[{whole_run}s]')  # never, not even at the end
    settled = datetime.fromtimestamp(ddp["settled"], timezone.utc)
    notified = {(n["receiver"], a["labels"]["alertname"], a["labels"].get("rank"),
                 datetime.fromisoformat(a["startsAt"].replace("Z", "+00:00")) >= settled)
                for n in list(stack.webhook.notifications) for a in n["alerts"]
                if a["labels"].get("job_id") == JOB and a["status"] == "firing"}
    assert {n[:3] for n in notified if n[1:3] == (P, SLOW)} == {("obsgen-platform-warning", P, SLOW)}
    assert not {n for n in notified if n[1] != P and n[3]}  # nothing but stragglers
