"""The NCCL sidecar on Inspector dumps the tests write (tests/nccl_job.py): following files
through rotation and restarts, alignment under host clock offsets, bounded memory, and
the served metrics."""
from __future__ import annotations

import os
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from obsgen import contract
from obsgen.cli import main
from obsgen.nccl.exporter import Exporter, Options
from obsgen.nccl.follow import Follower
from obsgen.nccl.metrics import Collector

from .nccl_job import InspectorJob

OFFSETS = {"gpu-node-000": 15_000.0, "gpu-node-001": -20_000.0}  # host clocks, microseconds


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def exporter(d: Path, clock=None, **kw) -> Exporter:
    opts = Options(dump_dir=d, state_file=d.parent / f"{d.name}.state", **kw)
    return Exporter(opts, clock=clock) if clock else Exporter(opts)


def per_rank(e: Exporter, field: str) -> dict:
    """A per-(rank, op, group) field of the store (bytes, unrecorded, ...), zeros left out;
    every rank of these jobs stays on its host, so (rank, op, group) names one series, and
    its node is the host the rank's records name."""
    out = {}
    for (rank, op, group, node), s in e.store.ranks.items():
        assert node == e.store.nodes[rank] != "", (rank, node)
        assert (rank, op, group) not in out
        if getattr(s, field):
            out[(rank, op, group)] = getattr(s, field)
    return out


def per_group(e: Exporter, field: str) -> dict:
    """An alignment counter (aligned, last) per (rank, group), zeros left out; every rank
    of these jobs stays on its host, so (rank, group) names one series."""
    out = {}
    for (rank, group, node), a in e.store.alignment.items():
        assert node == e.store.nodes[rank] != "", (rank, group, node)
        if getattr(a, field):
            assert (rank, group) not in out
            out[(rank, group)] = getattr(a, field)
    return out


def counters(e: Exporter) -> dict:
    snap = e.store.snapshot()
    return {"records": snap["records"], "errors": snap["parse_errors"],
            "ranks": sorted(map(repr, snap["ranks"])), "groups": sorted(map(repr, snap["groups"])),
            "alignment": sorted(map(repr, snap["alignment"]))}


# following files ------------------------------------------------------------------------
def lines_of(f: Follower) -> list[bytes]:
    out = []
    while batch := [l for _, l in f.poll()]:
        out += batch
    return out


def test_appended_lines_and_a_line_cut_mid_write_is_retried(tmp_path):
    p = tmp_path / "h-pid1.log"
    p.write_bytes(b'{"a":1}\n{"b":')
    f = Follower(tmp_path)
    assert lines_of(f) == [b'{"a":1}']
    with open(p, "ab") as fh:
        fh.write(b'2}\n{"c":3}\n')
    assert lines_of(f) == [b'{"b":2}', b'{"c":3}']
    assert f.take_cut_lines() == 0


def test_rotation_by_rename_drains_the_old_file_and_reads_the_new_one_from_its_start(tmp_path):
    p = tmp_path / "h-pid1.log"
    p.write_bytes(b"1\n2\n")
    f = Follower(tmp_path)
    assert lines_of(f) == [b"1", b"2"]
    with open(p, "ab") as fh:
        fh.write(b"3\n")
    os.rename(p, tmp_path / "h-pid1.log.1")  # the writer keeps its descriptor...
    with open(tmp_path / "h-pid1.log.1", "ab") as fh:
        fh.write(b"4\n")  # ...and writes on into the renamed file
    p.write_bytes(b"new\n")
    assert sorted(lines_of(f)) == [b"3", b"4", b"new"]
    assert lines_of(f) == []


def test_copytruncate_is_read_from_the_start_skipping_the_hole_and_its_copy_is_ignored(tmp_path):
    p = tmp_path / "h-pid1.log"
    p.write_bytes(b"1\n2\n")
    f = Follower(tmp_path)
    assert lines_of(f) == [b"1", b"2"]
    (tmp_path / "h-pid1.log.1").write_bytes(p.read_bytes())  # the copy: already read
    with open(p, "r+b") as fh:
        fh.truncate(0)
    with open(p, "r+b") as fh:  # a writer without O_APPEND goes on at its old offset
        fh.seek(4)
        fh.write(b"3\n")
    assert lines_of(f) == [b"3"]


def test_a_line_cut_off_by_truncation_is_counted_once(tmp_path):
    p = tmp_path / "h-pid1.log"
    p.write_bytes(b"1\n{\"half")
    f = Follower(tmp_path)
    assert lines_of(f) == [b"1"]
    p.write_bytes(b"")
    assert lines_of(f) == []
    assert f.take_cut_lines() == 1 and f.take_cut_lines() == 0


