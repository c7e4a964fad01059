"""NCCL Inspector records: the JSON-lines format (see ``obsgen.nccl`` for the sources) and
a strict, fast parser. ``parse`` returns a ``Record`` or raises ``Malformed`` with the
reason; callers count malformed lines and move on. ``make bench`` measures it
(benchmarks/nccl_parse.md).
"""
from __future__ import annotations

import json
import math
import sys
from typing import NamedTuple

import orjson

# Timing sources whose duration is a kernel time (starts when the rank's GPU reaches the
# collective); only these are aligned across ranks.
KERNEL_TIMING = frozenset({"kernel_gpu", "kernel_cpu"})
# Collectives whose ranks complete together, so kernel times order their arrivals.
SYMMETRIC = frozenset({"AllReduce", "AllGather", "ReduceScatter"})


class Malformed(ValueError):
    """A line that is not an Inspector record; the message says why."""


class Record(NamedTuple):
    comm: str  # header.id, the communicator hash
    comm_rank: int  # rank in the communicator
    n_ranks: int
    nnodes: int
    hostname: str
    pid: int
    op: str  # coll_perf.coll
    sn: int  # coll_sn, per communicator and op
    size: int  # coll_msg_size_bytes
    exec_us: float  # coll_exec_time_us
    timing: str | None  # coll_timing_source, None when absent
    busbw: float | None  # GB/s, None when absent or NaN
    comm_name: str | None  # header.comm_name (2.30+), None when absent
    peer: int  # p2p_peer, the peer's rank in the communicator; -1 for a collective


_MAX_FLOAT = int(sys.float_info.max)


def _short(v) -> str:
    """repr of a value for a message, cut: a line may hold a megabyte of digits."""
    r = repr(v) if type(v) is not int or v.bit_length() < 128 else "an integer of %d bits" % v.bit_length()
    return r if len(r) <= 80 else r[:77] + "..."


def _int(obj: dict, key: str, where: str, minimum: int = 0) -> int:
    v = obj.get(key)
    if type(v) is not int or v < minimum:  # bool is not an int here
        raise Malformed(f"{where}.{key} must be an integer >= {minimum}, got {_short(v)}")
    return v


def _finite(v) -> bool:
    """A JSON number that is a finite float: an integer beyond the float range is not
    (``math.isfinite`` and ``float()`` raise OverflowError on it)."""
    if type(v) is int:
        return -_MAX_FLOAT <= v <= _MAX_FLOAT
    return type(v) is float and math.isfinite(v)


def _num(obj: dict, key: str, where: str) -> float:
    v = obj.get(key)
    if not _finite(v) or v < 0:
        raise Malformed(f"{where}.{key} must be a finite number >= 0, got {_short(v)}")
    return float(v)


def _str(obj: dict, key: str, where: str) -> str:
    v = obj.get(key)
    if type(v) is not str or not v:
        raise Malformed(f"{where}.{key} must be a non-empty string, got {_short(v)}")
    return v


def _bandwidth(v, where: str) -> float | None:
    if v is None or v == "nan":
        return None
    if not _finite(v) or v < 0:
        raise Malformed(f"{where} must be a number or \"nan\", got {_short(v)}")
    return float(v)


_scan = json.JSONDecoder().scan_once  # the C scanner, without decode()'s regex for the end
_loads, _LoadError = orjson.loads, orjson.JSONDecodeError
_INF = math.inf
_new = tuple.__new__  # Record(...) without NamedTuple's Python-level __new__


def parse(line: bytes | str) -> Record:
    """One Inspector line (without its newline) as a Record, or Malformed with the reason.

    This runs for every collective of every rank, so the common case is fast: orjson
    decodes a line that starts like a record and its fields are checked inline. Whatever
    that does not accept (orjson refuses the JSON, or a field fails the inline checks) is
    parsed again by ``parse_json``, the standard library's decoder and the detailed
    checks, which decide and name what is wrong. orjson accepts no JSON the standard
    library refuses, once the line starts with ``{`` (it also skips leading whitespace),
    and decodes the fields read here to the same values (an integer beyond 64 bits
    becomes a float and fails the inline checks), so the answer is always that of
    ``parse_json``; tests/test_nccl_inspector.py compares the two on mutated lines."""
    if (line[:1] == b"{") if type(line) is bytes else (line[:1] == "{"):
        try:
            rec = _record(_loads(line))
        except _LoadError:
            rec = None
        if rec is not None:
            return rec
    return parse_json(line)


def parse_json(line: bytes | str) -> Record:
    """``parse`` with the standard library's JSON decoder only."""
    try:
        text = line.decode() if type(line) is bytes else line
        doc, end = _scan(text, 0)
    except StopIteration:
        raise Malformed("not JSON") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Malformed(f"not JSON: {exc}") from None
    except RecursionError:  # nested deeper than the interpreter's recursion limit
        raise Malformed("not JSON: nested too deeply") from None
    if end != len(text) and text[end:].strip():
        raise Malformed(f"not JSON: extra data at column {end + 1}")
    return _record(doc) or _parse_checked(doc)


