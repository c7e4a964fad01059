"""Which parallel group a communicator belongs to, and which global rank a process is.

The group map
-------------
Each training process writes one file when it has created its process groups, into the
Inspector's dump directory (or the directory given to the exporter as
``--group-map-dir``)::

    obsgen-groups-<hostname>-pid<pid>.json
    {"format": "obsgen.nccl.groups/v1", "job_id": "llm-a", "hostname": "node-7",
     "pid": 4242, "rank": 9, "world_size": 32,
     "groups": [{"group": "tp", "ranks": [8, 9, 10, 11, 12, 13, 14, 15], "comm_id": null},
                {"group": "dp", "ranks": [1, 9], "comm_id": "0x7f8c496ae9f661"}]}

``hostname`` and ``pid`` are what the Inspector writes in its metadata
(``socket.gethostname()`` and ``os.getpid()`` of the same process), so the exporter can
tell which file is which process. ``ranks`` are global ranks in *group-rank order*, the
order ``torch.distributed.get_process_group_ranks(group)`` returns (rank i of the
communicator is ``ranks[i]``). ``comm_id`` is the NCCL communicator hash as the Inspector
prints it (``0x%lx``) when the job knows it, else null; ``obsgen.nccl`` explains why it
usually does not. Call it from the job, e.g. after Megatron's
``initialize_model_parallel``::

    from megatron.core import parallel_state as ps
    import torch.distributed as dist
    write_group_map(os.environ["NCCL_INSPECTOR_DUMP_DIR"], rank=dist.get_rank(),
                    world_size=dist.get_world_size(), job_id=job_id, groups={
                        "tp": dist.get_process_group_ranks(ps.get_tensor_model_parallel_group()),
                        "pp": dist.get_process_group_ranks(ps.get_pipeline_model_parallel_group()),
                        "dp": dist.get_process_group_ranks(ps.get_data_parallel_group()),
                    })

Naming a communicator (``Resolver``)
------------------------------------
1. A group whose ``comm_id`` equals the record's communicator id.
2. Membership: for every process seen in the communicator, the declared groups with
   ``n_ranks`` members whose member at the process's comm rank is the process's global
   rank. When exactly one group name fits every process seen so far, that is the group
   (fixed from then on). When two names fit (e.g. dp and tp of equal size, seen only
   from rank 0 of both), the communicator's ``nnodes`` decides if exactly one of them
   spans that many hosts (counted from the hostnames in the group maps of all its
   members): TP within a node and DP across nodes are told apart from rank 0's first
   record. Otherwise it is not decided yet.
3. ``--group-rule NAME:COND[,COND...]``: the first rule whose conditions all hold, with
   conditions ``n_ranks=N``, ``nnodes=M`` and ``comm_name=GLOB`` (a shell pattern on the
   communicator's name, e.g. ``tp:comm_name=tensor_parallel*``).
4. The communicator's name (``header.comm_name``, NCCL 2.30+), by ``COMM_NAMES``: see
   below.
5. ``unknown``.

Communicator ids
----------------
The Inspector prints the communicator hash with ``snprintf(buf, 17, "0x%lx", hash)``: at
most 14 hex digits survive, so hash ``0x7f8c496ae9f66123`` is written
``0x7f8c496ae9f661``. A group map may give either form (NCCL's own logs and
``ncclCommGetUniqueHash`` print all 16): ids are compared by ``comm_key``, the written
form.

Communicator names
------------------
Since NCCL 2.30 every record's header carries ``comm_name``, the name the communicator
was created with (``ncclConfig_t.commName``), or ``unknown`` when it was given none.
PyTorch sets it from the process group (``"<group_desc>:<group_name>"``, or a name set
through ``ProcessGroupNCCL.Options().config.comm_name``) in versions that pass it;
Megatron-LM describes each group it creates (``group_desc=...`` in
``megatron/core/parallel_state.py``), and ``torch.distributed.DeviceMesh`` describes a
mesh dimension's group as ``mesh_<dim name>``. The part before the first ``:`` is looked
up, case-insensitively, in ``COMM_NAMES``; Megatron's ``HIERARCHICAL_<desc>_L<n>`` groups
take the group of ``<desc>``. A name not in the table (``unknown`` included) leaves the
communicator to the last step. The table is printed in docs/nccl.md.

A process's global rank comes from its group map, else from a communicator whose size is
the world size (its comm rank is then the global rank), else it is ``unknown``.
"""
from __future__ import annotations

import json
import os
import re
from fnmatch import fnmatchcase
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .. import userfile

