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


# What real clusters do (benchmarks/behaviours.py) and the soak (benchmarks/soak.py) --------
def test_an_alert_that_stops_and_fires_again_is_two_episodes():
    from benchmarks.behaviours import episodes
    a = ("Train_Straggler_Persistent", (("rank", "3"),))
    fired = {20.0: {a}, 20.5: {a}, 21.0: {a}, 22.5: {a}, 23.0: {a}}
    assert episodes(fired) == {a: [(20.0, 21.0), (22.5, 23.0)]}
    assert episodes(fired, step=1.5) == {a: [(20.0, 23.0)]}


def test_hardware_paged_to_workload_and_moving_slowness_paged_to_platform_are_misroutes():
    from benchmarks.behaviours import Hardware, Moving, misrouted, points_at
    job = detect._job(8, 2, 2, seed=1)
    slow, moving = Hardware(9, 20.0), Moving(20.0, 60.0)
    transient = ("Train_Straggler_Transient", (("job_id", "detect"),))
    persistent = ("Train_Straggler_Persistent", (("job_id", "detect"), ("rank", "9")))
    pipeline = ("Train_Straggler_TPGroup", (("job_id", "detect"), ("pp_group", "8")))
    assert misrouted(transient, slow) and not points_at(transient, slow, job)
    assert misrouted(persistent, moving) and points_at(transient, moving, job)
    assert points_at(persistent, slow, job) and not misrouted(persistent, slow)
    # rank 9 is in TP group 8 (ranks 8..15), whose first rank's pipeline is named 8
    assert points_at(pipeline, slow, job)
    assert not points_at(("Train_Straggler_TPGroup", (("job_id", "detect"), ("pp_group", "0"))),
                         slow, job)


def test_the_soak_matches_episodes_to_faults_and_counts_the_rest():
    from benchmarks.behaviours import Hardware, Moving
    from benchmarks.soak import Soak
    job = detect._job(2, 2, 2, seed=1)
    p = ("Train_Straggler_Persistent", (("job_id", "detect"), ("rank", "5")))
    other = ("Train_Straggler_Persistent", (("job_id", "detect"), ("rank", "2")))
    t = ("Train_Straggler_Transient", (("job_id", "detect"),))
    s = Soak(hours=2, job=job, incidents=[Hardware(5, 10.0, 40.0), Moving(60.0, 90.0)],
             runs={p: [(14.5, 52.0)], other: [(30.0, 35.0)], t: [(35.0, 40.0), (80.0, 100.0)]},
             seconds=0.0)
    assert s.matched() == {0: [(p, 14.5, 52.0)], 1: [(t, 80.0, 100.0)]}
    # Transient during the slow GPU is a misroute; another rank's Persistent a false page
    assert s.misroutes() == [(t, 35.0, 40.0)]
    assert s.false_pages() == [(other, 30.0, 35.0)]


def test_the_soak_mixes_every_benign_behaviour_and_its_faults_in_one_day():
    from benchmarks import soak
    from obsgen.synth import (MovingSlow, Recurring, Restart, ScrapeMisses, SeqImbalance,
                              SlowRank, WarmRank)
    faults, incidents = soak.faults(24)
    kinds = {type(f) for f in faults}
    assert {SeqImbalance, ScrapeMisses, WarmRank, Restart, MovingSlow, Recurring, SlowRank} <= kinds
    assert {r.moves for r in faults if isinstance(r, Restart)} == {True, False}
    blips = [f for f in faults if isinstance(f, SlowRank) and f.end - f.start < 3 * 60]
    assert len(blips) > 20 and max(f.factor for f in blips) == 3.0
    assert len(incidents) == 7
