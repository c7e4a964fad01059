"""The sidecar on dumps as NCCL 2.28/2.29 and 2.30 write them (tests/inspector_writer.py):
a TP=2 x PP=2 job on two hosts, its pipeline Send/Recv, its communicators' names, the
ring of 2.30 and the one-collective-per-dump of 2.28."""
from __future__ import annotations

from pathlib import Path

from obsgen.nccl.exporter import Exporter, Options
from obsgen.nccl.groups import write_group_map
from obsgen.nccl.metrics import MAX_PEERS, OTHER

from . import inspector_writer as w

# 4 ranks, 2 per host: TP groups [0,1] [2,3] (stage 0 on host a, stage 1 on host b), PP
# groups [0,2] [1,3]. Communicator hashes are 16 digits; the Inspector writes 14.
HOST = {0: "host-a", 1: "host-a", 2: "host-b", 3: "host-b"}
PID = {r: 4000 + r for r in range(4)}
TP = {0: (0x7f0a01000000002a, (0, 1)), 2: (0x7f0a02000000002b, (2, 3))}
PP = {0: (0x7f0b01000000002c, (0, 2)), 1: (0x7f0b02000000002d, (1, 3))}
WORLD = (0x7f0c01000000002e, (0, 1, 2, 3))
NAMES = {"tp": "TENSOR_MODEL_PARALLEL_GROUP", "pp": "PIPELINE_MODEL_PARALLEL_GROUP",
         "world": "default_pg"}


def comms_of(rank: int):
    tp = TP[rank - rank % 2]
    pp = PP[rank % 2]
    return {"world": WORLD, "tp": tp, "pp": pp}  # the world first, as its barrier is


def write_job(d: Path, version: str, steps: int, *, drop_every: int = 0) -> dict:
    """Each rank per step: a TP AllReduce, a world AllReduce, and (2.30) its pipeline
    Send (stage 0) or Recv (stage 1) with its peer. 2.30 dumps every operation, except
    that every ``drop_every``-th Send/Recv is lost (ring overflow); 2.28 dumps one
    collective per communicator per step, the TP AllReduce of odd steps never written.
    Returns the truth."""
    d.mkdir(parents=True, exist_ok=True)
    truth = {"p2p": 0, "p2p_dropped": 0, "coll_dropped": 0, "records": 0}
    for rank in range(4):
        lines = []
        p2p_sn = 0
        for step in range(steps):
            for kind, (h, members) in comms_of(rank).items():
                if version != w.V230 and kind == "tp" and step % 2:
                    truth["coll_dropped"] += 1
                    continue
                lines.append(w.coll_line(
                    version, cid=w.comm_id(h), rank=members.index(rank), n_ranks=len(members),
                    nnodes=len({HOST[m] for m in members}), hostname=HOST[rank], pid=PID[rank],
                    sn=step + 1, exec_us=300, comm_name=NAMES[kind] + ":%d" % (h >> 40 & 0xff),
                    verbose=step == 0))
            if version == w.V230:
                h, members = comms_of(rank)["pp"]
                me = members.index(rank)
                # two microbatches per step; per microbatch stage 0 sends the activation
                # and receives its gradient, stage 1 the other way round
                ops = ("Send", "Recv") if me == 0 else ("Recv", "Send")
                for op in ops * 2:
                    p2p_sn += 1
                    if drop_every and p2p_sn % drop_every == 0:
                        truth["p2p_dropped"] += 1
                        continue
                    lines.append(w.p2p_line(
                        cid=w.comm_id(h), rank=me, n_ranks=2, peer=1 - me, nnodes=2,
                        hostname=HOST[rank], pid=PID[rank], op=op,
                        sn=p2p_sn, size=16 << 20, exec_us=900,
                        comm_name=NAMES["pp"] + ":%d" % (h >> 40 & 0xff)))
                    truth["p2p"] += 1
        truth["records"] += len(lines)
        (d / f"{HOST[rank]}-pid{PID[rank]}.log").write_text("\n".join(lines) + "\n")
    return truth


def run(d: Path, **kw) -> Exporter:
    e = Exporter(Options(dump_dir=d, state_file=d.parent / (d.name + ".state"), **kw))
    e.drain()
    return e


def series(e: Exporter) -> dict:
    return {(rank, op, group): s for (rank, op, group, _), s in e.store.ranks.items()}


def test_2_30_names_the_groups_from_the_communicators_names_without_a_group_map(tmp_path):
    truth = write_job(tmp_path / "d", w.V230, steps=10)
    e = run(tmp_path / "d", world_size=4)
    assert e.store.parse_errors == 0 and e.store.records == truth["records"]
    groups = {g for _, _, g in series(e)}
    assert groups == {"tp", "pp", "world"}
    assert series(e)[("1", "AllReduce", "tp")].duration.counts[-1] == 0  # 300 us, in range
    assert sum(series(e)[("1", "AllReduce", "tp")].duration.counts) == 10


