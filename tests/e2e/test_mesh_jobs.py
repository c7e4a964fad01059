"""Real PyTorch jobs on a parallel mesh (torchrun, 4 ranks, gloo on CPU), instrumented with
obsgen.instrument and scraped by the real Prometheus, each with one slow GPU
(examples/mesh_straggler.py):

* TP=2 x DP=2: rank 3's layers are slower, so its TP peer (rank 2) waits for it inside
  every layer's all-reduce and reports the same compute time;
* PP=2 x DP=2, real send/recv between the stages: rank 3, one of the two ranks of stage
  1, is slower, so its pipeline peer in stage 0 (rank 1) waits for it in recv.

In both, Train_Straggler_Persistent names the slow GPU alone, and no other straggler alert
fires: no other rank once it is named, and neither Transient nor TPGroup over the whole
run."""
from __future__ import annotations

import importlib.util
import os
import time

import pytest

from obsgen import config, contract, registry

from . import harness

P = "Train_Straggler_Persistent"
# each rank's busy time as the rules record it, in the e2e profile's window
WINDOWS = config.load(harness.PROFILE, alert_names=registry.alert_names())["windows"]
BUSY = contract.RECORDED["busy_mean"].name.format(**WINDOWS)
SLOW, RANKS = "3", 4
JOBS = {  # mesh -> (arguments, the peer that waits for the slow GPU)
    "tp2-dp2": (["--tp", "2"], "2"),
    "pp2-dp2": (["--pp", "2"], "1"),
}

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true",
    reason="torch not installed: `make e2e` installs obsgen[torch]")


def per_rank(stack, expr: str) -> dict[str, float]:
    return {s["metric"]["rank"]: float(s["value"][1]) for s in stack.prom.query(expr)}


def diagnosis(stack, job_id: str) -> str:
    """What the straggler rules saw of the job over the last 10 wall seconds (10 model
    minutes), rank by rank: scrapes stored, and the evaluations each record held at."""
    sel = f'{{job_id="{job_id}"}}'
    rows = {"scrapes": f"count_over_time(train_world_size{sel}[10s])"}
    for kind in ("busy_mean", "straggler_flag", "straggler_unbroken", "straggler_held"):
        rec = contract.RECORDED[kind].name.format(**WINDOWS)
        rows[rec] = f"count_over_time({rec}{sel}[10s])"
    out = []
    for what, expr in rows.items():
        try:
            got = per_rank(stack, expr)
        except (OSError, ValueError) as exc:
            got = str(exc)
        out.append(f"  {what}: {got}")
    last = per_rank(stack, f"{BUSY}{sel}")
    out.append(f"  {BUSY} now: { {r: round(v * 1000, 2) for r, v in sorted(last.items())} } ms")
    return "the last 10 s of the job, per rank:\n" + "\n".join(out)


@pytest.fixture(scope="module", params=list(JOBS))
def job(request, stack, procs, tmp_path_factory):
    """Run one mesh job until the slow GPU is named, then keep it training until the
    module's tests are done: they read its last seconds."""
    mesh = request.param
    args, peer = JOBS[mesh]
    job_id = f"mesh-{mesh}"
    stop = tmp_path_factory.mktemp(f"mesh-{mesh}") / "stop"
    env = {**os.environ, "OBSGEN_PORT_BASE": "0", "OBSGEN_ADDR": "127.0.0.1",
           "OBSGEN_SD_DIR": str(stack.sd_dir), "OMP_NUM_THREADS": "1"}
    started = time.time()
    name = f"torchrun-{mesh}"
    # the stop file ends it; --max-seconds only bounds a job whose test died
    proc = procs.start(name, [
        harness.torchrun(), "--standalone", f"--nproc_per_node={RANKS}",
        str(harness.ROOT / "examples" / "mesh_straggler.py"), "--job-id", job_id, *args,
        "--slow-rank", SLOW, "--max-seconds", "400", "--stop-file", str(stop)], env=env)
    harness.wait_until(f"{RANKS} ranks of {job_id} scraped", lambda: len(stack.prom.query(
        f'train_world_size{{job_id="{job_id}"}}')) == RANKS, 120, on_fail=lambda: procs.log(name))
    # the first scrape of every rank, as Prometheus stored it: a subquery's steps are
    # aligned to its resolution, so a scrape newer than the last step shows at the next
    first = harness.wait_until(f"the first scrape of every rank of {job_id}", lambda: (
        lambda r: len(r) == RANKS and r)(stack.prom.query(
            f'min_over_time(timestamp(train_world_size{{job_id="{job_id}"}})[2m:250ms])')),
        10, on_fail=lambda: procs.log(name))
    scraped = max(float(s["value"][1]) for s in first)
    try:
        harness.wait_until(f"{P} for rank {SLOW} of {job_id}", lambda: stack.prom.query(
            f'ALERTS{{alertname="{P}", alertstate="firing", job_id="{job_id}", rank="{SLOW}"}}'),
            120, on_fail=lambda: diagnosis(stack, job_id) + "\n" + procs.log(name))
        named = time.time()
        time.sleep(20)  # twenty model minutes more of training, named
        yield {"id": job_id, "peer": peer, "started": started, "scraped": scraped,
               "named": named, "proc": proc, "name": name}
    finally:
        stop.touch()
    assert proc.wait(120) == 0, procs.log(name)
    procs.procs.pop(name, None)