FORMAT = "obsgen.nccl.groups/v1"
PREFIX = "obsgen-groups-"
MAP_LIMIT = 16 << 20  # bytes of a group map read at most (one process's groups)
UNKNOWN = "unknown"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
COMM_RE = re.compile(r"^0x[0-9a-f]{1,16}$")
COMM_DIGITS = 14  # hex digits of a communicator id the Inspector writes (17-byte buffer)

# Communicator names (the part before ':', upper-cased) -> group label. Megatron-LM's
# group descriptions (megatron/core/parallel_state.py), then DeviceMesh's mesh_<dim> for
# the dimension names torchtitan and the DeviceMesh docs use. The groups the rules read
# are dp, tp, pp, ep, cp and fsdp; the rest name Megatron's composite groups so their
# traffic is not "unknown" on the dashboards.
COMM_NAMES: dict[str, str] = {
    "TENSOR_MODEL_PARALLEL_GROUP": "tp",
    "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
    "DATA_PARALLEL_GROUP": "dp",
    "DATA_PARALLEL_GROUP_WITH_CP": "dp",
    "INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP": "dp",
    "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP": "dp",
    "DATA_PARALLEL_GROUP_WITH_CP_AG": "dp",
    "CONTEXT_PARALLEL_GROUP": "cp",
    "EXPERT_MODEL_PARALLEL_GROUP": "ep",
    "EXPERT_DATA_PARALLEL_GROUP": "edp",
    "EXPERT_DATA_PARALLEL_GROUP_AG": "edp",
    "EXPERT_TENSOR_PARALLEL_GROUP": "etp",
    "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP": "etp_ep",
    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP": "etp_ep_pp",
    "MODEL_PARALLEL_GROUP": "mp",
    "TENSOR_AND_DATA_PARALLEL_GROUP": "tp_dp",
    "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": "tp_dp",
    "TENSOR_AND_CONTEXT_PARALLEL_GROUP": "tp_cp",
    "EMBEDDING_GROUP": "embd",
    "POSITION_EMBEDDING_GROUP": "embd",
    "DEFAULT_PG": "world",
    "MESH_TP": "tp",
    "MESH_PP": "pp",
    "MESH_CP": "cp",
    "MESH_EP": "ep",
    "MESH_DP": "dp",
    "MESH_DP_REPLICATE": "dp",
    "MESH_DP_SHARD": "fsdp",
    "MESH_FSDP": "fsdp",
}
_HIERARCHICAL = re.compile(r"^HIERARCHICAL_(.+)_L[0-9]+$")


def comm_key(comm_id: str) -> str:
    """A communicator id in the form the Inspector writes it (``0x`` and at most 14 hex
    digits, lower case, no leading zeros): the written form itself, or the full hash."""
    try:
        return "0x%s" % format(int(comm_id, 16), "x")[:COMM_DIGITS]
    except ValueError:
        return comm_id


def group_of_name(comm_name: str | None) -> str | None:
    """The group ``COMM_NAMES`` gives a communicator name, else None."""
    if not comm_name:
        return None
    desc = comm_name.partition(":")[0].strip().upper()
    hier = _HIERARCHICAL.match(desc)
    if hier:
        desc = hier.group(1)
    return COMM_NAMES.get(desc)


class GroupMapError(ValueError):
    pass


def map_filename(hostname: str, pid: int) -> str:
    return f"{PREFIX}{hostname}-pid{pid}.json"


def _check(rank: int, world_size: int, groups: Mapping) -> list[dict]:
    if type(world_size) is not int or world_size < 1:
        raise GroupMapError(f"world_size must be a positive integer, got {world_size!r}")
    if type(rank) is not int or not 0 <= rank < world_size:
        raise GroupMapError(f"rank must be an integer in [0, {world_size}), got {rank!r}")
    out = []
    for name, spec in groups.items():
        if not isinstance(name, str) or not NAME_RE.match(name) or name == UNKNOWN:
            raise GroupMapError(f"group name {name!r} must match {NAME_RE.pattern} and not be "
                                f"{UNKNOWN!r} (use dp, tp, pp, ep, cp, fsdp, ...)")
        comm_id = None
        if isinstance(spec, Mapping):
            ranks, comm_id = spec.get("ranks"), spec.get("comm_id")
        else:
            ranks = spec
        ranks = list(ranks) if ranks is not None else None
        if (not ranks or any(type(r) is not int or not 0 <= r < world_size for r in ranks)
                or len(set(ranks)) != len(ranks)):
            raise GroupMapError(f"group {name}: ranks must be distinct integers in "
                                f"[0, {world_size}), got {ranks!r}")
        if rank not in ranks:
            raise GroupMapError(f"group {name}: rank {rank} is not one of its ranks {ranks}")
        if comm_id is not None and (not isinstance(comm_id, str)
                                    or not COMM_RE.match(comm_id.lower())):
            raise GroupMapError(f"group {name}: comm_id must look like 0x7f8c496ae9f661 (the "
                                f"Inspector's 14 digits) or 0x7f8c496ae9f66123, got {comm_id!r}")
        out.append({"group": name, "ranks": ranks, "comm_id": comm_id})
    return out


