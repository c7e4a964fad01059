"""Late reads (obsgen.scenarios.late): the rules as a ruler on remote storage reads them.

The rewrite is checked by case, and the mode on obsgen's own scenarios: every alert
gives the same answer when each record is read one evaluation late and an ended record
lingers for the lookback, later by at most its documented delay. A rule that divides the
new processes' means by a median it reads back from storage fails it.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from obsgen.scenarios import late

ROOT = Path(__file__).resolve().parent.parent
RECS = {"job:a:mean", "job:b:max"}

# sentence -> (expression, its late form at a 30s interval with no lookback, with 5m)
CASES = {
    "an instant read is one interval earlier, and lingers through last_over_time": (
        "job:a:mean > 1",
        "job:a:mean offset 30s > 1",
        "last_over_time(job:a:mean[5m] offset 30s) > 1"),
    "an offset it has is added to": (
        "job:a:mean offset 10m",
        "job:a:mean offset 10m30s",
        "last_over_time(job:a:mean[5m] offset 10m30s)"),
    "a range read keeps its range, gets the offset and needs no lookback": (
        'count_over_time(job:a:mean{x="1"}[30m])',
        'count_over_time(job:a:mean{x="1"}[30m] offset 30s)',
        'count_over_time(job:a:mean{x="1"}[30m] offset 30s)'),
    "raw series, label names and string literals are left alone": (
        'label_replace(up, "job:a:mean", "$1", "job", "(.*)") and on (job_id) job:b:max',
        'label_replace(up, "job:a:mean", "$1", "job", "(.*)") and on (job_id) job:b:max offset 30s',
        'label_replace(up, "job:a:mean", "$1", "job", "(.*)") and on (job_id) '
        'last_over_time(job:b:max[5m] offset 30s)'),
    "a selector whose label value holds a brace is read whole": (
        'job:a:mean{x="}"} / job:b:max',
        'job:a:mean{x="}"} offset 30s / job:b:max offset 30s',
        'last_over_time(job:a:mean{x="}"}[5m] offset 30s) / last_over_time(job:b:max[5m] offset 30s)'),
    "a longer name that starts with a record's name is another series": (
        "job:a:mean_total",
        "job:a:mean_total",
        "job:a:mean_total"),
}


@pytest.mark.parametrize("expr,plain,lingering", list(CASES.values()), ids=list(CASES))
def test_read_late(expr, plain, lingering):
    assert late.read_late(expr, RECS, 30) == plain
    assert late.read_late(expr, RECS, 30, 300) == lingering


def _docs():
    return [{"groups": [
        {"name": "obsgen-x", "rules": [
            {"record": "job:a:mean", "expr": "rate(x[5m])"},
            {"record": "job:b:max", "expr": "max(job:a:mean) * on () job:f:fact"},
            {"alert": "A", "expr": "job:b:max > 1"},
            {"alert": "Raw", "expr": "up == 0"}]},
        {"name": "obsgen-x-facts", "interval": "4m", "rules": [
            {"record": "job:f:fact", "expr": "max(info)"}]}]}]


def test_an_alert_is_as_late_as_its_longest_chain_of_records_and_facts_add_hops_only():
    assert late.depths(_docs(), 30) == {"A": 2, "Raw": 0}
    assert late.delays(_docs(), 30) == {"A": 60.0, "Raw": 0.0}


def test_the_slowest_path_lists_each_late_read_by_the_interval_of_the_rule_that_reads():
    assert late.paths(_docs(), 30) == {"A": (30, 30), "Raw": ()}


VM = late.Ruler("vm", "", latency_offset=1, flush=1, ingest=1, new_series=10)
# sentence -> (ruler, slowest path, new series on it, seconds added)
RULERS = {
    "a raw read pays the latency offset only": (VM, (), False, 1),
    "each record read waits one evaluation when write and offset fit in it": (VM, (30, 30), False, 61),
    "a new series fits in a 30s evaluation": (VM, (30, 30), True, 61),
    "a new series at a 10s interval costs a second evaluation per read": (VM, (10, 10), True, 41),
    "a 30s latency offset at a 30s interval costs two evaluations per read": (
        late.Ruler("vm", "", latency_offset=30, flush=5, ingest=1), (30, 30, 30), False, 210),
    "a query offset counts once, and a ruler that has its records reads them at once": (
        late.Ruler("mimir", "", query_offset=60, reads_back=False), (30, 30, 30), False, 60),
}


@pytest.mark.parametrize("ruler,path,new,added", list(RULERS.values()), ids=list(RULERS))
def test_what_a_ruler_adds(ruler, path, new, added):
    assert ruler.delay(path, new=new) == added


def test_the_remote_ruler_page_lists_every_alert_with_each_rulers_delay():
    from obsgen import pipeline
    from obsgen.config import defaults
    page = pipeline.render_all(defaults())["docs/remote-rulers.md"]
    rows = {line.split(" | ")[0][2:]: line for line in page.splitlines()
            if line.startswith("| Train_")}
    assert "Train_Straggler_Persistent" in rows and "Train_GradientNonFinite" in rows
    assert all(line.count(" | +") == len(late.RULERS) for line in rows.values())
    assert "-remoteWrite.url" in page and "partial_response_strategy" in page


def test_the_late_rules_of_a_group_read_at_its_own_interval():
    docs = late.late_rules(_docs(), 30)
    fact = next(g for g in docs[0]["groups"] if g["name"].endswith("-facts"))
    assert fact["rules"][0]["expr"] == "max(info)"
    main = docs[0]["groups"][0]["rules"]
    assert main[1]["expr"] == "max(job:a:mean offset 30s) * on () job:f:fact offset 30s"


def _obsgen(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obsgen", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.promtool
def test_obsgens_scenarios_hold_when_records_are_read_late():
    done = _obsgen(ROOT, "test", "--late-reads")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 failed" in done.stdout


@pytest.mark.promtool
def test_a_flag_that_reads_its_median_back_from_storage_fails_the_restart(tmp_path):
    """The straggler flag before it computed its median from the same read of the means:
    a restart on new hosts divided their warm-up by the old hosts' lingering median."""
    for folder in ("rules", "tests/promtool"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    path = tmp_path / "rules" / "stragglers.yaml"
    doc = yaml.safe_load(path.read_text())
    flag = next(r for g in doc["groups"] for r in g["rules"]
                if r.get("record") == "job_rank:train_straggler:flag1m")
    flag["expr"] = ("job_rank:train_busy_seconds:mean1m\n/ on (job_id, stage) group_left ()\n"
                    "(job_stage:train_busy_seconds:baseline1m > 0) > 1.07\n"
                    "and on (job_id, stage) job_stage:train_straggler:settled5m")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    for p in (tmp_path / "tests" / "promtool").glob("*.yaml"):
        if not p.name.startswith("obsgen-stragglers"):
            p.unlink()
    assert _obsgen(tmp_path, "test").returncode == 0  # Prometheus: same-evaluation reads
    done = _obsgen(tmp_path, "test", "--late-reads")
    assert done.returncode == 1
    assert "FAIL a restart with a 1m gap" in done.stdout
