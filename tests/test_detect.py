"""The straggler injection benchmark's machinery, without timing anything: the meshes it
sweeps, that it reads promtool's firing alerts back correctly from a real evaluation, and
how it scores them. The scores themselves are measured by `make detect`."""
from __future__ import annotations

import pytest

from benchmarks import detect
from obsgen.synth import SlowRank


def test_the_sweep_covers_every_mesh_of_8_to_64_ranks():
    meshes = detect.meshes()
    assert len(meshes) == 25 and (8, 2, 2) in meshes and (4, 4, 4) in meshes
    assert all(8 <= tp * pp * dp <= 64 for tp, pp, dp in meshes)
    assert all(tp * dp >= 2 for tp, pp, dp in meshes)  # every stage has ranks to compare
    assert {len(detect.positions(*m)) for m in meshes} == {3}


@pytest.mark.promtool
def test_a_slow_gpu_is_read_back_as_the_persistent_alert_and_the_late_arrival_for_its_rank():
    job = detect._job(2, 2, 2, seed=3, faults=(SlowRank(rank=5, factor=1.5, start=detect.ONSET),))
    fired = detect.evaluate(job, detect.ONSET / 60 - 2, 30)
    assert fired, "promtool reported no firing alert"
    alerts = set().union(*fired.values())
    assert alerts == {("Train_Straggler_Persistent",
                       (("job_id", "detect"), ("rank", "5"), ("stage", "1"))),
                      ("Train_Straggler_LateArrival", (("job_id", "detect"), ("rank", "5")))}
    assert min(fired) > detect.ONSET / 60  # nothing before the onset
    r = detect.Result("x", 5, 1.5, detect.ONSET / 60, fired)
    s = detect.scores([(r, job)], [], [])
    assert (s["top1"], s["recall"], s["late_recall"], s["precision"]) == (1.0, 1.0, 1.0, 1.0)
    assert 0 < s["latency"][1.5][0] <= 5 and 0 < s["late_latency"][1.5][0] <= 5


def test_an_alert_naming_another_rank_or_any_alert_of_a_healthy_job_is_false():
    job = detect._job(2, 2, 2, seed=1)
    other = ("Train_Straggler_Persistent", (("job_id", "detect"), ("rank", "4"), ("stage", "1")))
    group = ("Train_Straggler_TPGroup", (("job_id", "detect"), ("stage", "1"), ("tp_group", "4")))
    r = detect.Result("x", 5, 1.2, 20.0, {22.0: {other}, 23.0: {group}})
    assert not r.points_at_slow(other, job) and r.points_at_slow(group, job)  # 5 is in TP group 4
    healthy = detect.Result("h", None, None, 0.0, {10.0: {other}})
    s = detect.scores([(r, job)], [], [(healthy, job)])
    assert s["top1"] == 0.0 and s["false_pages"] == {"h": 1}
    assert s["precision"] == pytest.approx(1 / 3)


def test_a_mesh_pattern_is_named_by_its_mapping_alert_and_a_persistent_one_points_elsewhere():
    job = detect._job(2, 2, 2, seed=1)
    mapping = ("Train_Straggler_Mapping", (("job_id", "detect"), ("mesh_axis", "tp"),
                                           ("mesh_position", "1"), ("stage", "0")))
    other_position = ("Train_Straggler_Mapping", (("job_id", "detect"), ("mesh_axis", "tp"),
                                                  ("mesh_position", "0"), ("stage", "0")))
    persistent = ("Train_Straggler_Persistent", (("job_id", "detect"), ("rank", "1"), ("stage", "0")))
    r = detect.Result("p", None, 1.2, 20.0, {23.0: {mapping}, 24.0: {persistent, other_position}},
                      ("tp", "1"))
    assert r.points_at_slow(mapping, job)
    assert not r.points_at_slow(persistent, job) and not r.points_at_slow(other_position, job)
    s = detect.scores([], [(r, job)], [])
    assert (s["pattern_named"], s["patterns"]) == (1, 1)
    assert s["precision"] == pytest.approx(1 / 3)
