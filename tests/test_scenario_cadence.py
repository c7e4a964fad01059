"""The scenarios' series as a preset with a cadence publishes them (obsgen.scenarios.series):
Megatron records its step histogram once per --log-interval, the interval's mean, in
milliseconds. The sums a scrape sees move only when an interval completes, never down
within a process, and they average to the steps' own time."""
from __future__ import annotations

import copy
import re

import pytest

from obsgen import config
from obsgen.scenarios import series
from obsgen.synth import Job, Restart

MIN = 60.0
COUNT, SUM = "train_step_seconds_count", "train_step_seconds_sum"


def names(log_interval: int) -> series.Names:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data.update({"presets": ["megatron-otel"], "megatron_log_interval": log_interval})
    return series.Names(cfg)


def run(job: Job, minutes: float, log_interval: int) -> tuple[dict, dict]:
    """The job's step histogram as scraped, and as the preset publishes it."""
    raw = series._scrapes([job], minutes, frozenset((COUNT, SUM)))
    return raw, names(log_interval).published(raw)


def by_rank(table: dict[tuple, list], name: str) -> dict[str, list]:
    """The rank's values, its series (one per process) laid end to end in time."""
    out: dict[str, list] = {}
    for key, values in table.items():
        labels = dict(key)
        if labels["__name__"] == name:
            merged = out.setdefault(labels["rank"], [None] * len(values))
            for i, v in enumerate(values):
                if series._sample(v):
                    merged[i] = v
    return out


JOB = Job(job_id="cadence", ranks=4, checkpoint_cost=20.0,
          faults=(Restart(at=20 * MIN, gap=3 * MIN),))


@pytest.mark.parametrize("log_interval", [10, 100])
def test_the_sums_move_only_with_the_counts_and_never_down_within_a_process(log_interval):
    _, pub = run(JOB, 45, log_interval)
    counts, sums = by_rank(pub, COUNT), by_rank(pub, SUM)
    assert counts and counts.keys() == sums.keys()
    for rank in counts:
        pairs = [(c, s) for c, s in zip(counts[rank], sums[rank]) if c is not None]
        assert all(float(c).is_integer() for c, _ in pairs)
        for (c0, s0), (c1, s1) in zip(pairs, pairs[1:]):
            if c1 < c0:  # the restart: a new process, counters from zero
                continue
            assert s1 >= s0, (rank, c0, s0, c1, s1)
            assert (c1 == c0) == (s1 == s0), (rank, c0, s0, c1, s1)


@pytest.mark.parametrize("log_interval", [10, 100])
def test_an_observation_is_the_mean_of_its_interval_in_milliseconds(log_interval):
    raw, pub = run(Job(job_id="cadence", ranks=4), 40, log_interval)
    for rank, values in by_rank(pub, COUNT).items():
        observed = values[-1]
        mean = by_rank(pub, SUM)[rank][-1] / observed  # ms per step, at the logged steps
        steps, seconds = by_rank(raw, COUNT)[rank][-1], by_rank(raw, SUM)[rank][-1]
        assert observed == steps // log_interval
        assert mean == pytest.approx(1000 * seconds / steps, rel=0.01)


@pytest.mark.parametrize("log_interval", [1, 10])
def test_a_sum_read_without_its_count_is_published_at_the_cadence(log_interval):
    """The pipeline family reads the step sum alone: it was once published per step, ten
    times the interval means, and every stage of a healthy pipeline paged. At an interval
    of 1 only the unit changes (milliseconds)."""
    n = names(log_interval)
    both = series.input_series([JOB], 30, (COUNT, SUM), n)
    alone = series.input_series([JOB], 30, (SUM,), n)
    assert alone and all("_sum{" in d["series"] for d in alone)
    assert alone == [d for d in both if "_sum{" in d["series"]]


@pytest.mark.parametrize("value, text", [(1.0e-4, "0.0001"), (1.0734e-4, "0.0001073"),
                                         (-2.5e-7, "-2.5e-07"), (0.5, "0.5"), (12.34567, "12.3457")])
def test_a_tiny_value_keeps_four_significant_digits(value, text):
    """A vanishing norm of 1e-4 with 10% noise was written as a constant 0.0001, which the
    frozen-signal rule of a cadence preset reads as the OTel SDK re-exporting a NaN."""
    assert series.fmt(value) == text


@pytest.mark.parametrize("log_interval", [1, 10, 100])
def test_the_rules_windows_outlast_the_cadence(log_interval):
    """RankFailed remembers the world size for the memory window after the ranks are seen
    to stop, and the checkpoint overhead sets rates over one window against each other.
    At 100 (3h20m of progress) the world size was forgotten after 1h, so a job whose ranks
    all died never paged, and checkpoint seconds over 5m against step seconds over 3h20m
    overstated the overhead for hours after every start."""
    from obsgen import pipeline
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data.update({"presets": ["megatron-otel"], "megatron_log_interval": log_interval})
    files = pipeline.render_all(cfg)
    ranks, ckpt = files["rules/ranks.yaml"], files["rules/checkpoints.yaml"]
    (progress,) = set(re.findall(r"increase\(megatron_training_step_duration_ms_milliseconds"
                                 r"_count\[(\w+)\]\)", ranks))
    memory = set(re.findall(r"max_over_time\(job:train_world_size:max\[(\w+)\]\)", ranks))
    assert {config.seconds(m) - config.seconds(progress) for m in memory} == {
        config.seconds("1h") - config.seconds("2m")}, (memory, progress)
    assert config.seconds(progress) == max(120, log_interval * 120)
    rates = set(re.findall(r"rate\((?:train_checkpoint_seconds_total|megatron_training_step_"
                           r"duration_ms_milliseconds_sum)\[(\w+)\]\)", ckpt))
    assert len(rates) == 1, rates