def test_a_removed_file_is_read_to_its_end_then_closed(tmp_path):
    p = tmp_path / "h-pid1.log"
    p.write_bytes(b"1\n")
    f = Follower(tmp_path)
    assert lines_of(f) == [b"1"]
    with open(p, "ab") as fh:
        fh.write(b"2\n")
    p.unlink()
    assert lines_of(f) == [b"2"] and f.files == {}


def test_only_dump_file_names_start_a_file(tmp_path):
    for name in ("a.log", "b.jsonl", "c.log.1", "d.log.gz", "obsgen-groups-x.json", ".state"):
        (tmp_path / name).write_bytes(f"{name}\n".encode())
    assert sorted(lines_of(Follower(tmp_path))) == [b"a.log", b"b.jsonl"]


def test_restored_offsets_continue_after_the_last_line_and_a_reused_inode_is_read_again(tmp_path):
    p = tmp_path / "h-pid1.log"
    p.write_bytes(b"1\n2\n{\"partial")
    f = Follower(tmp_path)
    assert lines_of(f) == [b"1", b"2"]
    state = f.state()
    f.close()
    with open(p, "ab") as fh:
        fh.write(b"\":3}\n4\n")
    g = Follower(tmp_path)
    g.restore(state)
    assert lines_of(g) == [b'{"partial":3}', b"4"]
    # Another file now under the same identity (inode reuse): its first bytes differ.
    other = [dict(s, fingerprint=b"something else".hex()) for s in state]
    h = Follower(tmp_path)
    h.restore(other)
    assert lines_of(h)[0] == b"1"


# alignment ----------------------------------------------------------------------------
@pytest.fixture
def late_job(tmp_path):
    """8 ranks on 2 nodes, TP=4 (node-local) and DP=2 (across nodes); rank 5 arrives 3 ms
    late at every collective; the two hosts' clocks are 35 ms apart."""
    d = tmp_path / "dump"
    job = InspectorJob(late={5: 3000.0}, clock_offset_us=OFFSETS)
    job.write_group_maps(d)
    return d, job, job.run(d, steps=40)


def test_the_late_rank_is_last_in_every_collective_whatever_the_host_clocks(late_job):
    d, job, truth = late_job
    e = exporter(d)
    e.drain()
    last = per_group(e, "last")
    assert last[("5", "tp")] == last[("5", "dp")] == 40
    assert per_group(e, "aligned") == truth.aligned
    # The fixture's offsets are large enough to matter: ordering by host start
    # timestamps would blame the other host's rank for every DP collective of rank 5.
    assert truth.naive_last.get(("5", "AllReduce", "dp"), 0) == 0
    assert truth.naive_last[("1", "AllReduce", "dp")] == 40
    # Every last arrival the exporter names is the true one (near-ties name nobody).
    for key, n in last.items():
        assert n <= truth.last.get(key, 0), key


def tp_bucket(le: float) -> int:
    """Index of the first histogram bucket above ``le``."""
    return contract.NCCL_SECONDS_BUCKETS.index(le) + 1


def test_skew_and_tail_measure_the_wait_and_the_transfer(late_job):
    d, job, truth = late_job
    e = exporter(d)
    e.drain()
    tp = e.store.groups[("AllReduce", "tp")]
    n = sum(tp.tail.counts)
    assert n == 80  # 2 TP communicators x 40 collectives
    tail_mean = tp.tail.sum / n
    assert job.service_us * 1e-6 <= tail_mean <= (job.service_us + job.completion_jitter_us + 1) * 1e-6
    # Each measured skew is the true one within the completion jitter and the 1 us
    # truncation of kernel times; node 1's TP group waits ~3 ms for rank 5.
    true = truth.skews_us["tp"]
    slack = (job.completion_jitter_us + 1) * 1e-6
    assert abs(tp.skew.sum / n - sum(true) / len(true) * 1e-6) <= slack
    assert sum(tp.skew.counts[tp_bucket(0.0025):]) == 40  # node 1's collectives: > 2.5 ms


def test_bytes_records_and_groups_from_the_group_maps(late_job):
    d, job, truth = late_job
    e = exporter(d)
    assert e.drain() == truth.records == 8 * 2 * 40
    assert e.store.job_id == "llm-pretrain-a"
    assert per_rank(e, "bytes") == truth.bytes
    tp_bus = per_rank(e, "bus_bytes")[("0", "AllReduce", "tp")]
    assert tp_bus == pytest.approx(40 * job.size * 2 * 3 / 4)
    assert e.store.parse_errors == 0 and per_rank(e, "unrecorded") == {}


def test_ranks_arriving_within_the_resolution_name_no_last_arrival(tmp_path):
    job = InspectorJob(noise_us=10.0, completion_jitter_us=2.0)
    job.write_group_maps(tmp_path)
    truth = job.run(tmp_path, steps=30)
    e = exporter(tmp_path)
    e.drain()
    assert per_group(e, "aligned") == truth.aligned and per_group(e, "last") == {}


