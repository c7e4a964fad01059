"""Panel queries evaluated by promtool on hand-made series: the arithmetic (ETA, restarts)
and the joins (ranks to nodes, GPUs and hosts) give the numbers a reader expects, and
another job's series never leak in. Each case is a panel, its inputs and the samples it
must return, as Grafana would ask for them (job_id=job-a, all ranks, 1h range)."""
from __future__ import annotations

import copy

import pytest
import yaml

from obsgen import config, dashboards, promtool
from obsgen.contract import R
from obsgen.promql import Ctx

pytestmark = pytest.mark.promtool

EVAL = "60m"
JOB_A, JOB_B = 'job_id="job-a"', 'job_id="job-b"'
BUSY, BASELINE = "job_rank:train_busy_seconds:mean1m", "job_stage:train_busy_seconds:baseline1m"
NAME = Ctx(config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")).rname


def flat(rec, **by_job: float) -> dict[str, str]:
    """A job record (``R.<key>``) holding one value per job for the hour: job="value"."""
    jobs = {"a": JOB_A, "b": JOB_B}
    return {f"{NAME(rec)}{{{jobs[j]}}}": f"{v:g}x60" for j, v in by_job.items()}


def counter(per_minute: float, minutes: int = 60) -> str:
    return f"0+{per_minute:g}x{minutes}"


# Hosts of job-a (n1, n2) and job-b (n3), as the ranks' records name them, and the clock
# event reasons of their GPUs: 4 software power cap, 8 hardware slowdown, 32 software thermal.
HOSTS = {f'job_node:train_ranks:count{{{j}, node="{h}"}}': "8x60"
         for j, h in ((JOB_A, "n1"), (JOB_A, "n2"), (JOB_B, "n3"))}
REASONS = {("n1", 0): 0, ("n1", 1): 4, ("n1", 2): 12, ("n2", 0): 36, ("n3", 0): 4}

# (dashboard key, panel title, ref) -> (input series {series: values}, expected {labels: value})
CASES = {
    "the ETA is the remaining steps times the mean step time, for the selected job only": (
        ("overview", "ETA", "A"),
        {**flat(R.planned_steps, a=1000, b=1000), **flat(R.current_step, a=400, b=10),
         **flat(R.step_mean, a=2, b=9)},
        {f"{{{JOB_A}}}": 1200}),
    "a restart is counted once although the new processes are new series": (
        ("overview", "Restarts in range", "A"),
        {f'train_run_id{{{JOB_A}, rank="0", instance="10.0.0.1:9400"}}': "0x20 _x40",
         f'train_run_id{{{JOB_A}, rank="0", instance="10.0.1.1:9400"}}': "_x20 1x40",
         f'train_run_id{{{JOB_A}, rank="1", instance="10.0.0.2:9400"}}': "0x20 _x40",
         f'train_run_id{{{JOB_A}, rank="1", instance="10.0.1.2:9400"}}': "_x20 1x40"},
        {f"{{{JOB_A}}}": 1}),
    "the slowest-ranks table names each rank's node, which the busy time carries, and "
    "divides it by its stage's baseline": (
        ("overview", "Slowest 10 ranks now", "A"),
        {**{f'{BUSY}{{{JOB_A}, rank="{r}", stage="0", node="gpu-node-00{r // 2}"}}':
            f"{2 * v}x60" for r, v in enumerate((1.0, 1.02, 1.3, 0.98))},
         f'{BASELINE}{{{JOB_A}, stage="0"}}': "2x60",
         f'{BUSY}{{{JOB_B}, rank="0", stage="0", node="gpu-node-009"}}': "9x60",
         f'{BASELINE}{{{JOB_B}, stage="0"}}': "1x60"},
        {f'{{{JOB_A}, rank="{r}", stage="0", node="gpu-node-00{r // 2}"}}': v
         for r, v in enumerate((1.0, 1.02, 1.3, 0.98))}),
    "the late arrival has the least time inside the all-reduce": (
        ("dp", "Late arrivals: 10 ranks with the least time inside", "A"),
        {**{f'nccl_collective_duration_seconds_sum{{{JOB_A}, rank="{r}", op="AllReduce", group="dp"}}':
            counter(60 * (0.1 if r == 3 else 0.5)) for r in range(4)},
         **{f'nccl_collective_duration_seconds_count{{{JOB_A}, rank="{r}", op="AllReduce", group="dp"}}':
            counter(60) for r in range(4)}},
        {f'{{{JOB_A}, rank="{r}"}}': 0.1 if r == 3 else 0.5 for r in range(4)}),
    "arrival skew is the most minus the least time inside": (
        ("dp", "Arrival skew vs transfer", "B"),
        {**{f'nccl_collective_duration_seconds_sum{{{JOB_A}, rank="{r}", op="AllReduce", group="dp"}}':
            counter(60 * (0.1 if r == 3 else 0.5)) for r in range(4)},
         **{f'nccl_collective_duration_seconds_count{{{JOB_A}, rank="{r}", op="AllReduce", group="dp"}}':
            counter(60) for r in range(4)}},
        {f"{{{JOB_A}}}": 0.4}),
    "the most uneven hosts are the job's, from the spread the TP alert reads": (
        ("tp", "SM-active spread within a host (top 10)", "A"),
        {f'job_node:dcgm_sm_active:stddev{{{JOB_A}, node="n1"}}': "0.5x60",
         f'job_node:dcgm_sm_active:stddev{{{JOB_A}, node="n2"}}': "0.01x60",
         f'job_node:dcgm_sm_active:stddev{{{JOB_B}, node="n3"}}': "0.9x60"},
        {f'job_node:dcgm_sm_active:stddev{{{JOB_A}, node="n1"}}': 0.5,
         f'job_node:dcgm_sm_active:stddev{{{JOB_A}, node="n2"}}': 0.01}),
    "InfiniBand traffic is the median of the job's hosts in all-reduce, not another job's": (
        ("dp", "InfiniBand transmit of the job's hosts", "B"),
        {**{f'job_node:node_infiniband_transmit_bytes:rate5m{{{JOB_A}, node="n{h}"}}': f"{v}x60"
            for h, v in ((1, 1500), (2, 1000), (3, 2000))},
         f'job_node:node_infiniband_transmit_bytes:rate5m{{{JOB_B}, node="n9"}}': "100000x60"},
        {f"{{{JOB_A}}}": 1500}),
    "the actual checkpoint interval is the hour over the checkpoints in it": (
        ("recovery", "Checkpoint interval: actual vs optimal", "A"),
        flat(R.checkpoint_rate, a=0.002, b=0.1),
        {f"{{{JOB_A}}}": 500}),
    "the optimal interval is sqrt(2 x MTBF x seconds per checkpoint)": (
        ("recovery", "Checkpoint interval: actual vs optimal", "B"),
        # 21 restarts in the 7d of the MTBF window (an MTBF of 8 h), 1 s per checkpoint
        {f"{NAME(R.run_id)}{{{JOB_A}}}": "0+1x21 21x39", **flat(R.checkpoint_rate, a=0.002),
         **flat(R.checkpoint_seconds_rate, a=0.002, b=0.5)},
        {f"{{{JOB_A}}}": 240}),  # sqrt(2 x 28,800 s x 1 s)
    "a checkpoint's duration is its seconds over the checkpoints": (
        ("recovery", "Duration per checkpoint", "A"),
        {**flat(R.checkpoint_rate, a=0.002, b=0.1), **flat(R.checkpoint_seconds_rate, a=0.04)},
        {f"{{{JOB_A}}}": 20}),
    "checkpoint write throughput is the bytes the ranks wrote over the seconds spent writing": (
        ("recovery", "Checkpoint write throughput", "A"),
        {**flat(R.checkpoint_bytes_rate, a=2e6, b=9), **flat(R.checkpoint_seconds_rate, a=0.04)},
        {f"{{{JOB_A}}}": 5e7}),
    "a clock reason counts the job's GPUs with that bit set, whatever the other bits": (
        ("hardware", "GPUs held below full clocks, by reason", "A"),
        {**HOSTS, **{f'DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{UUID="GPU-{h}{g}", gpu="{g}", Hostname="{h}"}}': f"{v}x60"
                     for (h, g), v in REASONS.items()}},
        {f"{{{JOB_A}}}": 3}),
    "a clock reason of a higher bit is not mistaken for a lower one": (
        ("hardware", "GPUs held below full clocks, by reason", "B"),
        {**HOSTS, **{f'DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{UUID="GPU-{h}{g}", gpu="{g}", Hostname="{h}"}}': f"{v}x60"
                     for (h, g), v in REASONS.items()}},
        {f"{{{JOB_A}}}": 1}),
    "the hottest GPU is taken per host of the job, labelled with the host alone": (
        ("hardware", "Hottest GPU per host", "A"),
        {**HOSTS, **{f'DCGM_FI_DEV_GPU_TEMP{{UUID="GPU-{h}{g}", gpu="{g}", Hostname="{h}", pod="p{g}"}}': f"{60 + g + 10 * (h == 'n2')}x60"
                     for (h, g) in REASONS}},
        {f'{{{JOB_A}, node="n1"}}': 62, f'{{{JOB_A}, node="n2"}}': 70}),
    # GPU counters collected: A SM-active, E the DBE counter, J temperature (contract order)
    "a field no GPU reports reads 0, which the panel shows as not collected": (
        ("hardware", "GPU counters collected", "A"),
        {**HOSTS, **{f'DCGM_FI_DEV_GPU_TEMP{{UUID="GPU-{h}{g}", gpu="{g}", Hostname="{h}"}}': "60x60"
                     for (h, g) in REASONS}},
        {"{}": 0}),
    "a field counts the job's GPUs that report it, not another job's": (
        ("hardware", "GPU counters collected", "J"),
        {**HOSTS, **{f'DCGM_FI_DEV_GPU_TEMP{{UUID="GPU-{h}{g}", gpu="{g}", Hostname="{h}"}}': "60x60"
                     for (h, g) in REASONS}},
        {"{}": 4}),
    "a counter field counts the GPUs whose counter is scraped, on main's hostname label too": (
        ("hardware", "GPU counters collected", "E"),
        {**HOSTS, **{f'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{UUID="GPU-{h}{g}", gpu="{g}", hostname="{h}"}}': "0x60"
                     for (h, g) in REASONS}},
        {"{}": 4}),
    # dashboards.records: the panels read the panels family's series
    "with dashboards.records, the least time inside TP collectives is the lowest rank's "
    "record, of the selected job only": (
        ("tp", "Time inside TP collectives across ranks", "C", True),
        {**{f'{NAME(R.tp_time_rank)}{{{JOB_A}, rank="{r}"}}': f"{v}x60"
            for r, v in enumerate((0.30, 0.31, 0.12, 0.29))},
         f'{NAME(R.tp_time_rank)}{{{JOB_B}, rank="0"}}': "0.01x60"},
        {f"{{{JOB_A}}}": 0.12}),
    "with dashboards.records, the arrival skew is the most minus the least recorded "
    "all-reduce time of the job's ranks": (
        ("dp", "Arrival skew vs transfer", "B", True),
        {**{f'{NAME(R.dp_allreduce_rank)}{{{JOB_A}, rank="{r}"}}': f"{v}x60"
            for r, v in enumerate((0.5, 0.25, 0.375))},
         f'{NAME(R.dp_allreduce_rank)}{{{JOB_B}, rank="0"}}': "4x60"},
        {f"{{{JOB_A}}}": 0.25}),
    "with dashboards.records, the GPU errors are the job's recorded totals": (
        ("overview", "GPU errors on the job's GPUs", "A", True),
        flat(R.gpu_dbe_job, a=2, b=5), {f"{NAME(R.gpu_dbe_job)}{{{JOB_A}}}": 2}),
    "with dashboards.records, the line rate is the job's recorded fastest host": (
        ("hardware", "InfiniBand transmit per host during all-reduce", "B", True),
        flat(R.ib_line_rate_job, a=2e11, b=1e11), {f"{NAME(R.ib_line_rate_job)}{{{JOB_A}}}": 2e11}),
}


def _query(key: str, title: str, ref: str, records: bool = False, **dash) -> str:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")
    cfg.data["dashboards"]["records"] = records
    cfg.data["dashboards"].update(dash)
    for q in dashboards.panel_queries(cfg):
        if q.uid == f"obsgen-{key}" and q.panel == title and q.ref == ref:
            return q.promql("job-a", rate_interval="2m", range_="1h")
    raise KeyError((key, title, ref))


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_panel_query_on_hand_made_series(case, tmp_path):
    panel, series, expected = CASES[case]
    doc = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series.items()],
        "promql_expr_test": [{
            "expr": _query(*panel), "eval_time": EVAL,
            "exp_samples": [{"labels": labels, "value": value} for labels, value in expected.items()]}],
    }]}
    path = tmp_path / "panel.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = promtool.test_rules([path])
    assert result.ok, result.output


