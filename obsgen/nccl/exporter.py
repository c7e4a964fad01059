"""``obsgen nccl-exporter``: the sidecar process.

Every ``--poll-interval`` it reads the group maps and the new lines of the dump
directory (``follow``), counts each record into the series of its rank, op, group and
host (``metrics``), offers it to the alignment (``align``), and every ``--state-interval``
writes the read offsets together with every counter to ``--state-file`` (atomically, in
one file, at a line boundary): a restarted exporter continues its counters from exactly
the lines it had counted, so a restart neither loses nor double-counts a record. Only
collectives that were partly joined at the moment of the restart are not aligned.

Settings come from flags, or from the environment a sidecar shares with the training
container: ``NCCL_INSPECTOR_DUMP_DIR`` (dump directory), ``OBSGEN_JOB_ID`` or
``SLURM_JOB_ID`` (job id, else the group maps' job_id, else ``unknown``), ``NODE_NAME``
(the ``node`` label, else the hostname in the records; in Kubernetes a pod's hostname is
the pod name, so pass the node name through the downward API).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import userfile
from .align import Aligner
from .follow import Follower
from .groups import PREFIX, GroupMapError, Resolver, Rule, UNKNOWN, read_group_map
from .inspector import KERNEL_TIMING, SYMMETRIC, Malformed, bus_bytes, parse
from .metrics import Collector, Store

log = logging.getLogger("obsgen.nccl")
STATE_VERSION = 1
STATE_NAME = ".obsgen-nccl-exporter.state.json"
STATE_LIMIT = 256 << 20  # bytes of a state file read at most (offsets and counters)
MAX_STREAMS = 100_000  # (process, communicator) pairs remembered; oldest dropped


@dataclass
class Options:
    dump_dir: Path
    map_dir: Path | None = None
    state_file: Path | None = None
    job_id: str | None = None
    node: str | None = None
    rules: tuple[Rule, ...] = ()
    world_size: int | None = None
    align_timeout: float = 60.0
    max_pending: int = 200_000
    resolution_us: float = 25.0
    state_interval: float = 10.0
    patterns: tuple[str, ...] = ("*.log", "*.jsonl")
    chunk: int = 1 << 20

    def __post_init__(self):
        self.dump_dir = Path(self.dump_dir)
        self.map_dir = Path(self.map_dir) if self.map_dir else self.dump_dir
        self.state_file = Path(self.state_file) if self.state_file else self.dump_dir / STATE_NAME


class _Op:
    """Per process, communicator and op: the series records go to, the bus-bytes factor,
    and the last coll_sn seen (gaps are collectives the Inspector did not write)."""
    __slots__ = ("series", "bus_factor", "last_sn")

    def __init__(self, series, bus_factor: float, last_sn: int | None):
        self.series, self.bus_factor, self.last_sn = series, bus_factor, last_sn


# The sequence-number key of a stream's Send and Recv records: the Inspector numbers a
# communicator's point-to-point operations with one counter (p2p_sn), both directions.
P2P_SN = "p2p"


class _Stream:
    """The records of one process in one communicator, with their labels resolved once
    (again when the resolver learns something new)."""
    __slots__ = ("rank", "group", "version", "ops", "peers")

    def __init__(self, rank: str, group: str, version: int):
        self.rank, self.group, self.version = rank, group, version
        self.ops: dict[str, _Op] = {}
        self.peers: dict[tuple[str, int], object] = {}  # (op, comm rank) -> peer series


class Exporter:
    def __init__(self, opts: Options, clock=time.monotonic):
        self.opts = opts
        self.clock = clock
        self.store = Store(opts.job_id or UNKNOWN)
        self.follower = Follower(opts.dump_dir, opts.patterns, opts.chunk)
        self.aligner = Aligner(opts.resolution_us, opts.align_timeout, opts.max_pending, clock)
        self.resolver = Resolver(opts.rules, opts.world_size)
        self._maps: dict[str, tuple[int, int]] = {}  # path -> (mtime_ns, size) read
        self._bad_maps: set[tuple[str, int, int]] = set()
        self._streams: dict[tuple[str, int, str], _Stream] = {}  # (host, pid, comm)
        self._saved_sn: dict[tuple[str, int, str, str], int] = {}  # from the state file
        self._job_fixed = opts.job_id is not None
        self._saved_at = clock()
        self._load_state()

    # state ------------------------------------------------------------------------
    def _load_state(self) -> None:
        path = self.opts.state_file
        if not path.exists():
            return
        try:
            doc = userfile.load_json(userfile.read_text(path, limit=STATE_LIMIT), str(path))
            if not isinstance(doc, dict):
                raise userfile.InputError(f"{path}: not a state file (a JSON object)")
        except userfile.InputError as exc:
            log.warning("%s; starting from the files' beginning", exc)
            return
        if doc.get("version") != STATE_VERSION:
            log.warning("%s: state version %r, expected %r; ignored", path, doc.get("version"),
                        STATE_VERSION)
            return
        try:
            saved_job = doc["metrics"].get("job_id")
            files = list(doc["files"])
            saved_sn = {(k[0], int(k[1]), k[2], k[3]): int(v) for k, v in doc["last_sn"]}
            if not self._job_fixed and saved_job not in (None, UNKNOWN):
                self.store.job_id = saved_job
                self._job_fixed = True
            if saved_job != self.store.job_id:
                log.warning("%s: state of job %r, not %r; ignored (the files are read again)",
                            path, saved_job, self.store.job_id)
                return
            self.follower.restore(files)
            self.store.restore(doc["metrics"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            log.warning("%s: malformed state (%s: %s); starting from the files' beginning",
                        path, type(exc).__name__, exc)
            self.follower.restore([])
            return
        self._saved_sn = saved_sn
        log.info("%s: resumed %d files and %d records", path, len(files), self.store.records)

    def save_state(self) -> None:
        """Offsets, sequence numbers and counters, written atomically (temp + rename)."""
        with self.store.lock:
            doc = {"version": STATE_VERSION, "files": self.follower.state(),
                   "last_sn": [[list(k), v] for k, v in self.last_sn().items()],
                   "metrics": self.store.snapshot()}
        path = self.opts.state_file
        if not path.parent.is_dir():
            if path.parent == self.opts.dump_dir:
                return  # the job has not created its dump directory yet: nothing read
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-obsgen-nccl-state")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh, separators=(",", ":"))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._saved_at = self.clock()

    # group maps -------------------------------------------------------------------
    def load_maps(self) -> None:
        try:
            entries = [e for e in os.scandir(self.opts.map_dir)
                       if e.name.startswith(PREFIX) and e.name.endswith(".json")]
        except OSError:  # not there yet, or not listable now: the follower says which
            return
        for e in entries:
            try:
                st = e.stat()
            except OSError:
                continue
            sig = (st.st_mtime_ns, st.st_size)
            if self._maps.get(e.path) == sig or (e.path, *sig) in self._bad_maps:
                continue
            try:
                pm = read_group_map(e.path)
            except GroupMapError as exc:
                self._bad_maps.add((e.path, *sig))
                log.warning("%s", exc)
                continue
            self._maps[e.path] = sig
            self.resolver.add_map(pm)
            if not self._job_fixed and pm.job_id and self.store.records == 0:
                self.store.job_id = pm.job_id
                self._job_fixed = True

    # records ----------------------------------------------------------------------
    def last_sn(self) -> dict[tuple[str, int, str, str], int]:
        out = dict(self._saved_sn)
        for (host, pid, comm), stream in self._streams.items():
            for op, o in stream.ops.items():
                if o.last_sn is not None:
                    out[(host, pid, comm, op)] = o.last_sn
        return out

    def _stream(self, rec, key) -> _Stream:
        res = self.resolver
        rank = res.rank(rec.hostname, rec.pid, rec.comm_rank, rec.n_ranks)
        group = res.group(rec.comm, rec.hostname, rec.pid, rec.comm_rank, rec.n_ranks, rec.nnodes,
                          rec.comm_name)
        old = self._streams.get(key)
        s = self._streams[key] = _Stream(rank, group, res.version)
        if old is not None:  # labels changed: keep the sequence numbers
            for op, o in old.ops.items():
                self._saved_sn[(*key, op)] = o.last_sn
        elif len(self._streams) > MAX_STREAMS:
            del self._streams[next(iter(self._streams))]
        self.store.communicator(rank, group, self.opts.node or rec.hostname, rec.n_ranks)
        return s

    def _handle(self, line: bytes, expired: list[str]) -> None:
        try:
            rec = parse(line)
        except Malformed:
            self.store.parse_errors += 1
            return
        self._job_fixed = True
        comm, _, n_ranks, _, host, pid, op, sn, size, exec_us, timing, busbw, _, peer = rec
        key = (host, pid, comm)
        s = self._streams.get(key)
        if s is None or s.version != self.resolver.version:
            s = self._stream(rec, key)
        o = s.ops.get(op)
        if o is None:
            o = s.ops[op] = _Op(self.store.series(s.rank, op, s.group), bus_bytes(op, 1, n_ranks),
                                self._saved_sn.pop((*key, op), None))
        seq = o
        if peer >= 0:  # Send or Recv (2.30+): one sequence for both
            seq = s.ops.get(P2P_SN)
            if seq is None:
                seq = s.ops[P2P_SN] = _Op(None, 0.0, self._saved_sn.pop((*key, P2P_SN), None))
        gap, last = 0, seq.last_sn
        if last is None or sn > last:
            if last is not None:
                gap = sn - last - 1
            seq.last_sn = sn
        self.store.record(o.series, exec_us, size, size * o.bus_factor, busbw, gap)
        if peer >= 0:
            self._p2p(s, comm, op, peer, exec_us, size)
        elif n_ranks > 1 and op in SYMMETRIC and timing in KERNEL_TIMING:
            done = self.aligner.add(rec, s.rank, s.group, expired)
            if done is not None:
                self.store.aligned(done.op, done.group, done.ranks, done.last, done.skew_s,
                                   done.tail_s)

    def _p2p(self, s: _Stream, comm: str, op: str, peer: int, exec_us: float, size: int) -> None:
        """A Send or Recv into the series of its peer; a peer whose global rank is not known
        yet is looked up again on its next record."""
        pk = (op, peer)
        ps = s.peers.get(pk)
        if ps is None:
            label = self.resolver.peer(comm, peer)
            ps = self.store.peer_series(s.rank, op, s.group, label)
            if label != UNKNOWN:
                s.peers[pk] = ps
        ps.add(exec_us, size)

    def step(self, budget: float = 0.5) -> int:
        """One poll: group maps, then new lines until none is left or ``budget`` seconds
        passed; expiry, gauges, and the state when due. Returns lines read."""
        self.load_maps()
        start, n = self.clock(), 0
        while True:
            batch = 0
            expired: list[str] = []
            self.aligner.tick()
            with self.store.lock:
                for _, line in self.follower.poll():
                    self._handle(line, expired)
                    batch += 1
                self.store.parse_errors += self.follower.take_cut_lines()
                for group in expired:
                    self.store.expired(group)
            n += batch
            if batch == 0 or self.clock() - start > budget:
                break
        with self.store.lock:
            for group in self.aligner.expire():
                self.store.expired(group)
            self.store.pending = len(self.aligner.pending)
            self.store.files = len(self.follower.files)
        if self.clock() - self._saved_at >= self.opts.state_interval:
            self.save_state()
        return n

    def drain(self) -> int:
        """Read everything there is (tests, ``--once``)."""
        total = 0
        while (n := self.step(budget=3600)):
            total += n
        return total

    def close(self) -> None:
        self.save_state()
        self.follower.close()


# command line -------------------------------------------------------------------------
def _rule(text: str) -> Rule:
    try:
        return Rule.parse(text)
    except GroupMapError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind):
    def conv(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return v
    return conv


def add_arguments(p: argparse.ArgumentParser) -> None:
    env = os.environ.get
    p.add_argument("--dump-dir", default=env("NCCL_INSPECTOR_DUMP_DIR"),
                   help="the Inspector's NCCL_INSPECTOR_DUMP_DIR (default: that variable)")
    p.add_argument("--port", type=int, default=9410, help="metrics port (default 9410)")
    p.add_argument("--address", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    p.add_argument("--job-id", default=env("OBSGEN_JOB_ID") or env("SLURM_JOB_ID"),
                   help="job_id label (default: $OBSGEN_JOB_ID, $SLURM_JOB_ID, the group maps)")
    p.add_argument("--node", default=env("NODE_NAME"),
                   help="node label (default: $NODE_NAME, else the hostname in the records)")
    p.add_argument("--group-map-dir", help="where the job writes obsgen-groups-*.json "
                   "(default: the dump directory)")
    p.add_argument("--group-rule", type=_rule, action="append", default=[],
                   metavar="NAME:n_ranks=N[,nnodes=M][,comm_name=GLOB]",
                   help="name communicators of this shape or NCCL name when no group map does, "
                   "before the built-in names (repeatable; first match wins)")
    p.add_argument("--world-size", type=_positive(int),
                   help="a communicator of this size gives a process's global rank")
    p.add_argument("--state-file", help=f"offsets and counters (default: DUMP_DIR/{STATE_NAME})")
    p.add_argument("--poll-interval", type=_positive(float), default=1.0, help="seconds (1)")
    p.add_argument("--state-interval", type=_positive(float), default=10.0,
                   help="seconds between state saves (10)")
    p.add_argument("--align-timeout", type=_positive(float), default=60.0,
                   help="seconds a partly joined collective is kept (60)")
    p.add_argument("--max-pending", type=_positive(int), default=200_000,
                   help="records held for alignment at most (200000)")
    p.add_argument("--arrival-resolution-us", type=_positive(float), default=25.0,
                   help="name a last arrival only this far behind the next-to-last (25)")
    p.add_argument("--once", action="store_true",
                   help="read what is there, print the metrics, save the state and exit")


def options(args: argparse.Namespace) -> Options:
    return Options(dump_dir=Path(args.dump_dir), map_dir=args.group_map_dir,
                   state_file=args.state_file, job_id=args.job_id, node=args.node,
                   rules=tuple(args.group_rule), world_size=args.world_size,
                   align_timeout=args.align_timeout, max_pending=args.max_pending,
                   resolution_us=args.arrival_resolution_us, state_interval=args.state_interval)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
    from prometheus_client import start_http_server

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s obsgen-nccl-exporter %(levelname)s %(message)s")
    if not args.dump_dir:
        print("obsgen nccl-exporter: --dump-dir (or NCCL_INSPECTOR_DUMP_DIR) is required",
              file=sys.stderr)
        return 2
    opts = options(args)
    try:
        userfile.check_dir(opts.dump_dir, "--dump-dir")
        userfile.check_dir(opts.map_dir, "--group-map-dir")
        if opts.state_file.is_dir():
            raise userfile.InputError(f"{opts.state_file}: --state-file: is a directory")
    except userfile.InputError as exc:
        print(f"obsgen nccl-exporter: {exc}", file=sys.stderr)
        return 2
    exporter = Exporter(opts)
    registry = CollectorRegistry()
    registry.register(Collector(exporter.store))
    ProcessCollector(registry=registry)
    if args.once:
        exporter.drain()
        exporter.close()
        sys.stdout.write(generate_latest(registry).decode())
        return 0
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server, _ = start_http_server(args.port, addr=args.address, registry=registry)
    log.info("following %s, serving metrics on %s:%d", opts.dump_dir, args.address,
             server.server_port)
    try:
        while not stop.is_set():
            exporter.step()
            stop.wait(args.poll_interval)
    finally:
        exporter.close()
        server.shutdown()
        log.info("stopped; state saved to %s", opts.state_file)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="obsgen-nccl-exporter", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
