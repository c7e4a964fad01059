"""obsgen plan: series per metric for a job of N ranks."""
from __future__ import annotations

import pytest

from obsgen.cli import main
from obsgen.plan import TRAINING, Shape, per_rank, plan, unread_buckets


def totals(shape: Shape) -> dict[str, int]:
    lines = plan(shape)
    return {"scraped": sum(l.total for l in lines if l.type != "recorded"),
            "recorded": sum(l.total for l in lines if l.type == "recorded"),
            "per_rank": per_rank(lines, TRAINING) + per_rank(lines, "NCCL sidecar")}


def test_a_dense_data_parallel_job_of_8_ranks_by_hand():
    # Training process, per rank: 4 histograms (step, compute, wait inside compute, exposed
    # comm) x 17, the collective time (20 buckets, as the sidecar's) 22; 9 gauges with the
    # GPU and mesh info; collective bytes, link recoveries, checkpoints and checkpoint
    # seconds = 103.
    # Sidecar, per rank: bus bandwidth (16 buckets) 18, bus bytes, aligned, last arrivals,
    # unrecorded, communicator size = 23. From one rank: grad norm, loss, their two
    # non-finite flags, recovery time, checkpoint age at failure = 6. One host of 8 GPUs: 12 DCGM series per GPU = 96,
    # 8 HCAs x 3 + uname = 25, its pod's kube_pod_labels = 1, the sidecar's skew and tail
    # histograms 2 x 22 and 5 exporter series = 49. Recorded: per rank 11 of busy time
    # (mean, flag, unbroken, excess, cost, page, held, place, lockstep, positions,
    # pattern) and 6 of late arrivals (ratio, flag, unbroken and held per aligned group,
    # of which there is one, positions, pattern); 3 per stage (baseline, settled, bubble),
    # 3 mesh positions (TP, CP and EP position 0) and 1 combination of them; 29 per job
    # and 2 per job and aligned group (its ranks, settled); one pipeline per TP group (8);
    # 5 per host, 8 per GPU (at most: the records after the flags exist only for ranks that
    # straggled or arrived late, the error records only for GPUs with an event).
    assert totals(Shape(ranks=8)) == {"scraped": 126 * 8 + 6 + 96 + 25 + 1 + 49,
                                      "recorded": 17 * 8 + 3 + 3 + 1 + 29 + 2 + 8 + 5 + 8 * 8,
                                      "per_rank": 126}


def test_the_unread_buckets_of_a_dense_job_of_8_ranks_by_hand():
    # Per rank: step, compute, wait and exposed-comm histograms 4 x 15, the collective time
    # 20, the sidecar's bus bandwidth 16; the host's sidecar skew and tail 2 x 20.
    assert unread_buckets(plan(Shape(ranks=8))) == (4 * 15 + 20 + 16) * 8 + 2 * 20


def test_plan_counts_what_obsgen_instrument_serves():
    """A default Telemetry (no GPU or mesh named, no deadline, no checkpoint bytes) serves
    exactly the series the plan counts for one rank of the training process."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from obsgen.instrument import Telemetry

    tel = Telemetry("job-plan", rank=3, world_size=8, port_base=0, addr="127.0.0.1").start()
    try:
        text = urllib.request.urlopen(f"http://{tel.endpoint.address}/metrics", timeout=5).read().decode()
    finally:
        tel.close(linger=0)
    served = sum(len(f.samples) for f in text_string_to_metric_families(text))
    assert served == per_rank(plan(Shape(ranks=8, gpu_info=False, mesh_info=False)), TRAINING) == 101
    assert served < 150  # issue 7's ceiling for the instrument's default series per rank


def test_cost_is_linear_in_ranks():
    small, big = totals(Shape(ranks=512)), totals(Shape(ranks=1024))
    assert big["per_rank"] == small["per_rank"]
    assert big["scraped"] - 6 == 2 * (small["scraped"] - 6)  # the one-rank gauges stay


def test_pipeline_parallelism_adds_stage_timings_and_p2p():
    base, pp = totals(Shape(ranks=1024)), totals(Shape(ranks=1024, pp=4))
    # Stage phases 2 x 17; per new (op, group) pair (send, recv): collective time 22, bus
    # bandwidth 18, bytes, bus bytes, unrecorded; the new group's communicator size once.
    # Send and recv are not aligned: no alignment counters for the pp group.
    assert pp["per_rank"] - base["per_rank"] == 2 * 17 + 2 * (22 + 18 + 3) + 1


def test_the_late_arrival_ratio_is_one_series_per_rank_and_aligned_group():
    lines = [l for l in plan(Shape(ranks=64, tp=8, pp=2)) if l.name.startswith("job_rank_group:")]
    assert [l.name for l in lines] == ["job_rank_group:nccl_collective_last_arrival:ratio1m",
                                       "job_rank_group:nccl_late_arrival:flag1m",
                                       "job_rank_group:nccl_late_arrival:unbroken3m",
                                       "job_rank_group:nccl_late_arrival:held12m"]
    # dp and tp; pp's send/recv are not aligned
    assert [(l.per_unit, l.total) for l in lines] == [(2, 128)] * 4


def test_cli_prints_the_total(capsys):
    assert main(["plan", "--ranks", "16384", "--tp", "8", "--pp", "8"]) == 0
    out = capsys.readouterr().out
    assert "16,384 ranks" in out and "total:" in out and "job_rank:train_busy_seconds:mean1m" in out
    assert "histogram buckets no rule or panel reads" in out


@pytest.mark.parametrize("bad", ["0", "-4", "many"])
def test_cli_refuses_a_bad_rank_count(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--ranks", bad])
    assert exc.value.code == 2


def test_cli_counts_the_records_of_the_families_the_config_renders(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "obsgen.yaml").write_text("dashboards: {records: true}\n")
    assert main(["plan", "--ranks", "64"]) == 0
    out = capsys.readouterr().out
    assert "job_rank:nccl_tp_collective_seconds:mean5m" in out  # the panels family's
    (tmp_path / "obsgen.yaml").write_text("families: [stragglers]\ndashboards: {enabled: false}\n")
    assert main(["plan", "--ranks", "64"]) == 0
    out = capsys.readouterr().out
    assert "job_rank:train_busy_seconds:mean1m" in out
    assert "job_rank:nccl_tp_collective_seconds:mean5m" not in out
    assert "job:train_grad_norm:finite_max" not in out  # a family left out records nothing


def test_a_large_job_is_pointed_at_the_rule_settings_for_one_prometheus():
    from obsgen.plan import LARGE, report
    hint = "set ruler: prometheus, facts_intervals: {stragglers: 4m}"
    assert hint in report(Shape(ranks=LARGE))
    assert hint not in report(Shape(ranks=LARGE // 2))
