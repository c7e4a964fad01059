"""Late reads: the rules as a remote ruler evaluates them, and how late each alert gets.

Prometheus evaluates a group's rules in order at one timestamp, so a rule reads the
records computed before it in the same evaluation. A ruler that evaluates against remote
storage (vmalert, the Thanos and Mimir rulers, Prometheus with ``rule_query_offset``)
reads a record back after it was written: at worst, as it was one evaluation of the
reading group earlier. And a record that ended may still be read: vmalert writes a
series' staleness marker at the timestamp of its last value, where VictoriaMetrics keeps
the value, so an instant read returns it for the lookback. ``late_rules`` models both
worst cases for promtool: every read of a recorded series gets ``offset <the reading
group's interval>`` (added to an offset it has), and an instant read becomes
``last_over_time(<selector>[LOOKBACK] offset ...)``, which ignores staleness. ``delays`` says what that costs each alert: the longest chain of record reads from
the raw scrapes to the alert, each hop one interval of the group that reads it. The
hops (``depths``) are the chain depth docs/alerts.md lists.

``obsgen test --late-reads`` runs the rendered scenarios on such rules, each bound
extended by the alert's delay: every alert must give the same answer, later by at most
that.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from ..config import duration, seconds

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LOOKBACK = 300.0  # seconds an ended record stays readable: Prometheus' lookback delta, 5m
FACTS = "-facts"  # the suffix of a family's facts group (render.group_name)
OFFSET = re.compile(r"\s+offset\s+([0-9smhdwy]+)")


def _scan(expr: str):
    """(start, end, token) of every name outside string literals."""
    i, n = 0, len(expr)
    while i < n:
        ch = expr[i]
        if ch in "\"'`":
            j = i + 1
            while j < n and expr[j] != ch:
                j += 2 if expr[j] == "\\" else 1
            i = j + 1
            continue
        m = NAME.match(expr, i)
        if m and (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] in "_:.")):
            yield m.start(), m.end(), m.group()
            i = m.end()
            continue
        i += 1


def _close(expr: str, i: int, open_: str, close: str) -> int:
    """The index after the bracket that closes the one at ``i`` (quotes skipped)."""
    depth, j = 0, i
    while j < len(expr):
        ch = expr[j]
        if ch in "\"'`":
            j += 1
            while expr[j] != ch:
                j += 2 if expr[j] == "\\" else 1
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise ValueError(f"unclosed {open_} in {expr!r}")


def recorded_reads(expr: str, records: set[str]) -> set[str]:
    return {tok for _, _, tok in _scan(expr) if tok in records}


def firing_reads(expr: str, records: set[str]) -> set[str]:
    """The records ``expr`` needs to produce a value: all it reads but the right side of
    an ``unless`` (read late, a suppressor withholds late; it delays nothing)."""
    import promql_parser

    out: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name in records:
                out.add(node.name)
            return
        if isinstance(node, promql_parser.BinaryExpr):
            walk(node.lhs)
            if str(node.op) != "unless":
                walk(node.rhs)
            return
        for attr in ("expr", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for child in getattr(node, "args", None) or []:
            walk(child)

    try:
        tree = promql_parser.parse(expr)
    except ValueError:  # promtool's check, later, names it; until then count every read
        return recorded_reads(expr, records)
    walk(tree)
    return out


def read_late(expr: str, records: set[str], interval: float, lookback: float = 0) -> str:
    """``expr`` with every selector of a name in ``records`` read ``interval`` seconds
    earlier (and, with ``lookback``, an instant read returning the last sample within it
    though the series ended: a staleness marker the store lost)."""
    out, last = [], 0
    for start, end, tok in list(_scan(expr)):
        if tok not in records or start < last:
            continue
        j = end
        for open_, close in (("{", "}"), ("[", "]")):
            k = j
            while k < len(expr) and expr[k] == " ":
                k += 1
            if k < len(expr) and expr[k] == open_:
                j = _close(expr, k, open_, close)
        ranged = expr[:j].rstrip().endswith("]")
        shift = interval
        m = OFFSET.match(expr, j)
        if m:
            shift += seconds(m.group(1))
        sel = expr[start:j]
        if ranged or not lookback:
            out += [expr[last:start], f"{sel} offset {duration(shift)}"]
        else:
            out += [expr[last:start],
                    f"last_over_time({sel}[{duration(lookback)}] offset {duration(shift)})"]
        last = m.end() if m else j
    return "".join(out) + expr[last:]


def _groups(docs: list[dict]) -> list[dict]:
    return [g for d in docs for g in d.get("groups") or []]


def _interval(group: dict, default: float) -> float:
    return seconds(group["interval"]) if group.get("interval") else default


def late_rules(docs: list[dict], default_interval: float, lookback: float = 0,
               kept: frozenset[str] = frozenset()) -> list[dict]:
    """Rule file documents (``{"groups": [...]}``) with every record read late; those in
    ``kept`` (written by a Prometheus, whose staleness markers the store keeps: a sharded
    render's shard tier) without the lingering ``lookback``."""
    records = {r["record"] for g in _groups(docs) for r in g["rules"] if "record" in r}
    lost = records - kept

    def late(expr: str, every: float) -> str:
        return read_late(read_late(expr, lost, every, lookback), records & kept, every)

    out = []
    for doc in docs:
        groups = []
        for g in doc.get("groups") or []:
            every = _interval(g, default_interval)
            groups.append({**g, "rules": [{**r, "expr": late(str(r["expr"]), every)}
                                          for r in g["rules"]]})
        out.append({**doc, "groups": groups})
    return out


@dataclass(frozen=True)
class Chain:
    """The record chains behind one alert."""
    hops: int  # the most recording-rule hops between the scrapes and the alert
    rules: tuple[float, ...]  # the evaluation interval of each rule on its slowest firing path,
    # the alert's own first, down to a record that reads scrapes only
    records: frozenset[str]  # every record on any of its firing paths

    @property
    def path(self) -> tuple[float, ...]:
        """One interval per record read on the slowest path: of the rule that reads it."""
        return self.rules[:-1]


def _slowest(rules: tuple[float, ...]) -> tuple[float, float]:
    return sum(rules[:-1]), sum(rules)


def chains(docs: list[dict], default_interval: float) -> dict[str, Chain]:
    """Alert name -> its record chains: through the records it needs to fire
    (``firing_reads``), the slowest by the reads a fault's onset waits for. The records of
    a group evaluated less often than the rules (a facts group: the mesh, the GPUs'
    placement) change when a job starts, not at a fault, so reading them adds hops but is
    on no firing path."""
    rules = [(r, _interval(g, default_interval)) for g in _groups(docs) for r in g["rules"]]
    by_record = {r["record"]: (str(r["expr"]), every) for r, every in rules if "record" in r}
    facts = {r["record"] for g in _groups(docs) if g["name"].endswith(FACTS)
             for r in g["rules"] if "record" in r}
    names = set(by_record)

    @lru_cache(maxsize=None)
    def chain(expr: str, every: float) -> Chain:
        hops, below, records = 0, (), frozenset()
        firing = firing_reads(expr, names)
        for rec in recorded_reads(expr, names):
            c = chain(*by_record[rec])
            hops = max(hops, c.hops + 1)
            if rec in firing and rec not in facts:
                records |= {rec} | c.records
                if _slowest(c.rules) > _slowest(below):
                    below = c.rules
        return Chain(hops, (every,) + below, records)

    out: dict[str, Chain] = {}
    for r, every in rules:
        if "alert" in r:
            c = chain(str(r["expr"]), every)
            old = out.get(r["alert"])
            if old:
                c = Chain(max(old.hops, c.hops),
                          max(old.rules, c.rules, key=_slowest), old.records | c.records)
            out[r["alert"]] = c
    return out


def depths(docs: list[dict], default_interval: float) -> dict[str, int]:
    """Alert name -> the most recording-rule hops between the scrapes and the alert."""
    return {a: c.hops for a, c in chains(docs, default_interval).items()}


def paths(docs: list[dict], default_interval: float) -> dict[str, tuple[float, ...]]:
    """Alert name -> the evaluation interval of each rule that reads a record on the
    alert's slowest firing path (the alert's own first): one entry per record read late."""
    return {a: c.path for a, c in chains(docs, default_interval).items()}


def delays(docs: list[dict], default_interval: float) -> dict[str, float]:
    """Alert name -> seconds a ruler that reads every record one evaluation late adds
    between a fault's onset and the alert."""
    return {a: sum(p) for a, p in paths(docs, default_interval).items()}


@dataclass(frozen=True)
class Ruler:
    """What a ruler and its store add to each read, in seconds."""
    column: str  # its column in docs/remote-rulers.md
    flags: str  # the settings it assumes
    latency_offset: float = 0.0  # a query for now is answered for now minus this
    flush: float = 0.0  # a record reaches the store this long after it is computed
    ingest: float = 0.0  # a stored sample becomes searchable this long after
    query_offset: float = 0.0  # every evaluation at now minus this, results stamped so
    new_series: float = 0.0  # a series the store has not seen before stays hidden this long
    reads_back: bool = True  # a rule reads the records before it from the store, not as computed

    def delay(self, path: tuple[float, ...], new: bool = False) -> float:
        """Seconds this ruler adds between a fault and an alert whose slowest firing path
        reads records with the evaluation intervals ``path`` (``paths``): the latency
        offset once (the scrapes are read late too), and each record read after as many
        of the reading group's evaluations as its write, flush and ingestion take (a new
        series: also the index delay), at least one. A ruler that has a group's records
        when its next rule runs (Prometheus; Mimir, whose write to the ingesters returns
        first) reads them at once. A query offset shifts every rule of the chain alike, so
        it counts once."""
        wait = self.latency_offset + self.flush + self.ingest + (self.new_series if new else 0)
        late = self.latency_offset + self.query_offset
        for every in path if self.reads_back else ():
            late += max(1, math.ceil(wait / every - 1e-9)) * every
        return late


# VictoriaMetrics 1.79 and vmalert (tests/e2e/vm.py measures them)
RULERS = (
    Ruler("vmalert, flags above",
          "-search.latencyOffset=1s, -remoteWrite.flushInterval=1s",
          latency_offset=1.0, flush=1.0, ingest=1.0, new_series=10.0),
    Ruler("vmalert, defaults",
          "-search.latencyOffset=30s, -remoteWrite.flushInterval=5s",
          latency_offset=30.0, flush=5.0, ingest=1.0, new_series=10.0),
    Ruler("Mimir, defaults", "query offset 1m (-ruler.evaluation-delay-duration)",
          query_offset=60.0, reads_back=False),
)
