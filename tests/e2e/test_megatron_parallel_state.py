"""Megatron-LM's real parallel state: megatron-core 0.16.1 (the newest for Python 3.11)
initialised by ``initialize_model_parallel`` under torchrun, 8 ranks on gloo and CPU
(tests/e2e/fixtures/megatron_place.py). Every rank publishes its place with
``tel.torch.mesh_from_megatron()``, and the place its /metrics endpoint serves on
``train_rank_mesh_info`` must be the one Megatron's own queries give
(``get_*_parallel_rank`` and the ranks of each ``get_*_parallel_group``, a group named
by its lowest rank) and the one ``obsgen.mesh`` lays out from the sizes alone.

Nothing of Megatron is stubbed: its groups are real gloo groups. What CPU leaves
unproven: NCCL communicators (gloo stands in, the same ranks) and the options only a GPU
build takes (SHARP, high-priority streams, the hierarchical CP groups)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest

from obsgen.mesh import Mesh

from . import harness

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    importlib.util.find_spec("megatron") is None and os.environ.get("CI") != "true",
    reason="megatron-core not installed: `make e2e` installs obsgen[megatron]")]

RANKS = 8
# sentence -> (tp, pp, cp, ep)
MESHES = {
    "TP=2 x PP=2 x DP=2, the user's TP=8 / PP=2 / DP=2 job in small": (2, 2, 1, 1),
    "TP=2 x CP=2 x DP=2 with EP=2: an expert group takes its CP peers first": (2, 1, 2, 2),
    "PP=2 x CP=2 x DP=2 with EP=4: one expert group per stage": (1, 2, 2, 4),
}
LABELS = ("stage", "tp_rank", "cp_rank", "ep_rank", "dp_rank",
          "tp_group", "cp_group", "ep_group", "dp_group", "pp_group")


@pytest.fixture(scope="module", params=list(MESHES), ids=list(MESHES))
def ranks(request, tmp_path_factory) -> dict[int, dict]:
    """What each rank wrote: Megatron's answers and the place it published."""
    sizes = MESHES[request.param]
    out = tmp_path_factory.mktemp("megatron-place")
    r = subprocess.run(
        [harness.torchrun(), "--standalone", f"--nproc_per_node={RANKS}",
         str(harness.ROOT / "tests" / "e2e" / "fixtures" / "megatron_place.py"), str(out),
         *map(str, sizes)],
        capture_output=True, text=True, timeout=300, cwd=harness.ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    got = {int(p.stem): json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(got) == list(range(RANKS)), r.stderr[-3000:]
    return {"sizes": sizes, "ranks": got}


def test_each_rank_publishes_the_place_mesh_from_megatron_returns(ranks):
    for rank, r in ranks["ranks"].items():
        assert r["published"]["rank"] == str(rank)
        assert {k: r["published"][k] for k in LABELS} == r["returned"], rank


def test_the_place_is_megatrons_own_answer(ranks):
    for rank, r in ranks["ranks"].items():
        m, pub = r["megatron"], r["published"]
        for kind in ("tp", "cp", "ep", "dp", "pp"):
            index = "stage" if kind == "pp" else f"{kind}_rank"
            assert pub[index] == str(m[kind]["index"]), (rank, kind, m[kind])
            assert pub[f"{kind}_group"] == str(min(m[kind]["group"])), (rank, kind, m[kind])
            assert m[kind]["group"][m[kind]["index"]] == rank, (rank, kind, m[kind])


def test_obsgen_mesh_lays_out_the_same_places_from_the_sizes(ranks):
    tp, pp, cp, ep = ranks["sizes"]
    mesh = Mesh.of_world(RANKS, tp=tp, pp=pp, cp=cp, ep=ep)
    for rank, r in ranks["ranks"].items():
        assert mesh.place(rank).labels() == r["returned"], rank
        for kind in ("tp", "cp", "ep", "dp", "pp"):
            assert list(mesh.group(rank, kind)) == r["megatron"][kind]["group"], (rank, kind)
