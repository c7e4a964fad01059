"""Cross-rank alignment: join the records of one collective from every rank of its
communicator, by (communicator, op, coll_sn), and say who arrived last.

Ordering uses each rank's kernel time only (see ``obsgen.nccl``): ranks of a symmetric
collective complete together, so the rank with the shortest kernel arrived last, by the
difference to the next shortest. Host clocks never enter.

Memory is bounded: held collectives expire ``timeout`` seconds after their first record,
or oldest first when more than ``max_records`` records are held. A communicator some of
whose ranks write files this exporter cannot see (another node without a shared
filesystem) is recognised after ``timeout``: its records are then no longer held. A
rank whose records never arrive (the Inspector skipped the collective, the rank died)
therefore costs at most ``timeout`` seconds of its collectives, within ``max_records``.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, NamedTuple

from .inspector import KERNEL_TIMING, SYMMETRIC, Record


class Aligned(NamedTuple):  # a tuple: one is made per aligned collective
    comm: str
    op: str
    group: str
    ranks: list[str]  # rank label of every participant
    last: str | None  # rank label of the last arrival, None when not separable
    skew_s: float  # latest minus earliest arrival
    tail_s: float  # time after the last arrival


class _Pending:
    __slots__ = ("created", "n", "group", "execs")

    def __init__(self, created: float, n: int, group: str):
        self.created = created
        self.n = n
        self.group = group
        self.execs: dict[int, tuple[float, str]] = {}  # comm rank -> (exec us, rank label)


class _Members:
    __slots__ = ("n", "seen", "complete", "first_seen", "last_seen")

    def __init__(self, n: int, now: float):
        self.n = n
        self.seen: set[int] = set()
        self.complete = False  # every comm rank's records have been seen
        self.first_seen = self.last_seen = now


class Aligner:
    def __init__(self, resolution_us: float = 25.0, timeout: float = 60.0,
                 max_records: int = 200_000, clock: Callable[[], float] = time.monotonic):
        self.resolution_us = resolution_us
        self.timeout = timeout
        self.max_records = max_records
        self.clock = clock
        self.pending: OrderedDict[tuple[str, str, int], _Pending] = OrderedDict()
        self.held = 0  # records in pending
        self.members: dict[str, _Members] = {}
        self.now = clock()  # set by tick(); a record's time is that of its batch

    def tick(self) -> float:
        self.now = self.clock()
        return self.now

    @staticmethod
    def alignable(rec: Record) -> bool:
        return rec.n_ranks > 1 and rec.op in SYMMETRIC and rec.timing in KERNEL_TIMING

    def add(self, rec: Record, rank: str, group: str,
            expired: list[str] | None = None) -> Aligned | None:
        """Offer one record (``alignable`` ones only); returns the aligned collective when
        this record completes it. Groups of collectives evicted to stay within
        ``max_records`` go to ``expired``."""
        now = self.now
        comm, comm_rank, n, _, _, _, op, sn, _, exec_us, _, _, _, _ = rec  # unpacked once
        m = self.members.get(comm)
        if m is None or m.n != n:
            m = self.members[comm] = _Members(n, now)
        m.last_seen = now
        if not m.complete:
            m.seen.add(comm_rank)
            if len(m.seen) == m.n:
                m.complete = True
            elif now - m.first_seen >= self.timeout:
                return None  # a rank's file was not visible for a timeout: not joinable here
        key = (comm, op, sn)
        p = self.pending.get(key)
        if p is None:
            p = self.pending[key] = _Pending(now, n, group)
        elif comm_rank in p.execs:
            return None  # the same rank's record twice: keep the first
        p.group = group
        p.execs[comm_rank] = (exec_us, rank)
        self.held += 1
        if len(p.execs) == p.n:
            del self.pending[key]
            self.held -= p.n
            return self._result(comm, op, p)
        while self.held > self.max_records and self.pending:
            _, old = self.pending.popitem(last=False)
            self.held -= len(old.execs)
            if expired is not None:
                expired.append(old.group)
        return None

    def _result(self, comm: str, op: str, p: _Pending) -> Aligned:
        order = sorted(p.execs.values())
        (first, last_rank), (second, _) = order[0], order[1]
        last = last_rank if second - first >= self.resolution_us else None
        return Aligned(comm, op, p.group, [label for _, label in p.execs.values()], last,
                       (order[-1][0] - first) * 1e-6, first * 1e-6)

    def expire(self) -> list[str]:
        """Drop held collectives older than the timeout, and communicators not seen for
        ten timeouts; returns the group of every dropped collective."""
        now = self.tick()
        groups = []
        while self.pending:
            key, p = next(iter(self.pending.items()))
            if now - p.created < self.timeout:
                break
            del self.pending[key]
            self.held -= len(p.execs)
            groups.append(p.group)
        stale = [c for c, m in self.members.items() if now - m.last_seen > 10 * self.timeout]
        for c in stale:
            del self.members[c]
        return groups
