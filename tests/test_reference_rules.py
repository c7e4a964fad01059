"""The fixtures can fail: the reference document's rules (section 12), swapped in for
obsgen's, fail exactly the cases that show their bugs.

Each row replaces one alert's expression with the document's logic (in obsgen's label
shape, so only the logic differs) and names the fixture case it must fail and a piece
of promtool's output that shows how.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from obsgen import promtool

from .promtool import build

pytestmark = [pytest.mark.promtool, pytest.mark.long]  # minutes: make long (CI)
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    family: str
    alert: str
    expr: str
    case: str  # start of the case name that must fail
    shows: str  # text promtool prints for the failure
    at: str = ""  # also evaluate the expression itself at this time (shows eval errors)


MUTANTS = {
    "the document's persistent-straggler rule raises an evaluation error with two ranks": Mutant(
        "stragglers", "Train_Straggler_Persistent",
        """count_over_time(
          (max by (job_id, rank) (rate(train_step_seconds_bucket[5m]))
           == on(job_id) max by (job_id) (rate(train_step_seconds_bucket[5m])))
        [30m:5m]) > 4""",
        "one rank 20% slower in compute", "many-to-one matching must be explicit", at="50m"),
    "comparing step times (with the matching fixed) misses a compute straggler": Mutant(
        "stragglers", "Train_Straggler_Persistent",
        """histogram_quantile(0.5, sum by (job_id, rank, stage, node, le) (rate(train_step_seconds_bucket[5m])))
        / on (job_id) group_left ()
        quantile by (job_id) (0.5, histogram_quantile(0.5, sum by (job_id, rank, le) (rate(train_step_seconds_bucket[5m]))))
        > 1.1""",
        "one rank 20% slower in compute", "got:[]"),
    "the document's explosion rule never fires once a NaN is in its baseline": Mutant(
        "gradients", "Train_GradientExplosion",
        "max by (job_id) (train_grad_norm > 10 * avg_over_time(train_grad_norm[1h]))",
        "a NaN episode does not poison the baseline", "got:[]"),
    "the document's bubble rule compares vectors whose labels never match": Mutant(
        "pipeline", "Train_Bubble_Excess",
        """1 - (sum by (job_id, stage) (rate(pipeline_stage_seconds_sum[5m]))
           / sum by (job_id, stage) (rate(train_step_seconds_sum[5m])))
        > 1.5 * job:pipeline_bubble:theoretical_ratio""",
        "one stage's bubble at 45%", "got:[]"),
    "the document's checkpoint rule lets a healthy job hide a stalled one": Mutant(
        "checkpoints", "Train_NoCheckpoints",
        "time() - max(train_checkpoint_timestamp_seconds) > 30 * 60",
        "two jobs where only one stops checkpointing", "got:[]"),
    "a rank count without memory goes silent when every rank is gone": Mutant(
        "ranks", "Train_RankFailed",
        "count by (job_id) (train_world_size) < max by (job_id) (train_world_size)",
        "all ranks gone fires", "got:[]"),
    "the document's InfiniBand join matches on a Hostname neither side has": Mutant(
        "fabric", "Train_IB_Asymmetry",
        """rate(node_infiniband_port_data_transmitted_bytes_total[1m])
          * on(Hostname) group_left() (
              rate(nccl_collective_duration_seconds_count{op="AllReduce"}[1m]) > 0
          )""",
        "a host sending 40% of its peers", "many-to-many matching not allowed", at="30m"),
    "the document's TP rule (stddev by pod) never fires with one GPU per pod": Mutant(
        "gpus", "Train_TP_Imbalance",
        """stddev by (pod) (
          DCGM_FI_PROF_SM_ACTIVE * on(pod, namespace) group_left() kube_pod_labels{label_job_id!=""}
        ) > 0.05""",
        "on Kubernetes with one pod per GPU", "got:[]"),
    "reading the XID gauge as a counter fires on application XIDs": Mutant(
        "gpus", "Train_GPU_ECC",
        "increase(DCGM_FI_DEV_XID_ERRORS[1h]) > 0",
        "XIDs that are not memory errors", "exp:[],got:[0:"),
    "the document's restart count (changes of train_run_id) is 0 when restarts are new series": Mutant(
        "recovery", "Train_RestartLoop",
        "sum by (job_id) (changes(train_run_id[1h])) >= 3",
        "restarts every 7 minutes that never reach a checkpoint", "got:[]"),
    "a p50 from the default buckets cannot see a 30% step-time regression": Mutant(
        "progress", "Train_StepTime_Regression",
        """histogram_quantile(0.5, sum by (job_id, le) (rate(train_step_seconds_bucket[5m])))
        / on (job_id)
        histogram_quantile(0.5, sum by (job_id, le) (rate(train_step_seconds_bucket[5m] offset 40m)))
        > 1.2""",
        "steps 30% slower from minute 60", "got:[]"),
    "without the quiet window a long warm-up after a restart fires": Mutant(
        "progress", "Train_StepTime_Regression",
        "job:train_step_seconds:mean5m / on (job_id) (job:train_step_seconds:median6h > 0) > 1.2",
        "a restart followed by 40 minutes of slow warm-up", "exp:[],got:[0:"),
}


def _swap(path: Path, alert: str, expr: str, out: Path) -> Path:
    doc = yaml.safe_load(path.read_text())
    hits = 0
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                rule["expr"], hits = expr, hits + 1
    assert hits == 1, f"{alert} not found in {path}"
    target = out / path.name
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


@pytest.mark.parametrize("name", MUTANTS, ids=list(MUTANTS))
def test_reference_rule_fails_the_case_that_shows_its_bug(name, tmp_path):
    m = MUTANTS[name]
    fixture = yaml.safe_load(build.render_family(m.family))
    files = []
    for rel in fixture["rule_files"]:
        src = (ROOT / "tests" / "promtool" / rel).resolve()
        files.append(str(_swap(src, m.alert, m.expr, tmp_path) if src.stem == m.family else src))
    fixture["rule_files"] = files
    fixture["tests"] = [t for t in fixture["tests"] if t["name"].startswith(m.case)]
    assert len(fixture["tests"]) == 1, f"no single case starts with {m.case!r}"
    if m.at:  # promtool reports evaluation errors of queries, not of rules
        fixture["tests"][0].pop("alert_rule_test", None)
        fixture["tests"][0]["promql_expr_test"] = [{"expr": m.expr, "eval_time": m.at, "exp_samples": []}]
    test_file = tmp_path / "fixture.yaml"
    test_file.write_text(yaml.safe_dump(fixture, sort_keys=False))

    result = promtool.test_rules([test_file])
    assert not result.ok, f"the reference rule passed the case {m.case!r}: the case cannot catch it"
    assert m.shows in "".join(result.output.split()) or m.shows in result.output, result.output[-3000:]


# The same mutants against the scenarios obsgen renders for a user's renamed and
# re-thresholded config (obsgen.scenarios): a broken alert fails them too.
RENAMED = ("metrics: {train_grad_norm: grad_norm_l2, train_step_seconds: iteration_seconds, "
           "train_world_size: world_size, train_compute_seconds: megatron_compute_seconds}\n"
           "labels: {job_id: run}\n"
           "thresholds: {straggler_ratio: 1.15, grad_explosion_factor: 8, step_regression_ratio: 1.3}\n"
           "dashboards: {enabled: false}\n")


def _renamed(expr: str, cfg) -> str:
    """The mutant in the config's names: contract metrics (a histogram's series with them)
    and labels, as whole tokens (never inside a recorded series' name)."""
    from obsgen.scenarios.series import Names
    names = Names(cfg)
    table = {**names.metrics, **names.labels}
    return re.sub(r"(?<![\w:])[A-Za-z_][A-Za-z0-9_]*(?![\w:])",
                  lambda m: table.get(m.group(0), m.group(0)), expr)


@pytest.fixture(scope="module")
def renamed_repo(tmp_path_factory):
    from obsgen import config, pipeline, registry
    root = tmp_path_factory.mktemp("renamed")
    (root / "obsgen.yaml").write_text(RENAMED)
    cfg = config.load(root / "obsgen.yaml", alert_names=registry.alert_names())
    for rel, text in pipeline.render_all(cfg).items():
        if rel.startswith(("rules/", "tests/promtool/")):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    return root, cfg


@pytest.mark.parametrize("name", MUTANTS, ids=list(MUTANTS))
def test_reference_rule_fails_the_scenarios_rendered_for_a_renamed_config(name, renamed_repo, tmp_path):
    from obsgen.scenarios import run as scenario_run
    root, cfg = renamed_repo
    m = MUTANTS[name]
    rules = tmp_path / "rules"
    rules.mkdir()
    for path in sorted((root / "rules").glob("*.yaml")):
        if path.stem == m.family:
            _swap(path, m.alert, _renamed(m.expr, cfg), rules)
        else:
            (rules / path.name).write_text(path.read_text())
    tests = tmp_path / "tests" / "promtool"
    tests.mkdir(parents=True)
    scenario = tests / f"obsgen-{m.family}.yaml"
    scenario.write_text((root / "tests" / "promtool" / scenario.name).read_text())
    outcomes = scenario_run.run(sorted(rules.glob("*.yaml")), [scenario], cfg)
    assert any(not o.ok for o in outcomes), (
        f"the reference rule passed every scenario of {m.family}: {[o.label for o in outcomes]}")