def write_group_map(directory: str | os.PathLike, *, rank: int, world_size: int,
                    groups: Mapping[str, Sequence[int] | Mapping], job_id: str | None = None,
                    hostname: str | None = None, pid: int | None = None) -> Path:
    """Write this process's group map into ``directory`` (atomically: the exporter never
    reads half a file) and return its path. ``groups`` maps a group name to its global
    ranks in group-rank order, or to ``{"ranks": [...], "comm_id": "0x..."}``. Raises
    GroupMapError on an inconsistent map rather than writing one."""
    hostname = hostname or socket.gethostname()
    pid = os.getpid() if pid is None else pid
    doc = {"format": FORMAT, "job_id": job_id, "hostname": hostname, "pid": pid,
           "rank": rank, "world_size": world_size, "groups": _check(rank, world_size, groups)}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / map_filename(hostname, pid)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-" + PREFIX)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@dataclass(frozen=True)
class ProcessMap:
    hostname: str
    pid: int
    rank: int
    world_size: int
    job_id: str | None
    groups: tuple[tuple[str, tuple[int, ...], str | None], ...]


def read_group_map(path: str | os.PathLike) -> ProcessMap:
    """Parse one group map file; GroupMapError names what is wrong."""
    try:
        doc = userfile.load_json(userfile.read_text(path, limit=MAP_LIMIT), str(path))
    except userfile.InputError as exc:
        raise GroupMapError(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise GroupMapError(f"{path}: not an {FORMAT} file")
    try:
        groups = _check(doc["rank"], doc["world_size"],
                        {g["group"]: {"ranks": g["ranks"], "comm_id": g.get("comm_id")}
                         for g in doc["groups"]})
        if not isinstance(doc["hostname"], str) or type(doc["pid"]) is not int:
            raise GroupMapError("hostname must be a string and pid an integer")
    except (KeyError, TypeError) as exc:
        raise GroupMapError(f"{path}: missing or invalid field {exc}") from None
    except GroupMapError as exc:
        raise GroupMapError(f"{path}: {exc}") from None
    job_id = doc.get("job_id")
    return ProcessMap(doc["hostname"], doc["pid"], doc["rank"], doc["world_size"],
                      job_id if isinstance(job_id, str) and job_id else None,
                      tuple((g["group"], tuple(g["ranks"]), g["comm_id"]) for g in groups))


@dataclass(frozen=True)
class Rule:
    """``NAME:COND[,COND...]`` with conditions ``n_ranks=N``, ``nnodes=M`` and
    ``comm_name=GLOB``: communicators that meet them all belong to group NAME."""
    group: str
    n_ranks: int | None = None
    nnodes: int | None = None
    comm_name: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Rule":
        name, sep, conds = text.partition(":")
        if not sep or not NAME_RE.match(name) or name == UNKNOWN:
            raise GroupMapError(f"group rule {text!r}: expected NAME:n_ranks=N[,nnodes=M]"
                                "[,comm_name=GLOB]")
        values: dict = {}
        for cond in conds.split(","):
            key, eq, val = cond.strip().partition("=")
            if key == "comm_name" and eq and val:
                values[key] = val
            elif key in ("n_ranks", "nnodes") and eq and val.isdigit() and int(val) >= 1:
                values[key] = int(val)
            else:
                raise GroupMapError(f"group rule {text!r}: condition {cond!r} is not "
                                    "n_ranks=N or nnodes=N with N >= 1, or comm_name=GLOB")
        return cls(name, **values)

    def matches(self, n_ranks: int, nnodes: int, comm_name: str | None = None) -> bool:
        return ((self.n_ranks is None or self.n_ranks == n_ranks)
                and (self.nnodes is None or self.nnodes == nnodes)
                and (self.comm_name is None
                     or (comm_name is not None and fnmatchcase(comm_name, self.comm_name))))


@dataclass
class _Comm:
    n_ranks: int
    nnodes: int
    ranks: dict[tuple[str, int], int] = field(default_factory=dict)  # process -> comm rank
    group: str | None = None  # decided by a unique membership match
    members: tuple[int, ...] | None = None  # global ranks in comm-rank order, when known


class Resolver:
    """Global ranks of processes and groups of communicators, from the group maps seen in
    a directory and the configured rules. Decisions are cached; see the module doc."""

    def __init__(self, rules: Iterable[Rule] = (), world_size: int | None = None):
        self.rules = tuple(rules)
        self.world_size = world_size
        self.maps: dict[tuple[str, int], ProcessMap] = {}
        self._by_comm_id: dict[str, tuple[str, tuple[int, ...]]] = {}  # comm_key -> group
        self._comms: dict[str, _Comm] = {}
        self._learned_rank: dict[tuple[str, int], int] = {}
        self._host_of_rank: dict[int, str] = {}  # global rank -> hostname, from the maps
        self.version = 0  # changes whenever a label returned earlier may have changed

    def add_map(self, pm: ProcessMap) -> None:
        self.maps[(pm.hostname, pm.pid)] = pm
        self._host_of_rank[pm.rank] = pm.hostname
        for name, ranks, comm_id in pm.groups:
            if comm_id:
                self._by_comm_id[comm_key(comm_id)] = (name, ranks)
        for comm in self._comms.values():  # communicators seen before this map arrived
            if comm.group is None:
                self._match(comm)
        self.version += 1

    def forget(self, comm_id: str) -> None:
        self._comms.pop(comm_id, None)

    def rank(self, hostname: str, pid: int, comm_rank: int, n_ranks: int) -> str:
        """Global rank of a process, as a label value."""
        proc = (hostname, pid)
        pm = self.maps.get(proc)
        if pm is not None:
            return str(pm.rank)
        learned = self._learned_rank.get(proc)
        if learned is None and self.world_size is not None and n_ranks == self.world_size:
            learned = self._learned_rank[proc] = comm_rank
            self.version += 1
        return UNKNOWN if learned is None else str(learned)

    def _nnodes(self, ranks: Sequence[int]) -> int | None:
        """Hosts the ranks run on, when the group maps of all of them are known."""
        hosts = {self._host_of_rank.get(r) for r in ranks}
        return None if None in hosts else len(hosts)

    def _match(self, comm: _Comm) -> None:
        candidates: set[str] | None = None
        members: dict[str, tuple[int, ...]] = {}
        for proc, comm_rank in comm.ranks.items():
            pm = self.maps.get(proc)
            if pm is None:
                continue
            fits = {name for name, ranks, _ in pm.groups
                    if len(ranks) == comm.n_ranks and ranks[comm_rank] == pm.rank}
            for name, ranks, _ in pm.groups:
                members.setdefault(name, ranks)
            candidates = fits if candidates is None else candidates & fits
        if candidates is not None and len(candidates) > 1:
            nodes = {name: self._nnodes(members[name]) for name in candidates}
            if None not in nodes.values():  # tie-break only when every candidate is known
                spans = {name for name, n in nodes.items() if n == comm.nnodes}
                if len(spans) == 1:
                    candidates = spans
        if candidates is not None and len(candidates) == 1:
            comm.group = next(iter(candidates))
            comm.members = members[comm.group]
            self.version += 1

    def group(self, comm_id: str, hostname: str, pid: int, comm_rank: int, n_ranks: int,
              nnodes: int, comm_name: str | None = None) -> str:
        """Group label of a communicator, seen from one process's record."""
        explicit = self._by_comm_id.get(comm_key(comm_id))
        if explicit is not None:
            return explicit[0]
        comm = self._comms.get(comm_id)
        if comm is None:
            comm = self._comms[comm_id] = _Comm(n_ranks, nnodes)
        proc = (hostname, pid)
        if proc not in comm.ranks and comm_rank < comm.n_ranks:
            comm.ranks[proc] = comm_rank
            if comm.group is None:
                self._match(comm)
        if comm.group is not None:
            return comm.group
        for rule in self.rules:
            if rule.matches(n_ranks, nnodes, comm_name):
                return rule.group
        return group_of_name(comm_name) or UNKNOWN

    def peer(self, comm_id: str, peer: int) -> str:
        """Global rank of the process at comm rank ``peer`` of a communicator, as a label
        value: from the group map that names the communicator, else from the peer's own
        records in it (its global rank known), else ``unknown``."""
        explicit = self._by_comm_id.get(comm_key(comm_id))
        comm = self._comms.get(comm_id)
        members = explicit[1] if explicit is not None else comm.members if comm else None
        if members is not None and peer < len(members):
            return str(members[peer])
        if comm is not None:
            for (host, pid), r in comm.ranks.items():
                if r == peer:
                    return self.rank(host, pid, r, comm.n_ranks)
        return UNKNOWN
