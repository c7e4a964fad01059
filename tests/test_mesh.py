"""The parallel mesh: coordinates and groups in Megatron's default order, a rank's place
from its groups, and the synthetic job's mesh physics (TP and EP lockstep, pipelines that
run at their slowest stage), which the straggler rules are proven on."""
from __future__ import annotations

import pytest

from obsgen.mesh import Mesh, Place
from obsgen.synth import Job, SlowRank

# sentence -> (mesh, rank, expected coordinates, expected groups)
LAYOUTS = {
    "TP=8 / PP=2 / DP=2 (the user's job): rank 9 is TP position 1 of replica 1 in stage 0": (
        Mesh(tp=8, pp=2, dp=2), 9, {"tp": 1, "cp": 0, "dp": 1, "pp": 0, "ep": 0},
        {"tp": tuple(range(8, 16)), "dp": (1, 9), "pp": (9, 25), "cp": (9,), "ep": (9,)}),
    "TP=2 / DP=2: ranks 0-1 and 2-3 are the TP groups": (
        Mesh(tp=2, dp=2), 3, {"tp": 1, "cp": 0, "dp": 1, "pp": 0, "ep": 0},
        {"tp": (2, 3), "dp": (1, 3), "pp": (3,)}),
    "PP=2 / DP=2: stage 1 holds ranks 2 and 3, rank 3's pipeline is 1 -> 3": (
        Mesh(pp=2, dp=2), 3, {"tp": 0, "cp": 0, "dp": 1, "pp": 1, "ep": 0},
        {"tp": (3,), "dp": (2, 3), "pp": (1, 3)}),
    "CP between TP and DP: TP=2 / CP=2 / DP=2, rank 6": (
        Mesh(tp=2, cp=2, dp=2), 6, {"tp": 0, "cp": 1, "dp": 1, "pp": 0, "ep": 0},
        {"tp": (6, 7), "cp": (4, 6), "dp": (2, 6)}),
    "EP splits a stage's DP ranks into groups of ep consecutive replicas": (
        Mesh(tp=2, dp=4, ep=2), 6, {"tp": 0, "cp": 0, "dp": 3, "pp": 0, "ep": 1},
        {"ep": (4, 6), "dp": (0, 2, 4, 6), "tp": (6, 7)}),
    "with CP, EP groups take CP peers first, as megatron-core 0.16.1's expert grid does": (
        Mesh(tp=2, cp=2, dp=2, ep=2), 2, {"tp": 0, "cp": 1, "dp": 0, "pp": 0, "ep": 1},
        {"ep": (0, 2), "cp": (0, 2), "dp": (2, 6), "tp": (2, 3)}),
    "EP across CP and DP: CP=2 / DP=2 / EP=4 is one expert group per TP position": (
        Mesh(tp=2, cp=2, dp=2, ep=4), 6, {"tp": 0, "cp": 1, "dp": 1, "pp": 0, "ep": 3},
        {"ep": (0, 2, 4, 6), "cp": (4, 6), "dp": (2, 6)}),
}


@pytest.mark.parametrize("case", list(LAYOUTS), ids=list(LAYOUTS))
def test_coordinates_and_groups_follow_megatrons_default_order(case):
    mesh, rank, coords, groups = LAYOUTS[case]
    assert mesh.coords(rank) == coords
    for kind, members in groups.items():
        assert mesh.group(rank, kind) == members, kind
        assert all(rank in mesh.group(m, kind) for m in members)  # the same group from each
    assert mesh.rank_of(**{k: coords[k] for k in ("tp", "cp", "dp", "pp")}) == rank


def test_a_place_names_each_group_by_its_lowest_rank_from_any_source():
    from_sizes = Mesh(tp=8, pp=2, dp=2).place(9)
    from_groups = Place.of(9, {"tp": tuple(range(8, 16)), "dp": (1, 9), "pp": (9, 25)})
    assert from_sizes == from_groups
    assert from_sizes.labels() == {
        "stage": "0", "tp_rank": "1", "cp_rank": "0", "ep_rank": "0", "dp_rank": "1",
        "tp_group": "8", "cp_group": "9", "ep_group": "9", "dp_group": "1", "pp_group": "9"}
    with pytest.raises(ValueError, match="not in its tp group"):
        Place.of(3, {"tp": (0, 1)})


