"""A synthetic multi-rank job that writes NCCL Inspector dump files, for the sidecar's tests
and benchmark. The format follows obsgen.nccl's description of Inspector v4.0 output; the
physics is the one the alignment relies on: a rank's kernel starts when it arrives, every
rank's kernel ends when the last arrival's transfer is done (within ``completion_jitter_us``),
and each host writes its own clock (``clock_offset_us``) into every timestamp.

    job = InspectorJob(ranks=8, per_node=4, tp=4, late={5: 3000.0})
    job.write_group_maps(dump_dir)
    truth = job.run(dump_dir, steps=50)     # files <host>-pid<pid>.log, one per rank
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from obsgen.nccl.groups import write_group_map
from obsgen.nccl.inspector import dumps


@dataclass(frozen=True)
class Proc:
    rank: int
    hostname: str
    pid: int


@dataclass(frozen=True)
class Comm:
    id: str
    group: str
    ranks: tuple[int, ...]  # global ranks in comm-rank order
    nnodes: int


@dataclass
class Truth:
    """What happened, for the tests to compare the exporter with."""
    records: int = 0
    bytes: dict = field(default_factory=dict)  # (rank, op, group) -> bytes
    last: dict = field(default_factory=dict)  # (rank, group) -> collectives it was last in
    aligned: dict = field(default_factory=dict)  # (rank, group) -> collectives written by all
    skews_us: dict = field(default_factory=dict)  # group -> true skew of its aligned collectives
    naive_last: dict = field(default_factory=dict)  # last by host start timestamps (wrong w/ offsets)
    unrecorded: dict = field(default_factory=dict)  # (rank, op, group) -> collectives not written
    lines: dict = field(default_factory=dict)  # path -> list of lines


@dataclass
class InspectorJob:
    ranks: int = 8
    per_node: int = 4
    tp: int = 4  # consecutive ranks form a TP group; rank r and r+tp, ... form DP groups
    inner: str = "tp"  # the name of the groups of consecutive ranks (e.g. ep for MoE experts)
    job_id: str = "llm-pretrain-a"
    late: dict = field(default_factory=dict)  # global rank -> extra microseconds before arriving
    noise_us: float = 200.0  # per-collective arrival noise (uniform 0..noise)
    service_us: float = 800.0  # transfer after the last arrival
    completion_jitter_us: float = 4.0  # ranks finish within this of each other
    clock_offset_us: dict = field(default_factory=dict)  # hostname -> host clock offset
    timing: str | None = "kernel_gpu"
    verbose: bool = True
    size: int = 64 << 20  # bytes per collective
    skip: dict = field(default_factory=dict)  # global rank -> set of step numbers not written
    seed: int = 1

    def __post_init__(self):
        self.procs = [Proc(r, f"gpu-node-{r // self.per_node:03d}", 4000 + r)
                      for r in range(self.ranks)]
        nodes = lambda rs: len({r // self.per_node for r in rs})
        self.comms: list[Comm] = []
        for start in range(0, self.ranks, self.tp):
            rs = tuple(range(start, start + self.tp))
            self.comms.append(Comm(f"0x{0x7f8c496ae9f600 + start:x}", self.inner, rs, nodes(rs)))
        for first in range(self.tp):
            rs = tuple(range(first, self.ranks, self.tp))
            if len(rs) > 1:
                self.comms.append(Comm(f"0x{0x5d0000aa00ff00 + first:x}", "dp", rs, nodes(rs)))

    def path(self, dump_dir: Path, proc: Proc) -> Path:
        return Path(dump_dir) / f"{proc.hostname}-pid{proc.pid}.log"

    def write_group_maps(self, directory: Path, with_comm_ids: bool = False) -> None:
        for p in self.procs:
            groups = {}
            for c in self.comms:
                if p.rank in c.ranks:
                    groups[c.group] = ({"ranks": list(c.ranks), "comm_id": c.id}
                                       if with_comm_ids else list(c.ranks))
            write_group_map(directory, rank=p.rank, world_size=self.ranks, groups=groups,
                            job_id=self.job_id, hostname=p.hostname, pid=p.pid)

    def run(self, dump_dir: Path, steps: int, op: str = "AllReduce", start_step: int = 0,
            truth: Truth | None = None, write: bool = True, ops: dict | None = None) -> Truth:
        """Write ``steps`` collectives on every communicator (appending to the files): ``op``,
        or ``ops[group]`` for the groups ``ops`` names."""
        rng = random.Random(self.seed * 1000003 + start_step)
        default_op = op
        truth = truth or Truth()
        lines: dict[Path, list[str]] = {}
        t0 = 1_752_867_229_000_000 + start_step * 250_000
        for step in range(start_step, start_step + steps):
            base = t0 + (step - start_step) * 250_000
            for c in self.comms:
                op = (ops or {}).get(c.group, default_op)
                arrive = {r: base + rng.uniform(0, self.noise_us) + self.late.get(r, 0.0)
                          for r in c.ranks}
                done = max(arrive.values()) + self.service_us
                written = [r for r in c.ranks if step not in self.skip.get(r, ())]
                for r in c.ranks:
                    key = (str(r), op, c.group)
                    if r not in written:
                        truth.unrecorded[key] = truth.unrecorded.get(key, 0) + 1
                        continue
                    proc = self.procs[r]
                    off = self.clock_offset_us.get(proc.hostname, 0.0)
                    end = done + rng.uniform(0, self.completion_jitter_us)
                    exec_us = int(end - arrive[r])
                    perf = {"coll": op, "coll_sn": step, "coll_msg_size_bytes": self.size,
                            "coll_exec_time_us": exec_us}
                    if self.timing is not None:
                        perf["coll_timing_source"] = self.timing
                    algbw = self.size / 1e9 / (exec_us / 1e6)
                    perf["coll_algobw_gbs"] = round(algbw, 6)
                    n = len(c.ranks)  # nccl-tests' bus bandwidth (PERFORMANCE.md)
                    factor = {"AllReduce": 2 * (n - 1) / n, "AllGather": (n - 1) / n,
                              "ReduceScatter": (n - 1) / n}.get(op, 1.0)
                    perf["coll_busbw_gbs"] = round(algbw * factor, 6)
                    if self.verbose:
                        perf["event_trace_sn"] = {"coll_start_sn": 1, "coll_stop_sn": 2,
                                                  "kernel_events": [{"channel_id": 0, "kernel_start_sn": 3,
                                                                     "kernel_stop_sn": 5, "kernel_record_sn": 4}]}
                        perf["event_trace_ts"] = {
                            "coll_start_ts": int(arrive[r] - 150 + off),
                            "coll_stop_ts": int(arrive[r] - 145 + off),
                            "kernel_events": [{"channel_id": 0,
                                               "kernel_start_ts": int(arrive[r] + off),
                                               "kernel_stop_ts": int(end + off),
                                               "kernel_record_ts": int(end + off)}]}
                    line = dumps({"id": c.id, "rank": c.ranks.index(r), "n_ranks": len(c.ranks),
                                  "nnodes": c.nnodes},
                                 {"inspector_output_format_version": "v4.0", "git_rev": "",
                                  "rec_mechanism": "nccl_profiler_interface",
                                  "dump_timestamp_us": int(end + off + 300),
                                  "hostname": proc.hostname, "pid": proc.pid}, perf)
                    lines.setdefault(self.path(dump_dir, proc), []).append(line)
                    truth.records += 1
                    truth.bytes[key] = truth.bytes.get(key, 0) + self.size
                if len(written) == len(c.ranks):
                    last = max(c.ranks, key=lambda r: arrive[r])
                    for r in c.ranks:
                        k = (str(r), c.group)
                        truth.aligned[k] = truth.aligned.get(k, 0) + 1
                    k = (str(last), c.group)
                    truth.last[k] = truth.last.get(k, 0) + 1
                    truth.skews_us.setdefault(c.group, []).append(
                        max(arrive.values()) - min(arrive.values()))
                    naive = max(c.ranks, key=lambda r: arrive[r] + self.clock_offset_us.get(
                        self.procs[r].hostname, 0.0))
                    k = (str(naive), op, c.group)
                    truth.naive_last[k] = truth.naive_last.get(k, 0) + 1
        if write:
            Path(dump_dir).mkdir(parents=True, exist_ok=True)
            for path, ls in lines.items():
                with open(path, "a") as fh:
                    fh.write("".join(l + "\n" for l in ls))
        for path, ls in lines.items():
            truth.lines.setdefault(str(path), []).extend(ls)
        return truth
