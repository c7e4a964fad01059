"""obsgen plan: series per metric for a job of N ranks."""
from __future__ import annotations

import pytest

from obsgen.cli import main
from obsgen.plan import Shape, plan


def totals(shape: Shape) -> dict[str, int]:
    lines = plan(shape)
    return {"scraped": sum(l.total for l in lines if l.type != "recorded"),
            "recorded": sum(l.total for l in lines if l.type == "recorded"),
            "per_rank": sum(l.per_unit for l in lines if l.scope == "rank" and l.type != "recorded")}


def test_a_dense_data_parallel_job_of_8_ranks_by_hand():
    # Per rank: 4 histograms (step, compute, collective time, exposed comm) x 17 series,
    # 9 gauges, 5 counters (checkpoints, checkpoint seconds, checkpoint bytes, collective
    # bytes, link recoveries) = 82. From one rank: grad norm, loss, recovery time and
    # checkpoint age at failure = 4. One host of 8 GPUs: 11 DCGM series per GPU = 88,
    # 8 HCAs x 3 + uname = 25, its pod's kube_pod_labels = 1. Recorded: 5 per rank, 2 per
    # stage, 20 per job, 5 per host, 3 per GPU (at most: the error records exist only for
    # GPUs with errors).
    assert totals(Shape(ranks=8)) == {"scraped": 82 * 8 + 4 + 88 + 25 + 1,
                                      "recorded": 5 * 8 + 2 + 20 + 5 + 3 * 8, "per_rank": 82}


def test_cost_is_linear_in_ranks():
    small, big = totals(Shape(ranks=512)), totals(Shape(ranks=1024))
    assert big["per_rank"] == small["per_rank"]
    assert big["scraped"] - 4 == 2 * (small["scraped"] - 4)  # the one-rank gauges stay


def test_pipeline_parallelism_adds_stage_timings_and_p2p():
    base, pp = totals(Shape(ranks=1024)), totals(Shape(ranks=1024, pp=4))
    assert pp["per_rank"] - base["per_rank"] == 2 * 17 + 2 * 17 + 2  # phases, send/recv time, bytes


def test_cli_prints_the_total(capsys):
    assert main(["plan", "--ranks", "16384", "--tp", "8", "--pp", "8"]) == 0
    out = capsys.readouterr().out
    assert "16,384 ranks" in out and "total:" in out and "job_rank:train_compute_seconds:mean5m" in out


@pytest.mark.parametrize("bad", ["0", "-4", "many"])
def test_cli_refuses_a_bad_rank_count(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--ranks", bad])
    assert exc.value.code == 2
