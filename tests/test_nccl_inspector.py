"""The Inspector record parser and the group map: strict, one reason per bad input."""
from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsgen.nccl import groups
from obsgen.nccl.inspector import Malformed, bus_bytes, dumps, parse, parse_json

from . import inspector_writer as w

HEADER = {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1}
META = {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism":
        "nccl_profiler_interface", "dump_timestamp_us": 1748030377748202,
        "hostname": "gpu-node-000", "pid": 1639453}
PERF = {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
        "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
        "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099}


def line(header=None, meta=None, perf=None, **perf_changes) -> str:
    p = {**PERF, **(perf or {}), **perf_changes}
    return dumps({**HEADER, **(header or {})}, {**META, **(meta or {})},
                 {k: v for k, v in p.items() if v is not DROP})


DROP = object()


def test_a_record_as_the_readme_shows_it():
    r = parse(line().encode())
    assert (r.comm, r.comm_rank, r.n_ranks, r.nnodes, r.hostname, r.pid) == (
        "0x7f8c496ae9f661", 2, 8, 1, "gpu-node-000", 1639453)
    assert (r.op, r.sn, r.size, r.exec_us, r.timing, r.busbw) == (
        "AllReduce", 1407, 17179869184, 61974.0, "kernel_gpu", 485.119099)


def test_verbose_record_with_event_traces_parses_the_same():
    verbose = line(event_trace_sn={"coll_start_sn": 1, "coll_stop_sn": 2, "kernel_events": []},
                   event_trace_ts={"coll_start_ts": 1752867229235059, "coll_stop_ts": 1752867229235064,
                                   "kernel_events": [{"channel_id": 0, "kernel_start_ts": 1,
                                                      "kernel_stop_ts": 2, "kernel_record_ts": 2}]})
    assert parse(verbose) == parse(line())


def test_older_v4_without_timing_source_and_nan_bandwidth():
    r = parse(line(coll_timing_source=DROP, coll_busbw_gbs="nan", coll_algobw_gbs="nan"))
    assert r.timing is None and r.busbw is None


BAD = {
    "not JSON": ("{\"header\": ", "not JSON"),
    "a line cut mid-write": (line()[:-40], "not JSON"),
    "two records glued together": (line() + line(), "extra data"),
    "a JSON array": ("[1, 2]", "not a JSON object: list"),
    "no coll_perf": (json.dumps({"header": HEADER, "metadata": META}),
                     "coll_perf or p2p_perf must be an object"),
    "no metadata": (json.dumps({"header": HEADER, "coll_perf": PERF}),
                    "header and metadata must be objects"),
    "a P2P peer outside the communicator": (
        w.p2p_line(cid="0xa", rank=0, n_ranks=2, peer=2), "p2p_perf.p2p_peer 2 is not below n_ranks 2"),
    "a P2P line without its peer": (
        w.p2p_line(cid="0xa", rank=0, n_ranks=2, peer=1).replace(',"p2p_peer":1', ""),
        "p2p_perf.p2p_peer must be an integer >= 0"),
    "a negative P2P size": (w.p2p_line(cid="0xa", rank=0, n_ranks=2, peer=1, size=-1),
                            "p2p_perf.p2p_msg_size_bytes must be an integer >= 0"),
    "a comm_name that is not a string": (line(header={"comm_name": 7}),
                                         "header.comm_name must be a string"),
    "rank not below n_ranks": (line(header={"rank": 8}), "header.rank 8 is not below n_ranks 8"),
    "n_ranks zero": (line(header={"n_ranks": 0, "rank": 0}), "header.n_ranks must be an integer >= 1"),
    "rank as a string": (line(header={"rank": "2"}), "header.rank must be an integer >= 0"),
    "rank as a boolean": (line(header={"rank": True}), "header.rank must be an integer >= 0"),
    "empty communicator id": (line(header={"id": ""}), "header.id must be a non-empty string"),
    "no hostname": (line(meta={"hostname": None}), "metadata.hostname must be a non-empty string"),
    "negative size": (line(coll_msg_size_bytes=-1), "coll_perf.coll_msg_size_bytes must be an integer >= 0"),
    "NaN exec time": ('{"header":%s,"metadata":%s,"coll_perf":%s}' % (
        json.dumps(HEADER), json.dumps(META), json.dumps({**PERF, "coll_exec_time_us": float("nan")})),
        "coll_perf.coll_exec_time_us must be a finite number >= 0"),
    "exec time as a string": (line(coll_exec_time_us="61974"), "coll_exec_time_us must be a finite number"),
    "negative bandwidth": (line(coll_busbw_gbs=-1.0), "coll_busbw_gbs must be a number or"),
    "missing coll_sn": (line(coll_sn=DROP), "coll_perf.coll_sn must be an integer >= 0"),
    "invalid UTF-8": (b"{\"header\": \"\xff\"}", "not JSON"),
    # valid JSON that float() and math.isfinite() raise OverflowError on, not Malformed
    "an integer exec time beyond the float range": (
        line(coll_exec_time_us=10**400), "coll_exec_time_us must be a finite number >= 0, got an integer of"),
    "an integer bandwidth beyond the float range": (
        line(coll_busbw_gbs=10**400), "coll_busbw_gbs must be a number or"),
    # the C scanner recurses: RecursionError, not ValueError
    "arrays nested deeper than the recursion limit": ("[" * 100_000, "not JSON: nested too deeply"),
}


# One line of every kind each NCCL version line writes (tests/inspector_writer.py, from
# the writers' code), and what the parser must read from it.
WRITTEN = {
    "2.28: a collective, no comm_name": (
        w.coll_line(w.V228, cid=w.comm_id(0x7f8c496ae9f66123), rank=2, n_ranks=8, sn=1407,
                    size=17179869184, exec_us=61974, algobw=277.210914, busbw=485.119099),
        ("0x7f8c496ae9f661", 2, 8, "AllReduce", 1407, 61974.0, "kernel_gpu", 485.119099, None, -1)),
    "2.29: a verbose collective": (
        w.coll_line(w.V229, cid="0xe62dedaa97644a", rank=4, n_ranks=8, coll="ReduceScatter",
                    sn=1231, exec_us=41057, busbw=366.134533, verbose=True),
        ("0xe62dedaa97644a", 4, 8, "ReduceScatter", 1231, 41057.0, "kernel_gpu", 366.134533, None, -1)),
    "2.29: a host-timed collective with NaN bandwidth": (
        w.coll_line(w.V229, cid="0xa1", rank=0, n_ranks=2, timing="collective_cpu",
                    algobw=float("nan"), busbw=float("nan")),
        ("0xa1", 0, 2, "AllReduce", 1, 100.0, "collective_cpu", None, None, -1)),
    "2.30: a collective with its communicator's name": (
        w.coll_line(w.V230, cid="0xa2", rank=1, n_ranks=4, comm_name="TENSOR_MODEL_PARALLEL_GROUP:3"),
        ("0xa2", 1, 4, "AllReduce", 1, 100.0, "kernel_gpu", 17.5, "TENSOR_MODEL_PARALLEL_GROUP:3", -1)),
    "2.30: an unnamed communicator": (
        w.coll_line(w.V230, cid="0xa3", rank=0, n_ranks=2),
        ("0xa3", 0, 2, "AllReduce", 1, 100.0, "kernel_gpu", 17.5, "unknown", -1)),
    "2.30: a name with a slash, escaped": (
        w.coll_line(w.V230, cid="0xa3", rank=0, n_ranks=2, comm_name="dp/replica"),
        ("0xa3", 0, 2, "AllReduce", 1, 100.0, "kernel_gpu", 17.5, "dp/replica", -1)),
    "2.30: a Send": (
        w.p2p_line(cid="0xb1", rank=0, n_ranks=2, peer=1, sn=7, size=33554432, exec_us=812,
                   comm_name="PIPELINE_MODEL_PARALLEL_GROUP:5"),
        ("0xb1", 0, 2, "Send", 7, 812.0, "kernel_gpu", 10.0, "PIPELINE_MODEL_PARALLEL_GROUP:5", 1)),
    "2.30: a verbose Recv": (
        w.p2p_line(cid="0xb1", rank=1, n_ranks=2, peer=0, op="Recv", sn=8, verbose=True),
        ("0xb1", 1, 2, "Recv", 8, 100.0, "kernel_gpu", 10.0, "unknown", 0)),
}


@pytest.mark.parametrize("case", WRITTEN, ids=list(WRITTEN))
def test_every_kind_of_line_each_nccl_version_writes_is_read(case):
    text, want = WRITTEN[case]
    r = parse(text.encode())
    assert (r.comm, r.comm_rank, r.n_ranks, r.op, r.sn, r.exec_us, r.timing, r.busbw,
            r.comm_name, r.peer) == want
    assert parse_json(text) == r


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_malformed_lines_are_refused_with_the_reason(case):
    text, reason = BAD[case]
    with pytest.raises(Malformed, match=reason.replace("(", r"\(")):
        parse(text)


# parse (orjson, then the standard library for what it refuses) == parse_json --------------
VERBOSE = line(event_trace_sn={"coll_start_sn": 1, "coll_stop_sn": 2, "kernel_events": []},
               event_trace_ts={"coll_start_ts": 1752867229235059, "kernel_events": [
                   {"channel_id": 0, "kernel_start_ts": 1, "kernel_stop_ts": 2}]})
BASES = [line(), VERBOSE, line(coll_timing_source=DROP, coll_busbw_gbs="nan", coll_algobw_gbs="nan"),
         line(coll_exec_time_us=61974.25, coll_busbw_gbs=485)] + [text for text, _ in WRITTEN.values()]
# values where JSON decoders are known to differ, or that sit on a check's edge
ODD_VALUES = ["18446744073709551616", "18446744073709551615", "9223372036854775808",
              "-9223372036854775809", "1" * 310, "1e400", "-1e400", "1e-400", "NaN", "Infinity",
              "-0", "-0.0", "0.1", "1.7976931348623157e308", "2.2250738585072014e-308",
              "17179869184.000000001", '"nan"', '"NaN"', '""', '"x"', "true", "false", "null",
              "[]", "{}", '"\\ud800"', '"a\\u0000b"', '"gpu\\u002dnode"', '"\\u00e9"', "1.5E3",
              "01", "1.", ".5", "+1", "0x10", '"\x7f"', '"\t"']
CHARS = '{}[]:,"\\ -+.0123456789eEnatrufl\x00\x1f\x7f\t\r\n\ufeff\u00e9\ud800'
NUMBER = st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?", fullmatch=True)
VALUE = re.compile(r'(?<=":)(?:"[^"]*"|[^,}\]{\[][^,}\]]*)')  # a scalar after a key


@st.composite
def mutated_lines(draw):
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["value"] * 4 + ["number"] * 3 + ["insert", "delete", "replace"]))
        if how in ("value", "number"):
            spans = [m.span() for m in VALUE.finditer(text)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                new = draw(st.sampled_from(ODD_VALUES) if how == "value" else NUMBER)
                text = text[:a] + new + text[b:]
            continue
        i = draw(st.integers(0, len(text)))
        if how == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 8)):]
        else:
            c = draw(st.sampled_from(CHARS))
            text = text[:i] + c + text[i + (how == "replace"):]
    return text.encode("utf-8", "surrogatepass") if draw(st.booleans()) else text