def test_the_slow_gpu_is_named_within_5_model_minutes_of_its_stage_being_judged(job):
    """The job is slow from its start, so its stage is judged once two rate windows (10
    model minutes) follow its ranks' first scrape; within 5 model minutes more the alert
    fires (1m of for). The ranks' scrape phases and this test's poll add up to 2 s
    (2 model minutes in this world, 60 times faster than the wall clock)."""
    since_judged = job["named"] - job["scraped"] - 10
    stalled = harness.STALLS.within(job["scraped"], job["named"])  # the machine's, wall = model
    print(f"{job['id']}: {P} {since_judged:.1f} model minutes after its stage was judged "
          f"({stalled:.1f} of the machine's stalls)")
    assert since_judged < 5 + 2 + stalled, since_judged


def _fired(stack, job, since: float) -> set:
    window = int(time.time() - since) + 1
    return {(s["metric"]["alertname"], s["metric"].get("rank"))
            for s in stack.prom.query(
                f'max_over_time(ALERTS{{alertstate="firing", alertname=~"Train_Straggler_.*", '
                f'job_id="{job["id"]}"}}[{window}s])')}


def test_once_the_slow_gpu_is_named_no_other_rank_is(stack, job):
    """Of the straggler alerts (the job never checkpoints, and in PP the slow stage leaves
    the other idle: other families say so). From the naming on: in this world 60 times
    faster than the wall clock a rate window is 5 s of real steps, whose noise a 5-minute
    window averages away, so a two-rank stage can flag its other rank for a moment while
    the job starts."""
    assert _fired(stack, job, job["named"]) == {(P, SLOW)}


def test_neither_transient_nor_a_tp_group_fires_over_the_whole_run(stack, job):
    assert {a for a, _ in _fired(stack, job, job["started"] - 5)} == {P}


def test_its_peer_waits_for_it_in_compute_but_its_busy_time_is_its_own(stack, job):
    sel = f'{{job_id="{job["id"]}"}}'
    window = "10s"
    compute = per_rank(stack, f"sum by (rank) (rate(train_compute_seconds_sum{sel}[{window}])) / "
                              f"sum by (rank) (rate(train_compute_seconds_count{sel}[{window}]))")
    # the newest busy mean of each rank over the last few evaluations: in this world a 1m
    # window is 1 s of 0.5 s scrapes, and a late scrape or a step longer than that leaves
    # a rank without a record at one evaluation (the rules hold it through their 45s reads)
    busy = per_rank(stack, f"last_over_time({BUSY}{sel}[3s])")
    peer = job["peer"]
    assert len(compute) == len(busy) == RANKS, (compute, busy)
    # compute alone would name the peer too (what the straggler rules read before)
    assert compute[peer] > 0.95 * compute[SLOW], compute
    others = [busy[r] for r in busy if r != SLOW]
    assert busy[SLOW] > 1.2 * max(others), busy
    # the peer's busy time sits with the healthy ranks', not with the slow GPU's (on a
    # loaded CPU the host wakes it late after each collective, a few % of busy time)
    healthy = min(busy[r] for r in busy if r not in (SLOW, peer))
    assert busy[peer] - healthy < 0.35 * (busy[SLOW] - healthy), busy


def test_every_rank_names_its_place_in_the_mesh(stack, job):
    info = stack.prom.query(f'train_rank_mesh_info{{job_id="{job["id"]}"}}')
    places = {s["metric"]["rank"]: s["metric"] for s in info}
    assert sorted(places) == ["0", "1", "2", "3"]
    if job["id"].endswith("tp2-dp2"):  # TP groups (0, 1) and (2, 3), DP groups (0, 2), (1, 3)
        assert [places[r]["tp_group"] for r in "0123"] == ["0", "0", "2", "2"]
        assert [places[r]["dp_group"] for r in "0123"] == ["0", "1", "0", "1"]
        assert {places[r]["stage"] for r in "0123"} == {"0"}
    else:  # stages (0, 1) and (2, 3), pipelines (0, 2) and (1, 3)
        assert [places[r]["stage"] for r in "0123"] == ["0", "0", "1", "1"]
        assert [places[r]["pp_group"] for r in "0123"] == ["0", "1", "0", "1"]
