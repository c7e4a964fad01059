"""Inspector dump lines as each NCCL version line writes them, for the tests.

Derived from the writers in NVIDIA/nccl (read, not copied):
``ext-profiler/inspector/inspector.cc`` at v2.28.3-1 and
``plugins/profiler/inspector/inspector.cc`` at v2.29.7-1 (one ``coll_perf`` object, the
latest collective of a communicator, per dump), and
``plugins/profiler/inspector/inspector_json.cc`` at v2.30.3-1 .. v2.30.7-1 (a
``comm_name`` in the header; ``coll_perf`` and, P2P tracking on by default,
``p2p_perf`` objects, every completed operation drained from a ring per communicator).
``json.cc`` prints keys in call order, integers with ``%d``/``%lu``, doubles with
``%lf`` (six decimals) or the string ``"nan"``, escapes ``" \\ / \\t \\n`` in strings,
and ends each object with ``\\n``. The communicator hash is ``snprintf(buf, 17,
"0x%lx")``: 14 hex digits at most.
"""
from __future__ import annotations

import math

V228, V229, V230 = "2.28", "2.29", "2.30"
VERSIONS = (V228, V229, V230)


def comm_id(hash64: int) -> str:
    """The communicator id as the Inspector writes it (cut to 14 hex digits)."""
    return ("0x%x" % hash64)[:16]


def _str(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\/':
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
    return '"%s"' % "".join(out)


def _double(v: float) -> str:
    return '"nan"' if math.isnan(v) else "%f" % v


def _obj(pairs) -> str:
    return "{" + ",".join(f"{_str(k)}:{v}" for k, v in pairs) + "}"


def _header(version, cid, rank, n_ranks, nnodes, comm_name):
    pairs = [("id", _str(cid))]
    if version == V230:
        pairs.append(("comm_name", _str(comm_name or "unknown")))
    pairs += [("rank", str(rank)), ("n_ranks", str(n_ranks)), ("nnodes", str(nnodes))]
    return _obj(pairs)


def _meta(hostname, pid, ts_us):
    return _obj([("inspector_output_format_version", _str("v4.0")), ("git_rev", _str("")),
                 ("rec_mechanism", _str("nccl_profiler_interface")),
                 ("dump_timestamp_us", str(ts_us)), ("hostname", _str(hostname)),
                 ("pid", str(pid))])


def _verbose(prefix: str, start_ts: int, exec_us: int, channels: int = 2):
    sn = _obj([(f"{prefix}_start_sn", "1"), (f"{prefix}_stop_sn", "2"), ("kernel_events", "[" + ",".join(
        _obj([("channel_id", str(c)), ("kernel_start_sn", str(3 + 3 * c)),
              ("kernel_stop_sn", str(4 + 3 * c)), ("kernel_record_sn", str(5 + 3 * c))])
        for c in range(channels)) + "]")])
    ts = _obj([(f"{prefix}_start_ts", str(start_ts)), (f"{prefix}_stop_ts", str(start_ts + 5)),
               ("kernel_events", "[" + ",".join(
                   _obj([("channel_id", str(c)), ("kernel_start_ts", str(start_ts + 100)),
                         ("kernel_stop_ts", str(start_ts + 100 + exec_us)),
                         ("kernel_record_ts", str(start_ts + 100 + exec_us))])
                   for c in range(channels)) + "]")])
    return [("event_trace_sn", sn), ("event_trace_ts", ts)]


def coll_line(version: str, *, cid: str, rank: int, n_ranks: int, nnodes: int = 1,
              hostname: str = "node-0", pid: int = 1000, coll: str = "AllReduce", sn: int = 1,
              size: int = 1 << 20, exec_us: int = 100, timing: str = "kernel_gpu",
              algobw: float = 10.0, busbw: float = 17.5, comm_name: str | None = None,
              verbose: bool = False, ts_us: int = 1_750_000_000_000_000) -> str:
    perf = [("coll", _str(coll)), ("coll_sn", str(sn)), ("coll_msg_size_bytes", str(size)),
            ("coll_exec_time_us", str(exec_us)), ("coll_timing_source", _str(timing)),
            ("coll_algobw_gbs", _double(algobw)), ("coll_busbw_gbs", _double(busbw))]
    if verbose:
        perf += _verbose("coll", ts_us - exec_us - 200, exec_us)
    return _obj([("header", _header(version, cid, rank, n_ranks, nnodes, comm_name)),
                 ("metadata", _meta(hostname, pid, ts_us)), ("coll_perf", _obj(perf))])


def p2p_line(*, cid: str, rank: int, n_ranks: int, peer: int, nnodes: int = 1,
             hostname: str = "node-0", pid: int = 1000, op: str = "Send", sn: int = 1,
             size: int = 1 << 20, exec_us: int = 100, timing: str = "kernel_gpu",
             algobw: float = 10.0, busbw: float = 10.0, comm_name: str | None = None,
             verbose: bool = False, ts_us: int = 1_750_000_000_000_000) -> str:
    """A ``p2p_perf`` line (NCCL 2.30+ only)."""
    perf = [("p2p", _str(op)), ("p2p_sn", str(sn)), ("p2p_peer", str(peer)),
            ("p2p_msg_size_bytes", str(size)), ("p2p_exec_time_us", str(exec_us)),
            ("p2p_timing_source", _str(timing)), ("p2p_algobw_gbs", _double(algobw)),
            ("p2p_busbw_gbs", _double(busbw))]
    if verbose:
        perf += _verbose("p2p", ts_us - exec_us - 200, exec_us)
    return _obj([("header", _header(V230, cid, rank, n_ranks, nnodes, comm_name)),
                 ("metadata", _meta(hostname, pid, ts_us)), ("p2p_perf", _obj(perf))])