def outcome(fn, text):
    try:
        return repr(fn(text))  # repr: -0.0 and 0.0 differ, as do 1 and 1.0
    except Malformed as exc:
        return f"Malformed: {exc}"


@settings(max_examples=5000 if os.environ.get("OBSGEN_FUZZ") == "1" else 1000, deadline=None,
          derandomize=os.environ.get("OBSGEN_FUZZ") != "1", database=None)
@given(mutated_lines())
def test_parse_answers_as_the_standard_library_decoder_on_mutated_lines(text):
    assert outcome(parse, text) == outcome(parse_json, text)


EDGES = {
    "leading whitespace (orjson skips it, the record scanner does not)": " " + line(),
    "a duplicate key: the last one counts": line().replace('"rank":2', '"rank":9,"rank":2'),
    "a duplicate key naming a bad value last": line().replace('"rank":2', '"rank":2,"rank":-1'),
    "a size beyond 64 bits (orjson: a float)": line(coll_msg_size_bytes=2**64),
    "a size at the top of 64 bits": line(coll_msg_size_bytes=2**64 - 1),
    "a lone surrogate escaped in the hostname": line().replace("gpu-node-000", "gpu\\ud800"),
    "an escaped hostname": line().replace("gpu-node-000", "gpu\\u002dnode"),
    "NaN where nothing reads it": line().replace("277.210914", "NaN"),
    "a trailing carriage return": line() + "\r",
    "a byte order mark": "\ufeff" + line(),
    "a record as bytes": line().encode(),
    "a verbose record": VERBOSE,
}


