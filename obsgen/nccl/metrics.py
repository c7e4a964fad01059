"""The exporter's series: plain counters and bucket arrays, served by a prometheus_client
collector and saved with the read offsets so a restart continues every counter.

prometheus_client's Counter and Histogram cannot be restored to a value after a restart
and lock on every observation; this store is updated by one thread (the reader) and read
by the HTTP thread under ``lock``.
"""
from __future__ import annotations

import threading
from bisect import bisect_left
from typing import Iterator

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.utils import floatToGoString

from ..contract import COUNTER, GAUGE, HISTOGRAM, M, Metric

# Finite upper bounds from the contract; +Inf is the count. The skew and tail histograms
# share the duration's buckets.
_SECONDS = M.nccl_collective_duration_seconds.buckets[:-1]
_BUSBW = M.nccl_bus_bandwidth_gbytes_per_second.buckets[:-1]
assert (M.nccl_collective_arrival_skew_seconds.buckets[:-1] == _SECONDS
        == M.nccl_collective_tail_seconds.buckets[:-1])


class _Hist:
    __slots__ = ("counts", "sum")

    def __init__(self, n: int):
        self.counts = [0] * (n + 1)  # per bucket, not cumulative; last is above every bound
        self.sum = 0.0


class _PerRank:
    """Every per-(job_id, rank, op, group, node) series of recorded collectives, in one
    object so a record costs one dict lookup. The node is the host the rank's records name,
    as on the alignment counters: rules that need the host of a rank's collectives (the
    all-reduce windows per host) then need no join over every rank to find it."""
    __slots__ = ("duration", "bytes", "bus_bytes", "busbw", "unrecorded")

    def __init__(self):
        self.duration = _Hist(len(_SECONDS))
        self.bytes = 0.0
        self.bus_bytes = 0.0
        self.busbw = _Hist(len(_BUSBW))
        self.unrecorded = 0


class _Aligned:
    """The alignment counters of one (rank, group, node), every op of the group together:
    the late-arrival rule reads them per group, and per op a 16,384-rank job had twice the
    series to read at every evaluation. The node is the host the rank's records name."""
    __slots__ = ("aligned", "last")

    def __init__(self, aligned: int = 0, last: int = 0):
        self.aligned = aligned
        self.last = last


class _PerPeer:
    """Send or Recv of one (rank, op, group, peer, node): kernel seconds, bytes, transfers."""
    __slots__ = ("seconds", "bytes", "transfers")

    def __init__(self, seconds: float = 0.0, nbytes: float = 0.0, transfers: int = 0):
        self.seconds, self.bytes, self.transfers = seconds, nbytes, transfers

    def add(self, exec_us: float, size: int) -> None:
        self.seconds += exec_us * 1e-6
        self.bytes += size
        self.transfers += 1


# Peers with their own series per (rank, op, group); the rest are counted as peer="other".
# A pipeline stage has two neighbours (more with an interleaved schedule); an all-to-all
# that NCCL runs as grouped Send/Recv has one peer per member, which must not multiply
# the series by the group's size.
MAX_PEERS = 8
OTHER = "other"


class _PerGroup:
    __slots__ = ("skew", "tail")

    def __init__(self):
        self.skew = _Hist(len(_SECONDS))
        self.tail = _Hist(len(_SECONDS))


def _observe(h: _Hist, bounds: tuple, v: float) -> None:
    h.counts[bisect_left(bounds, v)] += 1  # le is inclusive: v == bound lands in it
    h.sum += v