def write_maps(d: Path, comm_ids: bool) -> None:
    for rank in range(4):
        write_group_map(d, rank=rank, world_size=4, hostname=HOST[rank], pid=PID[rank],
                        groups={k: {"ranks": list(m), "comm_id": "0x%x" % h if comm_ids else None}
                                for k, (h, m) in comms_of(rank).items()})


def test_2_30_send_and_recv_feed_the_pipeline_series_per_peer(tmp_path):
    """The peer's global rank comes from the group map (its members in comm-rank order):
    a pipeline peer usually runs on another host, whose records this sidecar never sees."""
    write_job(tmp_path / "d", w.V230, steps=10)
    write_maps(tmp_path / "d", comm_ids=False)  # matched by membership, not by id
    e = run(tmp_path / "d")
    s = series(e)
    assert sum(s[("0", "Send", "pp")].duration.counts) == 20  # the PP panel's series
    assert s[("2", "Recv", "pp")].bytes == 20 * (16 << 20)
    assert sum(s[("0", "Recv", "pp")].duration.counts) == 20
    peers = {(rank, op, peer): (p.transfers, round(p.seconds, 6), p.bytes)
             for (rank, op, group, peer, node), p in e.store.peers.items()}
    # the peer's global rank: rank 0's pipeline peer is 2, rank 3's is 1
    assert peers[("0", "Send", "2")] == (20, 20 * 900e-6, 20 * (16 << 20))
    assert peers[("3", "Recv", "1")] == (20, 20 * 900e-6, 20 * (16 << 20))
    assert {k[2] for k in peers} == {"0", "1", "2", "3"}


def test_2_30_without_a_group_map_a_peer_on_an_unseen_host_is_unknown(tmp_path):
    d = tmp_path / "d"
    truth = write_job(d, w.V230, steps=10)
    for p in d.glob("host-b-*.log"):  # host b runs its own sidecar
        p.unlink()
    e = run(d, world_size=4)
    peers = {(rank, op, peer): p.transfers for (rank, op, _, peer, _), p in e.store.peers.items()}
    assert peers == {(r, op, "unknown"): 20 for r in "01" for op in ("Send", "Recv")}
    assert truth["p2p"] == 160


def test_2_30_a_lost_send_is_one_unrecorded_and_interleaved_directions_are_not_gaps(tmp_path):
    truth = write_job(tmp_path / "d", w.V230, steps=10, drop_every=7)
    e = run(tmp_path / "d", world_size=4)
    unrecorded = sum(s.unrecorded for s in e.store.ranks.values())
    assert truth["p2p_dropped"] > 0 and unrecorded == truth["p2p_dropped"]


def test_2_28_one_collective_per_dump_counts_the_rest_as_unrecorded(tmp_path):
    d = tmp_path / "d"
    truth = write_job(d, w.V228, steps=10)
    write_maps(d, comm_ids=True)  # 2.28 writes no names: a group map names the communicators
    e = run(d)
    assert e.store.parse_errors == 0 and e.store.records == truth["records"]
    assert {g for _, _, g in series(e)} == {"tp", "pp", "world"}  # full 16-digit ids matched
    unrecorded = {k: s.unrecorded for k, s in series(e).items() if s.unrecorded}
    # odd steps' TP AllReduce missing: steps 2, 4, 6, 8 (1-based 2..9) show 4 gaps per rank
    assert unrecorded == {(str(r), "AllReduce", "tp"): 4 for r in range(4)}
    assert e.store.peers == {}


def test_the_peers_of_a_rank_are_bounded(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    n = MAX_PEERS + 4  # an all-to-all NCCL runs as grouped Send/Recv over n ranks
    lines = [w.p2p_line(cid="0xe1", rank=0, n_ranks=n, peer=p, sn=p + 1, hostname="h", pid=1,
                        comm_name="EXPERT_MODEL_PARALLEL_GROUP:4") for p in range(1, n)]
    (d / "h-pid1.log").write_text("\n".join(lines) + "\n")
    write_group_map(d, rank=0, world_size=n, hostname="h", pid=1,
                    groups={"ep": {"ranks": list(range(n)), "comm_id": "0xe1"}})
    e = run(d)
    peers = {peer: p.transfers for (_, _, group, peer, _), p in e.store.peers.items()}
    assert len(peers) == MAX_PEERS + 1 and peers[OTHER] == n - 1 - MAX_PEERS
    assert sum(peers.values()) == n - 1


def test_peer_series_survive_a_restart(tmp_path):
    d = tmp_path / "d"
    write_job(d, w.V230, steps=4)
    e = run(d, world_size=4)
    e.close()
    again = Exporter(Options(dump_dir=d, state_file=d.parent / (d.name + ".state"), world_size=4))
    assert {k: (p.transfers, p.bytes) for k, p in again.store.peers.items()} == \
        {k: (p.transfers, p.bytes) for k, p in e.store.peers.items()}
    assert again.drain() == 0