@pytest.mark.parametrize("case", EDGES, ids=list(EDGES))
def test_parse_answers_as_the_standard_library_decoder_on_edges(case):
    assert outcome(parse, EDGES[case]) == outcome(parse_json, EDGES[case])


@pytest.mark.parametrize("op,n,expected", [("AllReduce", 8, 2 * 7 / 8), ("AllGather", 8, 7),
                                           ("ReduceScatter", 4, 3), ("Broadcast", 8, 1),
                                           ("Send", 2, 1)])
def test_bus_bytes_follow_the_nccl_tests_bus_bandwidth_model(op, n, expected):
    assert bus_bytes(op, 1000, n) == pytest.approx(1000 * expected)


# group map ----------------------------------------------------------------------------
def test_group_map_round_trip(tmp_path):
    path = groups.write_group_map(tmp_path, rank=9, world_size=32, job_id="llm-a",
                                  hostname="node-7", pid=4242, groups={
                                      "tp": list(range(8, 16)),
                                      "dp": {"ranks": [1, 9], "comm_id": "0x7f8c496ae9f661"}})
    assert path.name == "obsgen-groups-node-7-pid4242.json"
    pm = groups.read_group_map(path)
    assert (pm.hostname, pm.pid, pm.rank, pm.world_size, pm.job_id) == ("node-7", 4242, 9, 32, "llm-a")
    assert pm.groups == (("tp", tuple(range(8, 16)), None), ("dp", (1, 9), "0x7f8c496ae9f661"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]


BAD_MAPS = {
    "rank outside the world": (dict(rank=32, world_size=32, groups={"tp": [0]}), "rank must be"),
    "rank not in its group": (dict(rank=1, world_size=8, groups={"tp": [2, 3]}), "rank 1 is not one of"),
    "duplicate ranks": (dict(rank=1, world_size=8, groups={"tp": [1, 1]}), "must be distinct"),
    "group named unknown": (dict(rank=1, world_size=8, groups={"unknown": [1]}), "must match"),
    "group name with a capital": (dict(rank=1, world_size=8, groups={"TP": [1]}), "must match"),
    "comm id not hex": (dict(rank=1, world_size=8, groups={"tp": {"ranks": [1], "comm_id": "abc"}}),
                        "comm_id must look like"),
}


@pytest.mark.parametrize("case", BAD_MAPS, ids=list(BAD_MAPS))
def test_an_inconsistent_group_map_is_refused_and_nothing_is_written(case, tmp_path):
    kwargs, reason = BAD_MAPS[case]
    with pytest.raises(groups.GroupMapError, match=reason):
        groups.write_group_map(tmp_path, **kwargs)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text,ok", [("tp:n_ranks=8,nnodes=1", True), ("dp:nnodes=4", True),
                                     ("tp:comm_name=tensor*", True),
                                     ("tp", False), ("tp:n_ranks=0", False), ("tp:ranks=8", False),
                                     ("unknown:n_ranks=2", False), ("tp:comm_name=", False)])