@pytest.mark.parametrize("records", [False, True], ids=["computed", "recorded"])
def test_the_straggler_heatmap_shows_the_ranks_with_the_highest_score_of_the_range(records, tmp_path):
    """With room for two ranks, the heatmap shows the two whose busy time rose furthest above
    their stage's baseline in the hour (rank 1 for ten minutes only, rank 3 throughout),
    each divided by its own stage's baseline, not the ranks with the most busy time (rank 2,
    in a heavier stage), and none of another job's."""
    busy = {0: "2x60", 1: "2x45 3x10 2x5", 2: "4.2x60", 3: "6x60"}
    series = {f'{BUSY}{{{JOB_A}, rank="{r}", stage="{r // 2}", node="n{r}"}}': v
              for r, v in busy.items()}
    series.update({f'{BASELINE}{{{JOB_A}, stage="0"}}': "2x60", f'{BASELINE}{{{JOB_A}, stage="1"}}': "4x60"})
    # another job's rank, far slower, is not this job's
    series.update({f'{BUSY}{{{JOB_B}, rank="0", stage="0", node="n9"}}': "9x60",
                   f'{BASELINE}{{{JOB_B}, stage="0"}}': "1x60"})
    if records:  # the panels family's score of every rank
        ratios = {0: "1x60", 1: "1x45 1.5x10 1x5", 2: "1.05x60", 3: "1.5x60"}
        series.update({f'{NAME(R.busy_ratio)}{{{JOB_A}, rank="{r}", stage="{r // 2}", node="n{r}"}}': v
                       for r, v in ratios.items()})
        series[f'{NAME(R.busy_ratio)}{{{JOB_B}, rank="0", stage="0", node="n9"}}'] = "9x60"
    doc = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": k, "values": v} for k, v in series.items()],
        "promql_expr_test": [{
            "expr": _query("overview", "Straggler score per rank", "A", records, heatmap_ranks=2),
            "eval_time": EVAL,
            "exp_samples": [
                {"labels": f'{{{JOB_A}, rank="1", stage="0", node="n1"}}', "value": 1},
                {"labels": f'{{{JOB_A}, rank="3", stage="1", node="n3"}}', "value": 1.5}]}],
    }]}
    if records:  # the recorded series keep their name
        for e in doc["tests"][0]["promql_expr_test"][0]["exp_samples"]:
            e["labels"] = NAME(R.busy_ratio) + e["labels"]
    path = tmp_path / "heatmap.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = promtool.test_rules([path])
    assert result.ok, result.output