def test_host_side_timing_is_counted_but_not_aligned(tmp_path):
    job = InspectorJob(late={5: 3000.0}, timing="collective_cpu")
    job.write_group_maps(tmp_path)
    truth = job.run(tmp_path, steps=10)
    e = exporter(tmp_path)
    assert e.drain() == truth.records
    assert per_group(e, "aligned") == {} and e.store.groups == {}


def test_unrecorded_collectives_are_counted_from_sequence_gaps_and_never_aligned(tmp_path):
    clock = Clock()
    job = InspectorJob(late={5: 3000.0}, skip={5: {3, 4, 7}})
    job.write_group_maps(tmp_path)
    truth = job.run(tmp_path, steps=20)
    e = exporter(tmp_path, clock=clock)
    e.drain()
    assert per_rank(e, "unrecorded") == truth.unrecorded == {
        ("5", "AllReduce", "tp"): 3, ("5", "AllReduce", "dp"): 3}
    assert per_group(e, "aligned")[("5", "tp")] == 17
    assert e.store.pending == 6  # the other ranks' records of those collectives wait...
    clock.t += 61
    e.step()
    assert e.store.pending == 0  # ...until the alignment timeout
    assert e.store.incomplete == {"tp": 3, "dp": 3}


def test_alignment_memory_is_bounded_when_a_rank_never_writes(tmp_path):
    clock = Clock()
    job = InspectorJob(late={5: 3000.0}, skip={2: set(range(5, 400))})  # rank 2 stops at 5
    job.write_group_maps(tmp_path)
    job.run(tmp_path, steps=400)
    e = exporter(tmp_path, clock=clock, max_pending=300)
    e.drain()
    assert e.aligner.held <= 300
    assert sum(e.store.incomplete.values()) > 0
    clock.t += 61
    e.step()
    assert e.aligner.held == 0 and len(e.aligner.pending) == 0


def test_a_communicator_with_ranks_on_an_invisible_node_stops_being_held(tmp_path):
    clock = Clock()
    job = InspectorJob()
    job.write_group_maps(tmp_path)
    job.run(tmp_path, steps=5)
    for p in tmp_path.glob("gpu-node-001-*.log"):
        p.unlink()  # a per-node exporter on node 0 never sees node 1's files
    e = exporter(tmp_path, clock=clock)
    e.drain()
    assert e.store.pending == 4 * 5  # DP collectives held while node 1 may yet appear
    clock.t += 61
    e.step()
    job.run(tmp_path, steps=50, start_step=5)
    for p in tmp_path.glob("gpu-node-001-*.log"):
        p.unlink()
    e.drain()
    assert e.store.pending == 0  # no longer held once the timeout showed they never join
    assert per_group(e, "aligned")[("0", "tp")] == 55  # node-local TP still aligns


# restarts -----------------------------------------------------------------------------
def test_a_restarted_exporter_neither_loses_nor_double_counts(tmp_path):
    d = tmp_path / "dump"
    job = InspectorJob(late={5: 3000.0}, clock_offset_us=OFFSETS)
    job.write_group_maps(d)
    job.run(d, steps=15)
    first = exporter(d)
    first.drain()
    first.close()  # saves offsets and counters
    job.run(d, steps=10, start_step=15)
    crashed = exporter(d)
    crashed.drain()  # counts steps 15..24 but dies before saving them
    job.run(d, steps=15, start_step=25)
    with open(next(d.glob("gpu-node-000-*.log")), "a") as fh:
        fh.write('{"header":{"id":"0x1","rank":0')  # a record being written right now
    resumed = exporter(d)
    resumed.drain()
    fresh_dir = tmp_path / "fresh"
    fresh_dir.mkdir()
    for p in d.iterdir():
        if not p.name.startswith("."):
            (fresh_dir / p.name).write_bytes(p.read_bytes())
    fresh = Exporter(Options(dump_dir=fresh_dir, state_file=tmp_path / "fresh.state"))
    fresh.drain()
    assert resumed.store.records == fresh.store.records == 8 * 2 * 40
    assert per_rank(resumed, "bytes") == per_rank(fresh, "bytes")
    assert per_rank(resumed, "unrecorded") == {}  # sequence numbers survived the restart
    # Alignment continues too; only collectives half-joined at the crash can be missing.
    assert per_group(resumed, "last") == per_group(fresh, "last")