def test_group_rules(text, ok):
    if ok:
        rule = groups.Rule.parse(text)
        assert rule.matches(8, 1, "tensor_parallel") == (text != "dp:nnodes=4")
        assert rule.matches(8, 1, "other") == (text == "tp:n_ranks=8,nnodes=1")
    else:
        with pytest.raises(groups.GroupMapError):
            groups.Rule.parse(text)


COMM_NAMES = {
    "Megatron's tensor-parallel group, as PyTorch passes it (desc:name)": ("TENSOR_MODEL_PARALLEL_GROUP:5", "tp"),
    "Megatron's pipeline group, description only": ("PIPELINE_MODEL_PARALLEL_GROUP", "pp"),
    "Megatron's gradient group with context parallelism": ("DATA_PARALLEL_GROUP_WITH_CP:12", "dp"),
    "Megatron's hierarchical data-parallel level": ("HIERARCHICAL_DATA_PARALLEL_GROUP_WITH_CP_L1:40", "dp"),
    "Megatron's expert-parallel group": ("EXPERT_MODEL_PARALLEL_GROUP:9", "ep"),
    "Megatron's expert data-parallel group is not the dense dp": ("EXPERT_DATA_PARALLEL_GROUP:10", "edp"),
    "Megatron's context-parallel group": ("CONTEXT_PARALLEL_GROUP:7", "cp"),
    "a DeviceMesh dimension named tp": ("mesh_tp:3", "tp"),
    "a DeviceMesh FSDP shard dimension": ("mesh_dp_shard:2", "fsdp"),
    "the default process group": ("default_pg:0", "world"),
    "a communicator created without a name": ("unknown", "unknown"),
    "a name the table does not know": ("my_group", "unknown"),
}


