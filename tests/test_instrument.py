"""obsgen.instrument without torch: the contract's series, compute semantics, endpoints."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from obsgen import contract
from obsgen.contract import M
from obsgen.instrument import Telemetry
from obsgen.instrument.clock import union_within
from obsgen.instrument.metrics import EMITTERS

ROOT = Path(__file__).resolve().parent.parent


class ManualClock:
    """A clock the test moves by hand, so compute boundaries are exact."""
    name = "manual"

    def __init__(self):
        self.now = 0.0

    def mark(self):
        return self.now

    def measure(self, pairs, observe):
        observe(sum(b - a for a, b in pairs))

    def measure_within(self, windows, observe):
        observe(sum(union_within(lo, hi, iv) for lo, hi, iv in windows))

    def poll(self):
        pass


def scrape(tel: Telemetry) -> dict[tuple, float]:
    text = urllib.request.urlopen(f"http://{tel.endpoint.address}/metrics", timeout=5).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples, name, **labels):
    hits = [v for (n, ls), v in samples.items()
            if n == name and all(dict(ls).get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


@pytest.fixture
def tel():
    t = Telemetry("job-t", rank=3, world_size=8, local_rank=3, stage=1, pp=2, microbatches=4,
                  planned_steps=100, node="host-a", start_time=1_700_000_000.0, port_base=0,
                  checkpoint_bytes=True,
                  addr="127.0.0.1", clock=ManualClock()).start()
    yield t
    t.close()


def test_every_instrument_metric_exists_from_start_with_the_contract_labels(tel):
    samples = scrape(tel)
    names = {n for n, _ in samples}
    # series that exist once the loop reports them; link recoveries only NCCL itself knows
    reported_later = (M.train_grad_norm, M.train_loss, M.train_nonfinite, M.train_planned_end_timestamp_seconds,
                      M.train_rank_gpu_info, M.moe_expert_tokens_total, M.nccl_link_recovery_total,
                      M.job_recovery_seconds, M.job_checkpoint_age_at_failure_seconds,
                      M.train_rank_mesh_info)
    for m in contract.METRICS.values():
        if m.emitter not in EMITTERS or m in reported_later:
            continue
        base = [m.key + s for s in ("_count", "_sum")] if m.type == contract.HISTOGRAM else [m.key]
        assert set(base) <= names, m.key
        for (n, labels) in samples:
            if n in base:
                assert {k for k, _ in labels} == set(m.labels) | {"node"}, (n, labels)
    assert value(samples, "train_step_seconds_count", rank="3", stage="1", node="host-a") == 0
    assert value(samples, "train_checkpoint_total", job_id="job-t") == 0
    assert value(samples, "nccl_collective_bytes_total", op="AllReduce", group="dp") == 0
    assert value(samples, "train_checkpoint_timestamp_seconds") == 1_700_000_000.0
    assert value(samples, "train_world_size") == 8
    assert value(samples, "train_pipeline_stages") == 2
    assert value(samples, "pipeline_stage_seconds_count", phase="backward") == 0
    assert not any(n.endswith("_created") for n in names)


def test_grad_norm_and_loss_appear_only_once_reported_and_keep_nan(tel):
    assert not any(n == "train_grad_norm" for n, _ in scrape(tel))
    tel.grad_norm(float("nan"))
    tel.loss(2.5)
    samples = scrape(tel)
    assert math.isnan(value(samples, "train_grad_norm"))
    assert value(samples, "train_loss") == 2.5


def test_nonfinite_flags_each_signal_and_clears_on_a_finite_value(tel):
    assert not any(n == "train_nonfinite" for n, _ in scrape(tel))
    tel.grad_norm(float("nan"))
    tel.loss(float("inf"))
    samples = scrape(tel)
    assert value(samples, "train_nonfinite", signal="grad_norm") == 1
    assert value(samples, "train_nonfinite", signal="loss") == 1
    tel.grad_norm(3.0)
    samples = scrape(tel)
    assert value(samples, "train_nonfinite", signal="grad_norm") == 0
    assert value(samples, "train_nonfinite", signal="loss") == 1


# events in the compute block -> (compute, exposed communication, wait inside compute)
COMPUTE_CASES = {
    "compute ends when the block exits without a collective": ([("work", 5)], (5, 0, 0)),
    "compute ends at the first blocking dp collective, not after it": (
        [("work", 4), ("coll dp", 7), ("work", 1)], (4, 8, 0)),
    "a tp collective inside compute is part of compute, and the compute's wait": (
        [("work", 2), ("coll tp", 3)], (5, 0, 3)),
    "compute ends at the last gradient-ready mark (DDP buckets)": (
        [("work", 2), ("ready", 0), ("work", 3), ("ready", 0), ("work", 6)], (5, 6, 0)),
    "tp, cp and ep collectives inside compute add up to its wait": (
        [("work", 1), ("coll tp", 2), ("work", 1), ("coll cp", 1), ("coll ep", 0.5), ("work", 1)],
        (6.5, 0, 3.5)),
    "a pipeline send and recv in flight together are waited once (their union)": (
        [("work", 2), ("start pp send", 0), ("start pp recv", 0), ("work", 1), ("end send", 0),
         ("work", 2), ("end recv", 0), ("work", 1)], (6, 0, 3)),
    "a tp collective after the blocking dp collective is not the compute's wait": (
        [("work", 3), ("coll dp", 2), ("coll tp", 4)], (3, 6, 0)),
    "an asynchronous dp all-reduce (a DDP bucket) is not wait": (
        [("work", 2), ("start dp bucket", 0), ("work", 3), ("end bucket", 0)], (2, 3, 0)),
}


@pytest.mark.parametrize("events,expected", list(COMPUTE_CASES.values()), ids=list(COMPUTE_CASES))
def test_compute_boundary_exposed_communication_and_wait(tel, events, expected):
    clock = tel.clock
    started = {}
    with tel.step():
        with tel.compute():
            for kind, dt in events:
                if kind == "work":
                    clock.now += dt
                elif kind == "ready":
                    tel.gradient_ready()
                elif kind.startswith("start"):
                    _, group, name = kind.split()
                    started[name] = (group, tel.collective_started("Recv", group))
                elif kind.startswith("end"):
                    group, start = started.pop(kind.split()[1])
                    tel.record_collective("Recv", group, 10, start, clock.mark())
                else:
                    with tel.collective("AllReduce", kind.split()[1], 100):
                        clock.now += dt
    samples = scrape(tel)
    assert value(samples, "train_compute_seconds_sum") == expected[0]
    assert value(samples, "train_compute_seconds_count") == 1
    assert value(samples, "train_exposed_comm_seconds_sum") == expected[1]
    assert value(samples, "train_compute_wait_seconds_sum") == expected[2]
    assert value(samples, "train_compute_wait_seconds_count") == 1


def test_union_within_clips_and_merges():
    assert union_within(0, 10, []) == 0
    assert union_within(0, 10, [(2, 4), (3, 6), (8, 12), (-3, 1)]) == 1 + 4 + 2
    assert union_within(5, 6, [(0, 100)]) == 1
    assert union_within(0, 3, [(5, 9), (1, 2)]) == 1  # one after the window counts nothing


def test_the_mesh_place_is_one_info_series_and_sets_the_stage(tmp_path):
    from obsgen.mesh import Mesh
    place = Mesh(tp=2, pp=2, dp=2).place(5)  # tp 1, dp 0, stage 1
    t = Telemetry("job-m", rank=5, world_size=8, port_base=0, addr="127.0.0.1", mesh=place,
                  clock=ManualClock()).start()
    try:
        s = scrape(t)
        info = [ls for (n, ls), v in s.items() if n == "train_rank_mesh_info" and v == 1]
        assert [dict(ls) for ls in info] == [{
            "job_id": "job-m", "rank": "5", "node": t.node, "stage": "1", "tp_rank": "1",
            "cp_rank": "0", "ep_rank": "0", "dp_rank": "0", "tp_group": "4", "cp_group": "5",
            "ep_group": "5", "dp_group": "5", "pp_group": "1"}]
        assert value(s, "train_compute_seconds_count", stage="1") == 0
        t.mesh(place)  # the same place again is fine
        with pytest.raises(ValueError, match="already"):
            t.mesh(Mesh(tp=2, pp=2, dp=2).place(4))
    finally:
        t.close()
    late = Telemetry("job-m", rank=5, world_size=8, port_base=0, addr="127.0.0.1",
                     clock=ManualClock()).start()
    try:
        with pytest.raises(ValueError, match="pass the mesh before start"):
            late.mesh(place)
    finally:
        late.close()


def test_step_stage_collective_and_checkpoint_are_counted(tel):
    clock = tel.clock
    for _ in range(2):
        with tel.step():
            for _ in range(4):  # microbatches
                with tel.phase("forward"):
                    clock.now += 1
                with tel.phase("backward"):
                    clock.now += 2
            with tel.collective("AllGather", "tp", 1000):
                clock.now += 0.5
    with tel.checkpoint(nbytes=5_000_000):
        pass
    with pytest.raises(OSError):
        with tel.checkpoint(nbytes=7):
            raise OSError("disk full")
    s = scrape(tel)
    assert value(s, "train_current_step") == 2
    assert value(s, "train_step_seconds_count") == 2
    # busy time is summed per step: one observation per step and phase
    assert value(s, "pipeline_stage_seconds_count", phase="forward") == 2
    assert value(s, "pipeline_stage_seconds_sum", phase="forward") == 8
    assert value(s, "pipeline_stage_seconds_sum", phase="backward") == 16
    assert value(s, "nccl_collective_bytes_total", op="AllGather", group="tp") == 2000
    assert value(s, "nccl_collective_duration_seconds_sum", op="AllGather", group="tp") == 1.0
    assert value(s, "train_checkpoint_total") == 1  # the failed save is not a checkpoint
    assert value(s, "checkpoint_bytes_written_total") == 5_000_000
    assert value(s, "train_checkpoint_timestamp_seconds") > 1_700_000_000.0


def test_experts_gpu_and_planned_end(tel):
    tel.expert_tokens(3, 1000)
    tel.expert_tokens(3, 24)
    tel.gpu_info("GPU-5e1d")
    s = scrape(tel)
    assert value(s, "moe_expert_tokens_total", expert="3") == 1024
    assert value(s, "train_rank_gpu_info", UUID="GPU-5e1d", node="host-a", rank="3") == 1
    t = Telemetry("job-e", planned_end=1_900_000_000.0, resumed_from=1_600_000_000.0,
                  port_base=0, addr="127.0.0.1").start()
    try:
        assert value(scrape(t), "train_planned_end_timestamp_seconds") == 1_900_000_000.0
        # a restarted job's checkpoint age runs from the checkpoint it resumed from
        assert value(scrape(t), "train_checkpoint_timestamp_seconds") == 1_600_000_000.0
    finally:
        t.close()


def test_gpu_info_names_the_process_host_and_cuda_device_the_nccl_inspector_writes(tel):
    import socket
    tel.gpu_info("GPU-5e1d", cuda_device=3)
    s = scrape(tel)
    assert value(s, "train_rank_gpu_info", UUID="GPU-5e1d", process_host=socket.gethostname(),
                 cuda_device="GPU3") == 1


def test_link_recoveries_are_counted_from_zero(tel):
    s = scrape(tel)
    assert value(s, "nccl_link_recovery_total") == 0  # exists from start()
    tel.link_recovered()
    tel.link_recovered(2)
    assert value(scrape(tel), "nccl_link_recovery_total") == 3


def test_after_a_restart_rank_0_reports_recovery_time_and_lost_work():
    now = time.time()
    t = Telemetry("job-r", failed_at=now - 120, resumed_from=now - 1000, port_base=0,
                  addr="127.0.0.1").start()
    try:
        assert not any(n == "job_recovery_seconds" for n, _ in scrape(t))
        with t.step():
            pass
        s = scrape(t)
        assert 120 <= value(s, "job_recovery_seconds") < 130
        assert value(s, "job_checkpoint_age_at_failure_seconds") == pytest.approx(880)
    finally:
        t.close()


def test_a_failed_step_is_not_counted(tel):
    with pytest.raises(RuntimeError):
        with tel.step():
            raise RuntimeError("oom")
    assert value(scrape(tel), "train_step_seconds_count") == 0


def test_from_env_reads_torchrun_and_obsgen_variables(monkeypatch, tmp_path):
    for k, v in {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
                 "TORCHELASTIC_RESTART_COUNT": "2", "OBSGEN_JOB_ID": "job-env",
                 "OBSGEN_PORT_BASE": "0", "OBSGEN_SD_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(k, v)
    t = Telemetry.from_env(addr="127.0.0.1")
    assert (t.job_id, t.rank, t.local_rank, t.world_size, t.run_id) == ("job-env", 5, 1, 8, 2)
    t.start()
    try:
        sd = json.loads((tmp_path / "job-env-5.json").read_text())
        assert sd == [{"targets": [t.endpoint.address]}]
        assert value(scrape(t), "train_run_id") == 2
    finally:
        t.close()
    assert not (tmp_path / "job-env-5.json").exists()


def test_port_is_base_plus_local_rank(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
    t = Telemetry("job-p", rank=2, world_size=4, local_rank=2, port_base=base - 2,
                  addr="127.0.0.1").start()
    try:
        assert t.endpoint.port == base
    finally:
        t.close()


def test_bad_rank_is_refused():
    with pytest.raises(ValueError, match="outside"):
        Telemetry("job", rank=4, world_size=4)


def test_importing_and_using_the_core_never_imports_torch():
    code = textwrap.dedent("""
        import sys
        from obsgen.instrument import Telemetry
        t = Telemetry("j", port_base=0, addr="127.0.0.1").start()
        with t.step():
            with t.compute():
                pass
        t.close()
        print("torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


RANK_PROC = textwrap.dedent("""
    import sys, time
    from obsgen.instrument import Telemetry
    rank, d, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    t = Telemetry("job-mp", rank=rank, world_size=2, local_rank=rank, multiprocess_dir=d,
                  port_base=port, addr="127.0.0.1").start()
    with t.step():
        pass
    t.grad_norm(1.5 + rank)
    print(t.endpoint.address if t.endpoint else "-", flush=True)
    sys.stdin.readline()  # wait until the test has scraped
    t.close()
""")


def test_multiprocess_dir_serves_every_local_rank_from_local_rank_0(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    procs = [subprocess.Popen([sys.executable, "-c", RANK_PROC, str(r), str(tmp_path / "mp"), "0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for r in (0, 1)]
    try:
        addresses = [p.stdout.readline().strip() for p in procs]
        assert addresses[1] == "-"  # local rank 1 writes, rank 0 serves
        procs[1].stdin.write("\n")
        procs[1].stdin.flush()
        procs[1].wait(10)
        text = urllib.request.urlopen(f"http://{addresses[0]}/metrics", timeout=5).read().decode()
        steps = {s.labels["rank"]: s.value for f in text_string_to_metric_families(text)
                 for s in f.samples if s.name == "train_step_seconds_count"}
        norms = {s.labels["rank"]: s.value for f in text_string_to_metric_families(text)
                 for s in f.samples if s.name == "train_grad_norm"}
        assert steps == {"0": 1.0, "1": 1.0}  # the exited rank's counters stay
        assert norms == {"0": 1.5}  # its gauges go with it (live mode)
    finally:
        for p in procs:
            if p.poll() is None:
                p.stdin.write("\n")
                p.stdin.flush()
                p.wait(10)


def test_steps_tile_the_timeline_but_checkpoints_are_not_training_time(tel):
    with tel.step():
        pass
    time.sleep(0.05)  # data loading between steps belongs to the next step
    with tel.step():
        pass
    with tel.checkpoint():
        time.sleep(0.2)
    with tel.step():
        pass
    s = scrape(tel)
    assert 0.05 <= value(s, "train_step_seconds_sum") < 0.15
    assert value(s, "train_step_seconds_count") == 3