@pytest.mark.parametrize("bad,why", [
    (dict(tp=0), "tp size must be >= 1"), (dict(dp=3, ep=2), "ep \\(2\\) must divide cp\\*dp \\(3\\)"),
], ids=["a size of zero", "ep that does not divide cp*dp"])
def test_a_mesh_that_cannot_be_is_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        Mesh(**bad)


def test_a_world_that_the_mesh_does_not_divide_is_refused():
    with pytest.raises(ValueError, match="not a multiple of tp\\*pp\\*cp"):
        Mesh.of_world(6, tp=4)
    assert Mesh.of_world(32, tp=8, pp=2) == Mesh(tp=8, pp=2, dp=2)


# The synthetic job's physics ---------------------------------------------------------------
T = 20 * 60  # past the warm-up


def _compute_and_busy(job: Job):
    return job.observed_computes(T), job.compute_means(T)


PHYSICS = {
    "one slow GPU of TP=8 / PP=2 / DP=2 makes its whole TP group and the next stage's TP "
    "group of its pipeline report its compute; only its busy time is its own": (
        Job(ranks=32, tp=8, pp=2, faults=(SlowRank(9, 1.2),)), 9, (*range(8, 16), *range(24, 32))),
    "in TP=2 / DP=1 stages the peer of the slow GPU waits for it": (
        Job(ranks=4, tp=2, pp=2, faults=(SlowRank(1, 1.2),)), 1, (0, 1, 2, 3)),
    "in PP=2 / DP=2 the slow rank's pipeline peer waits for it in recv, the other "
    "pipeline does not": (Job(ranks=4, pp=2, faults=(SlowRank(3, 1.25),)), 3, (1, 3)),
    "with EP=2 every TP group of the slow GPU's EP group waits for it": (
        Job(ranks=8, tp=2, ep=2, faults=(SlowRank(2, 1.2),)), 2, (0, 1, 2, 3)),
}


@pytest.mark.parametrize("case", list(PHYSICS), ids=list(PHYSICS))
def test_ranks_that_wait_for_a_slow_gpu_report_its_compute_but_keep_their_busy_time(case):
    job, slow, waiting = PHYSICS[case]
    compute, busy = _compute_and_busy(job)
    others = [r for r in range(job.ranks) if r != slow]
    assert busy[slow] > 1.15 * max(busy[r] for r in others)  # only the GPU is slow
    assert all(compute[r] == pytest.approx(compute[slow]) for r in waiting)
    assert all(compute[r] < compute[slow] / 1.1 for r in range(job.ranks) if r not in waiting)


def test_a_heavier_last_stage_stretches_every_stage_of_its_pipeline():
    job = Job(ranks=8, pp=4, microbatches=16, stage_compute=(1.0, 1.0, 1.0, 1.3))
    compute, busy = _compute_and_busy(job)
    assert all(busy[r] < 1.1 * 1.2 for r in range(6))  # stages 0-2: 1.2 s of own work
    assert min(compute) > 1.3 * 1.2 * 0.95  # everyone reports the last stage's pace


def test_the_synth_reports_the_wait_and_the_mesh_of_every_rank():
    job = Job(ranks=8, tp=2, pp=2, reports_mesh=True, faults=(SlowRank(1, 1.2),))
    last = list(job.run(T))[-1].samples
    def per_rank(name):
        return {dict(k)["rank"]: v for k, v in last.items() if dict(k)["__name__"] == name}
    compute, wait = per_rank("train_compute_seconds_sum"), per_rank("train_compute_wait_seconds_sum")
    count = per_rank("train_compute_seconds_count")
    busy = {r: (compute[r] - wait[r]) / count[r] for r in compute}
    truth = job.compute_means(T)
    for r in range(8):  # busy time from the series is the rank's own work (with warm-up)
        assert busy[str(r)] == pytest.approx(truth[r], rel=0.35), r
    assert busy["1"] > 1.1 * max(busy[str(r)] for r in (0, 2, 3))
    info = [dict(k) for k in last if dict(k)["__name__"] == "train_rank_mesh_info"]
    mesh = Mesh(tp=2, pp=2, dp=2)
    assert len(info) == 8
    for labels in info:
        place = mesh.place(int(labels["rank"])).labels()
        assert {k: labels[k] for k in place} == place