class Store:
    def __init__(self, job_id: str):
        self.job_id = job_id
        self.lock = threading.Lock()
        self.ranks: dict[tuple[str, str, str, str], _PerRank] = {}  # (rank, op, group, node)
        self.alignment: dict[tuple[str, str, str], _Aligned] = {}  # (rank, group, node)
        self.nodes: dict[str, str] = {}  # rank -> the host its records name
        self.groups: dict[tuple[str, str], _PerGroup] = {}  # (op, group)
        self.comm_ranks: dict[tuple[str, str, str], int] = {}  # (rank, group, node) -> n
        self.peers: dict[tuple[str, str, str, str, str], _PerPeer] = {}  # (rank, op, group, peer, node)
        self._peer_count: dict[tuple[str, str, str, str], int] = {}  # (rank, op, group, node)
        self.records = 0
        self.parse_errors = 0
        self.incomplete: dict[str, int] = {}  # group -> collectives
        self.pending = 0
        self.files = 0

    def series(self, rank: str, op: str, group: str) -> _PerRank:
        key = (rank, op, group, self.nodes.get(rank, ""))
        s = self.ranks.get(key)
        if s is None:
            s = self.ranks[key] = _PerRank()
        return s

    def peer_series(self, rank: str, op: str, group: str, peer: str) -> _PerPeer:
        node = self.nodes.get(rank, "")
        key = (rank, op, group, peer, node)
        s = self.peers.get(key)
        if s is not None:
            return s
        if peer != OTHER:
            owner = (rank, op, group, node)
            n = self._peer_count.get(owner, 0)
            if n >= MAX_PEERS:
                return self.peer_series(rank, op, group, OTHER)
            self._peer_count[owner] = n + 1
        s = self.peers[key] = _PerPeer()
        return s

    def alignment_of(self, rank: str, group: str) -> _Aligned:
        key = (rank, group, self.nodes.get(rank, ""))
        a = self.alignment.get(key)
        if a is None:
            a = self.alignment[key] = _Aligned()
        return a

    # updates (reader thread, under lock) ------------------------------------------------
    def communicator(self, rank: str, group: str, node: str, n_ranks: int) -> None:
        key = (rank, group, node)
        if self.comm_ranks.get(key, n_ranks + 1) > n_ranks:
            self.comm_ranks[key] = n_ranks
        self.nodes[rank] = node

    def record(self, s: _PerRank, exec_us: float, size: int, bus: float,
               busbw: float | None, unrecorded: int) -> None:
        """One recorded collective into the series ``s`` (from ``series()``)."""
        h, secs = s.duration, exec_us * 1e-6  # _observe inlined: this runs for every record
        h.counts[bisect_left(_SECONDS, secs)] += 1
        h.sum += secs
        s.bytes += size
        s.bus_bytes += bus
        if busbw is not None:
            h = s.busbw
            h.counts[bisect_left(_BUSBW, busbw)] += 1
            h.sum += busbw
        if unrecorded:
            s.unrecorded += unrecorded
        self.records += 1

    def aligned(self, op: str, group: str, ranks: list[str], last: str | None,
                skew_s: float, tail_s: float) -> None:
        for r in ranks:
            self.alignment_of(r, group).aligned += 1
        if last is not None:
            self.alignment_of(last, group).last += 1
        key = (op, group)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = _PerGroup()
        _observe(g.skew, _SECONDS, skew_s)
        _observe(g.tail, _SECONDS, tail_s)

    def expired(self, group: str, n: int = 1) -> None:
        self.incomplete[group] = self.incomplete.get(group, 0) + n

    # persistence --------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Every counter and histogram as plain data (JSON-able); gauges are not saved."""
        return {
            "job_id": self.job_id, "records": self.records, "parse_errors": self.parse_errors,
            "incomplete": dict(self.incomplete),
            "ranks": [[list(k), s.duration.counts, s.duration.sum, s.bytes, s.bus_bytes,
                       s.busbw.counts, s.busbw.sum, s.unrecorded]
                      for k, s in self.ranks.items()],
            "alignment": [[list(k), a.aligned, a.last] for k, a in self.alignment.items()],
            "groups": [[list(k), g.skew.counts, g.skew.sum, g.tail.counts, g.tail.sum]
                       for k, g in self.groups.items()],
            "peers": [[list(k), p.seconds, p.bytes, p.transfers] for k, p in self.peers.items()],
        }

    def restore(self, snap: dict) -> None:
        """Counters from a snapshot of the same job with the same buckets; anything else is
        ignored (the counters then start from zero, as after any counter reset)."""
        if snap.get("job_id") != self.job_id:
            return
        ranks, groups, alignment = {}, {}, {}
        for row in snap["ranks"]:
            # A state file from before these series named the node has (rank, op, group)
            # keys (and, older still, the alignment counters per op in these rows). They
            # are not carried over: the new label sets are new series to Prometheus, whose
            # increase() reads nothing from a new series' first value, so they start anew
            # like after a reset.
            if len(row[0]) != 4:
                continue
            k, dc, dsum, b, bb, wc, wsum, unrec = row
            if len(dc) != len(_SECONDS) + 1 or len(wc) != len(_BUSBW) + 1:
                return
            s = _PerRank()
            s.duration.counts, s.duration.sum = list(dc), float(dsum)
            s.bytes, s.bus_bytes = float(b), float(bb)
            s.busbw.counts, s.busbw.sum = list(wc), float(wsum)
            s.unrecorded = int(unrec)
            ranks[tuple(k)] = s
        for (rank, group, node), al, last in snap.get("alignment", []):
            alignment[(rank, group, node)] = _Aligned(int(al), int(last))
        for k, sc, ssum, tc, tsum in snap["groups"]:
            if len(sc) != len(_SECONDS) + 1 or len(tc) != len(_SECONDS) + 1:
                return
            g = _PerGroup()
            g.skew.counts, g.skew.sum = list(sc), float(ssum)
            g.tail.counts, g.tail.sum = list(tc), float(tsum)
            groups[tuple(k)] = g
        peers, peer_count = {}, {}
        for k, sec, nbytes, transfers in snap.get("peers", []):  # absent before 2.30 support
            rank, op, group, peer, node = k
            peers[(rank, op, group, peer, node)] = _PerPeer(float(sec), float(nbytes), int(transfers))
            if peer != OTHER:
                owner = (rank, op, group, node)
                peer_count[owner] = peer_count.get(owner, 0) + 1
        records, parse_errors = int(snap["records"]), int(snap["parse_errors"])
        incomplete = {str(k): int(v) for k, v in snap["incomplete"].items()}
        # all or nothing: a snapshot that fails above leaves the store as it was
        self.ranks, self.groups, self.alignment = ranks, groups, alignment
        self.peers, self._peer_count = peers, peer_count
        self.records, self.parse_errors, self.incomplete = records, parse_errors, incomplete