@pytest.mark.parametrize("case", COMM_NAMES, ids=list(COMM_NAMES))
def test_a_communicator_name_names_its_group(case):
    name, group = COMM_NAMES[case]
    assert groups.Resolver().group("0xa", "h", 1, 0, 4, 1, name) == group


def test_a_group_map_and_a_rule_override_the_communicators_name():
    res = groups.Resolver(rules=[groups.Rule.parse("pp:comm_name=TENSOR_MODEL_PARALLEL_GROUP*")])
    assert res.group("0xa", "h", 1, 0, 4, 1, "TENSOR_MODEL_PARALLEL_GROUP:5") == "pp"
    res.add_map(groups.ProcessMap("h", 1, 0, 4, None, (("dp", (0, 1, 2, 3), "0xb"),)))
    assert res.group("0xb", "h", 1, 0, 4, 1, "TENSOR_MODEL_PARALLEL_GROUP:5") == "dp"


def test_a_group_map_may_give_the_full_hash_or_the_14_digits_the_inspector_writes(tmp_path):
    written = w.comm_id(0x7f8c496ae9f66123)
    assert written == "0x7f8c496ae9f661"
    for given_id in ("0x7f8c496ae9f66123", "0x7f8c496ae9f661", "0x7F8C496AE9F66123"):
        res = groups.Resolver()
        res.add_map(groups.ProcessMap("h", 1, 0, 4, None, (("dp", (0, 2), given_id),)))
        assert res.group(written, "other", 9, 0, 2, 1) == "dp", given_id
    assert groups.comm_key("0x0000abc") == "0xabc"  # %lx writes no leading zeros
    path = groups.write_group_map(tmp_path, rank=0, world_size=2, hostname="h", pid=1,
                                  groups={"dp": {"ranks": [0, 1], "comm_id": "0x7F8C496AE9F66123"}})
    res = groups.Resolver()
    res.add_map(groups.read_group_map(path))
    assert res.group(written, "other", 9, 0, 2, 1) == "dp"


