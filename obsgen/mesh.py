"""A rank's place in the parallel mesh of a job: its coordinate in each kind of parallel
group (TP, CP, EP, DP, PP) and which group of each kind it belongs to.

Every rank reports its place as one info series, ``train_rank_mesh_info``; the straggler
rules read it to name a tensor-parallel group as one alert, and to tell slowness that
follows a mesh coordinate (one stage, one TP position in every group) from slowness
that follows a GPU.

A group is named by the lowest global rank in it: ``tp_group="8"`` is the TP group whose
first rank is 8. Any source of the mesh names a group the same way: Megatron's
``parallel_state``, the process groups a job names with ``tel.torch.name_group``, or the
sizes alone (``Mesh.place``), so the same job gets the same labels whichever it uses.

Laying ranks out from the sizes follows Megatron-LM's default order, ``tp-cp-ep-dp-pp``
(TP varies fastest, then CP, then DP, the pipeline stage slowest). Expert parallelism
follows Megatron-core's expert grid (``tp-ep-dp-pp``, with the context-parallel ranks
folded into its data-parallel ones, expert TP equal to TP): an EP group is ``ep``
consecutive ranks of a TP position's CP x DP ranks, CP varying fastest, so with CP > 1
its members are first CP peers (megatron-core 0.16.1 under torchrun agrees, see
tests/e2e/test_megatron_parallel_state.py). A job laid out otherwise
(``--use-tp-pp-dp-mapping``, a custom order, an expert TP size of its own) reports its
place from ``parallel_state`` or its named groups instead.
"""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("tp", "cp", "ep", "dp", "pp")


@dataclass(frozen=True)
class Place:
    """One rank's coordinates (its index in each group it belongs to; ``stage`` is the PP
    coordinate) and the groups it belongs to (the lowest global rank of each)."""
    tp_rank: int = 0
    cp_rank: int = 0
    ep_rank: int = 0
    dp_rank: int = 0
    stage: int = 0
    tp_group: int = 0
    cp_group: int = 0
    ep_group: int = 0
    dp_group: int = 0
    pp_group: int = 0

    @classmethod
    def of(cls, rank: int, groups: dict[str, tuple[int, ...]]) -> "Place":
        """The place of global ``rank`` from the global ranks of each of its groups, in
        group order ({"tp": (8, 9), "pp": (1, 9), ...}); a kind not given is a group of
        the rank alone."""
        kw: dict[str, int] = {}
        for kind in KINDS:
            members = tuple(groups.get(kind) or (rank,))
            if rank not in members:
                raise ValueError(f"rank {rank} is not in its {kind} group {members}")
            kw["stage" if kind == "pp" else f"{kind}_rank"] = members.index(rank)
            kw[f"{kind}_group"] = min(members)
        return cls(**kw)

    def labels(self) -> dict[str, str]:
        """The info series' labels for this place, by contract label key."""
        return {"stage": str(self.stage), **{f"{k}_rank": str(getattr(self, f"{k}_rank"))
                                              for k in KINDS if k != "pp"},
                **{f"{k}_group": str(getattr(self, f"{k}_group")) for k in KINDS}}


@dataclass(frozen=True)
class Mesh:
    """Sizes of a job's mesh; the world is tp * cp * dp * pp ranks. ``ep`` divides
    ``cp * dp``."""
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1

    def __post_init__(self):
        for kind in KINDS:
            if getattr(self, kind) < 1:
                raise ValueError(f"{kind} size must be >= 1, got {getattr(self, kind)}")
        if (self.cp * self.dp) % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide cp*dp ({self.cp * self.dp})")

    @classmethod
    def of_world(cls, world: int, *, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1) -> "Mesh":
        """The mesh of ``world`` ranks whose data-parallel size is what the others leave."""
        if world % (tp * pp * cp):
            raise ValueError(f"world size {world} is not a multiple of tp*pp*cp = {tp * pp * cp}")
        return cls(tp=tp, pp=pp, cp=cp, ep=ep, dp=world // (tp * pp * cp))

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def coords(self, rank: int) -> dict[str, int]:
        """{"tp": .., "cp": .., "dp": .., "pp": .., "ep": ..} of a global rank."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} is outside 0 .. {self.world - 1}")
        tp, rest = rank % self.tp, rank // self.tp
        cp, rest = rest % self.cp, rest // self.cp
        dp, pp = rest % self.dp, rest // self.dp
        return {"tp": tp, "cp": cp, "dp": dp, "pp": pp, "ep": (cp + self.cp * dp) % self.ep}

    def rank_of(self, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
        return tp + self.tp * (cp + self.cp * (dp + self.dp * pp))

    def group(self, rank: int, kind: str) -> tuple[int, ...]:
        """The global ranks of ``rank``'s group of ``kind``, in group order."""
        c = self.coords(rank)
        at = {k: c[k] for k in ("tp", "cp", "dp", "pp")}
        if kind == "ep":  # consecutive in the expert grid's DP, CP x DP with CP fastest
            first = c["cp"] + self.cp * c["dp"] - c["ep"]
            return tuple(self.rank_of(**{**at, "cp": x % self.cp, "dp": x // self.cp})
                         for x in range(first, first + self.ep))
        size = getattr(self, kind)
        return tuple(self.rank_of(**{**at, kind: i}) for i in range(size))

    def place(self, rank: int) -> Place:
        return Place.of(rank, {kind: self.group(rank, kind) for kind in KINDS})

    def same_work(self, rank: int) -> tuple[int, ...]:
        """The ranks that do the same work as ``rank``: those of its pipeline stage."""
        return tuple(r for r in range(self.world) if self.coords(r)["pp"] == self.coords(rank)["pp"])