def _hist_buckets(counts: list[int], bounds: tuple) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs, le written as prometheus_client writes it."""
    out, acc = [], 0
    for le, c in zip(bounds, counts):
        acc += c
        out.append((floatToGoString(le), acc))
    out.append(("+Inf", acc + counts[-1]))
    return out


def _family(metric: Metric):
    """An empty metric family for a contract metric, its help text from the contract."""
    if metric.type == COUNTER:  # prometheus_client appends _total itself
        return CounterMetricFamily(metric.key.removesuffix("_total"), metric.help,
                                   labels=metric.labels)
    if metric.type == GAUGE:
        return GaugeMetricFamily(metric.key, metric.help, labels=metric.labels)
    assert metric.type == HISTOGRAM
    return HistogramMetricFamily(metric.key, metric.help, labels=metric.labels)


class Collector:
    """prometheus_client collector over a Store."""

    def __init__(self, store: Store):
        self.store = store

    def describe(self):
        return []  # unchecked collector: series are known only at collect time

    def collect(self) -> Iterator:
        st = self.store
        job = st.job_id
        with st.lock:
            rank_items = [(k, s.duration.counts[:], s.duration.sum, s.bytes, s.bus_bytes,
                           s.busbw.counts[:], s.busbw.sum, s.unrecorded)
                          for k, s in st.ranks.items()]
            align_items = [(k, a.aligned, a.last) for k, a in st.alignment.items()]
            group_items = [(k, g.skew.counts[:], g.skew.sum, g.tail.counts[:], g.tail.sum)
                           for k, g in st.groups.items()]
            comm_ranks = dict(st.comm_ranks)
            peer_items = [(k, p.seconds, p.bytes, p.transfers) for k, p in st.peers.items()]
            scalars = (st.records, st.parse_errors, dict(st.incomplete), st.pending, st.files)
        dur, byt, bus, bw, aligned, last, unrec = (_family(m) for m in (
            M.nccl_collective_duration_seconds, M.nccl_collective_bytes_total,
            M.nccl_collective_bus_bytes_total, M.nccl_bus_bandwidth_gbytes_per_second,
            M.nccl_collective_aligned_total, M.nccl_collective_last_arrival_total,
            M.obsgen_nccl_collectives_unrecorded_total))
        for (rank, op, group, node), dc, dsum, b, bb, wc, wsum, un in sorted(rank_items):
            labels = [job, rank, op, group, node]
            dur.add_metric(labels, _hist_buckets(dc, _SECONDS), dsum)
            byt.add_metric(labels, b)
            bus.add_metric(labels, bb)
            bw.add_metric(labels, _hist_buckets(wc, _BUSBW), wsum)
            unrec.add_metric(labels, un)
        for (rank, group, node), al, la in sorted(align_items):
            aligned.add_metric([job, rank, group, node], al)
            last.add_metric([job, rank, group, node], la)
        yield from (dur, byt, bus, bw, aligned, last, unrec)
        skew = _family(M.nccl_collective_arrival_skew_seconds)
        tail = _family(M.nccl_collective_tail_seconds)
        for (op, group), sc, ssum, tc, tsum in sorted(group_items):
            skew.add_metric([job, op, group], _hist_buckets(sc, _SECONDS), ssum)
            tail.add_metric([job, op, group], _hist_buckets(tc, _SECONDS), tsum)
        yield from (skew, tail)
        p_sec, p_bytes, p_n = (_family(m) for m in (
            M.nccl_p2p_seconds_total, M.nccl_p2p_bytes_total, M.nccl_p2p_transfers_total))
        for (rank, op, group, peer, node), sec, nbytes, n in sorted(peer_items):
            labels = [job, rank, op, group, peer, node]
            p_sec.add_metric(labels, sec)
            p_bytes.add_metric(labels, nbytes)
            p_n.add_metric(labels, n)
        yield from (p_sec, p_bytes, p_n)
        size = _family(M.nccl_communicator_ranks)
        for (rank, group, node), n in sorted(comm_ranks.items()):
            size.add_metric([job, rank, group, node], n)
        yield size
        records, errors, incomplete, pending, files = scalars
        for metric, value in ((M.obsgen_nccl_records_total, records),
                              (M.obsgen_nccl_parse_errors_total, errors),
                              (M.obsgen_nccl_alignment_pending, pending),
                              (M.obsgen_nccl_files, files)):
            fam = _family(metric)
            fam.add_metric([job], value)
            yield fam
        inc = _family(M.obsgen_nccl_alignment_incomplete_total)
        for group, n in sorted(incomplete.items()):
            inc.add_metric([job, group], n)
        yield inc