def test_a_peer_is_named_by_its_global_rank_from_the_map_or_its_own_records():
    res = groups.Resolver()
    res.add_map(groups.ProcessMap("h", 1, 3, 8, None, (("pp", (3, 7), "0xc"),)))
    assert res.peer("0xc", 1) == "7"  # the map's members, in comm-rank order
    res = groups.Resolver(world_size=8)
    assert res.peer("0xd", 1) == groups.UNKNOWN  # nothing seen yet
    res.group("0xd", "h7", 7, 1, 2, 1)  # the peer's own record in the communicator
    assert res.peer("0xd", 1) == groups.UNKNOWN  # its global rank is not known yet
    res.rank("h7", 7, 7, 8)  # it is rank 7 of the 8-rank world communicator
    assert res.peer("0xd", 1) == "7"


def _map(rank, world, **gs):
    return groups.ProcessMap(f"h{rank}", 100 + rank, rank, world, None,
                             tuple((n, tuple(r), None) for n, r in gs.items()))


def test_membership_decides_a_group_once_one_name_fits_every_process_seen():
    # TP=2 and DP=2 on 4 ranks: tp [0,1] [2,3], dp [0,2] [1,3]. Rank 0 is comm rank 0 of
    # both its groups, so one process cannot tell them apart; a second member can.
    res = groups.Resolver(rules=[groups.Rule.parse("fallback:n_ranks=2")])
    for r in range(4):
        res.add_map(_map(r, 4, tp=[r - r % 2, r - r % 2 + 1], dp=[r % 2, r % 2 + 2]))
    assert res.group("0xa", "h0", 100, 0, 2, 1) == "fallback"  # rule while undecided
    assert res.group("0xa", "h2", 102, 1, 2, 1) == "dp"  # rank 2 is comm rank 1: dp [0, 2]
    assert res.group("0xa", "h0", 100, 0, 2, 1) == "dp"  # decided for good
    assert res.group("0xb", "h1", 101, 1, 2, 1) == "tp"  # rank 1 at comm rank 1: only tp [0, 1]


def test_the_node_count_tells_a_group_within_a_host_from_one_across_hosts_at_once():
    # 4 ranks on 2 hosts: tp [0,1] [2,3] within a host, dp [0,2] [1,3] across them. Rank 0
    # is comm rank 0 of both, but only tp has one host, as the communicator's nnodes says.
    def pm(r):
        return groups.ProcessMap(f"node{r // 2}", 100 + r, r, 4, None, (
            ("tp", (r - r % 2, r - r % 2 + 1), None), ("dp", (r % 2, r % 2 + 2), None)))
    res = groups.Resolver()
    for r in range(4):
        res.add_map(pm(r))
    assert res.group("0xa", "node0", 100, 0, 2, 1) == "tp"
    assert res.group("0xb", "node0", 100, 0, 2, 2) == "dp"
    # without the maps of every member the hosts are not known: nothing decided yet
    res = groups.Resolver()
    res.add_map(pm(0))
    assert res.group("0xa", "node0", 100, 0, 2, 1) == "unknown"
    res.add_map(pm(1))  # tp's members known, dp's not: still no tie-break
    assert res.group("0xa", "node0", 100, 0, 2, 1) == "unknown"


def test_without_map_or_rule_a_group_stays_unknown_and_a_world_comm_gives_the_rank():
    res = groups.Resolver(world_size=8)
    assert res.group("0xa", "h", 1, 3, 4, 1) == groups.UNKNOWN
    assert res.rank("h", 1, 3, 4) == groups.UNKNOWN
    assert res.rank("h", 1, 5, 8) == "5"  # the 8-rank communicator is the world
    assert res.rank("h", 1, 3, 4) == "5"


def test_an_explicit_comm_id_wins():
    res = groups.Resolver(rules=[groups.Rule.parse("tp:n_ranks=2")])
    res.add_map(groups.ProcessMap("h", 1, 0, 4, None, (("dp", (0, 2), "0xbeef"),)))
    assert res.group("0xbeef", "other", 9, 0, 2, 1) == "dp"