def _record(doc) -> Record | None:
    """The Record of a decoded line whose fields pass the inline checks, else None."""
    try:
        h, m = doc["header"], doc["metadata"]
        comm, rank, n, nnodes, name = h["id"], h["rank"], h["n_ranks"], h["nnodes"], h.get("comm_name")
        host, pid = m["hostname"], m["pid"]
        p = doc.get("coll_perf")
        if p is not None:
            op, sn, size, ex = p["coll"], p["coll_sn"], p["coll_msg_size_bytes"], p["coll_exec_time_us"]
            timing, bw, peer = p.get("coll_timing_source"), p.get("coll_busbw_gbs"), -1
        else:
            p = doc["p2p_perf"]
            op, sn, size, ex = p["p2p"], p["p2p_sn"], p["p2p_msg_size_bytes"], p["p2p_exec_time_us"]
            timing, bw, peer = p.get("p2p_timing_source"), p.get("p2p_busbw_gbs"), p["p2p_peer"]
            if type(peer) is not int or not 0 <= peer < n:
                return None
    except (KeyError, TypeError, AttributeError, IndexError):
        return None
    if (type(rank) is int and type(n) is int and type(nnodes) is int and type(pid) is int
            and type(sn) is int and type(size) is int and 0 <= rank < n and nnodes >= 1
            and pid >= 0 and sn >= 0 and size >= 0 and type(comm) is str and comm
            and type(host) is str and host and type(op) is str and op
            and (name is None or type(name) is str)
            and ((type(ex) is float and 0 <= ex < _INF) or (type(ex) is int and 0 <= ex <= _MAX_FLOAT))
            and (timing is None or type(timing) is str)
            and (bw is None or (type(bw) is float and 0 <= bw < _INF) or bw == "nan"
                 or (type(bw) is int and 0 <= bw <= _MAX_FLOAT))):
        return _new(Record, (comm, rank, n, nnodes, host, pid, op, sn, size, float(ex), timing,
                             None if bw is None or bw == "nan" else float(bw), name, peer))
    return None


def _parse_checked(doc) -> Record:
    if type(doc) is not dict:
        raise Malformed(f"not a JSON object: {type(doc).__name__}")
    header, meta = doc.get("header"), doc.get("metadata")
    if type(header) is not dict or type(meta) is not dict:
        raise Malformed("header and metadata must be objects")
    perf, kind = doc.get("coll_perf"), "coll"
    if perf is None:
        perf, kind = doc.get("p2p_perf"), "p2p"
    if type(perf) is not dict:
        raise Malformed("coll_perf or p2p_perf must be an object")
    where = kind + "_perf"
    n_ranks = _int(header, "n_ranks", "header", 1)
    rank = _int(header, "rank", "header")
    if rank >= n_ranks:
        raise Malformed(f"header.rank {rank} is not below n_ranks {n_ranks}")
    comm = _str(header, "id", "header")
    name = header.get("comm_name")
    if name is not None and type(name) is not str:
        raise Malformed(f"header.comm_name must be a string, got {_short(name)}")
    peer = -1
    if kind == "p2p":
        peer = _int(perf, "p2p_peer", where)
        if peer >= n_ranks:
            raise Malformed(f"p2p_perf.p2p_peer {peer} is not below n_ranks {n_ranks}")
    timing = perf.get(kind + "_timing_source")
    if timing is not None and type(timing) is not str:
        raise Malformed(f"{where}.{kind}_timing_source must be a string, got {_short(timing)}")
    return Record(
        comm, rank, n_ranks, _int(header, "nnodes", "header", 1),
        _str(meta, "hostname", "metadata"), _int(meta, "pid", "metadata"),
        _str(perf, kind, where), _int(perf, kind + "_sn", where),
        _int(perf, kind + "_msg_size_bytes", where), _num(perf, kind + "_exec_time_us", where),
        timing, _bandwidth(perf.get(kind + "_busbw_gbs"), f"{where}.{kind}_busbw_gbs"), name, peer)


def bus_bytes(op: str, size: int, n_ranks: int) -> float:
    """Bytes one rank moves over its links for a collective, by the bus-bandwidth model
    of nccl-tests' PERFORMANCE.md (the model the Inspector's coll_busbw_gbs uses)."""
    if op == "AllReduce":
        return size * 2.0 * (n_ranks - 1) / n_ranks
    if op in ("AllGather", "ReduceScatter"):
        return float(size) * (n_ranks - 1)
    return float(size)


def dumps(header: dict, metadata: dict, coll_perf: dict) -> str:
    """A collective's record line (compact JSON, no newline); for tests, benchmarks and
    the synthetic job. tests/inspector_writer.py writes each NCCL version's lines."""
    return json.dumps({"header": header, "metadata": metadata, "coll_perf": coll_perf},
                      separators=(",", ":"))