def test_a_state_file_from_before_the_node_label_restores_the_job_counters_only(late_job):
    """State files of the exporters that keyed the per-rank series by (rank, op, group),
    with the alignment counters in those rows (per op) or beside them: the node label makes
    every per-rank series new to Prometheus, so they start from zero, as after a reset;
    the job's own counters carry over."""
    d, job, truth = late_job
    e = exporter(d)
    e.drain()
    snap = e.store.snapshot()
    aligned = {(r, g): (al, last) for (r, g, node), al, last in snap.pop("alignment")}
    without_node = [[k[:3], *rest] for k, *rest in snap["ranks"]]
    per_op = [[k, *rest[:-1], *aligned.get((k[0], k[2]), (0, 0)), rest[-1]]
              for k, *rest in without_node]
    for rows, alignment in ((without_node, [[[r, g, "gpu-node-000"], 1, 1] for r, g in aligned]),
                            (per_op, [])):
        old = Exporter(Options(dump_dir=d, state_file=d.parent / "old.state", job_id=e.store.job_id))
        old.store.restore({**snap, "ranks": rows, "alignment": alignment})
        assert old.store.records == e.store.records > 0
        assert old.store.ranks == {} and per_rank(e, "bytes") != {}
        assert len(old.store.alignment) == len(alignment)


def test_a_state_file_with_other_buckets_restores_nothing(late_job):
    """Counts per bucket mean nothing under other bounds: the whole state is ignored, and
    every counter starts from zero as after a reset."""
    d, job, truth = late_job
    e = exporter(d)
    e.drain()
    snap = e.store.snapshot()
    rows = [[k, dc[:-1], *rest] for k, dc, *rest in snap["ranks"]]  # one bucket fewer
    other = Exporter(Options(dump_dir=d, state_file=d.parent / "other.state", job_id=e.store.job_id))
    other.store.restore({**snap, "ranks": rows})
    assert other.store.records == 0 and other.store.ranks == {} and per_rank(e, "bytes") != {}


def test_state_of_another_job_is_not_restored(tmp_path):
    job = InspectorJob()
    job.write_group_maps(tmp_path)
    job.run(tmp_path, steps=3)
    e = exporter(tmp_path, job_id="job-a")
    e.drain()
    e.close()
    other = exporter(tmp_path, job_id="job-b")
    assert other.store.records == 0
    assert other.drain() == e.store.records  # its offsets were not taken either


# exposition ---------------------------------------------------------------------------
def scrape(e: Exporter) -> dict:
    reg = CollectorRegistry()
    reg.register(Collector(e.store))
    return {f.name: f for f in text_string_to_metric_families(generate_latest(reg).decode())}


def test_served_series_are_the_contract(late_job):
    d, job, truth = late_job
    e = exporter(d)
    e.drain()
    e.step()
    fams = scrape(e)
    served = [m for m in contract.METRICS.values() if m.emitter == contract.NCCL_EXPORTER]
    served += [contract.M.nccl_collective_duration_seconds, contract.M.nccl_collective_bytes_total]
    for m in served:
        name = m.key.removesuffix("_total") if m.type == contract.COUNTER else m.key
        assert name in fams, m.key
        for s in fams[name].samples:
            assert set(s.labels) - {"le"} == set(m.labels), (m.key, s.labels)
    dur = {s.labels["le"]: s.value for s in fams["nccl_collective_duration_seconds"].samples
           if s.name.endswith("_bucket") and s.labels["rank"] == "5" and s.labels["group"] == "tp"}
    assert list(dur)[0] == "1e-05" and dur["+Inf"] == 40
    size = {(s.labels["rank"], s.labels["group"]): (s.value, s.labels["node"])
            for s in fams["nccl_communicator_ranks"].samples}
    assert size[("5", "tp")] == (4, "gpu-node-001") and size[("5", "dp")] == (2, "gpu-node-001")


def test_the_cli_once_prints_the_metrics_and_a_missing_dump_dir_exits_2(late_job, capsys,
                                                                       monkeypatch):
    d, job, truth = late_job
    assert main(["nccl-exporter", "--once", "--dump-dir", str(d), "--state-file",
                 str(d.parent / "cli.state")]) == 0
    out = capsys.readouterr().out
    assert ('nccl_collective_last_arrival_total{group="tp",job_id="llm-pretrain-a",'
            'node="gpu-node-001",rank="5"} 40.0') in out
    monkeypatch.delenv("NCCL_INSPECTOR_DUMP_DIR", raising=False)
    assert main(["nccl-exporter", "--once"]) == 2
    assert "--dump-dir" in capsys.readouterr().err


def test_metrics_are_served_over_http(late_job):
    d, job, truth = late_job
    e = exporter(d)
    reg = CollectorRegistry()
    reg.register(Collector(e.store))
    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    try:
        worker = threading.Thread(target=e.drain)
        worker.start()
        worker.join()
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
    assert f"obsgen_nccl_records_total{{job_id=\"llm-pretrain-a\"}} {float(truth.records)}" in body
