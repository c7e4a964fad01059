"""examples/prometheus/drop-unread-buckets.yaml drops exactly the bucket series that no
rule or panel obsgen renders reads, and Prometheus accepts it and the other examples."""
from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from obsgen import contract, pipeline
from obsgen.config import DEFAULTS, Config
from obsgen.dashboards import panel_queries
from obsgen.promql import identifiers

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "prometheus" / "drop-unread-buckets.yaml"


def _drop_rule() -> dict:
    job = yaml.safe_load(EXAMPLE.read_text())["scrape_configs"][0]
    (rule,) = job["metric_relabel_configs"]
    return rule


def test_the_regex_names_every_histogram_whose_buckets_nothing_reads():
    cfg = Config(copy.deepcopy(DEFAULTS), "(defaults)")
    files = pipeline.render_all(cfg)
    exprs = [r["expr"] for p, text in files.items() if p.startswith("rules/")
             for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    exprs += [q.promql("job", rate_interval="2m", range_="1h", interval="30s")
              for q in panel_queries(cfg)]
    read = set().union(*(identifiers(e) for e in exprs))
    buckets = {m.key + "_bucket" for m in contract.METRICS.values() if m.type == contract.HISTOGRAM}
    assert buckets - read == buckets  # obsgen reads means from _sum and _count only
    rule = _drop_rule()
    assert rule["source_labels"] == ["__name__"] and rule["action"] == "drop"
    # Prometheus anchors relabel regexes: a name is dropped when the whole name matches
    every = {m.key + s for m in contract.METRICS.values()
             for s in (("_bucket", "_sum", "_count") if m.type == contract.HISTOGRAM else ("",))}
    dropped = {n for n in every if re.fullmatch(rule["regex"], n)}
    assert dropped == buckets - read


@pytest.mark.parametrize("example", [EXAMPLE.name, "megatron-otel-mixed.yaml"])
def test_promtool_accepts_the_scrape_job(tmp_path, example):
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text((EXAMPLE.parent / example).read_text())
    res = subprocess.run(["promtool", "check", "config", str(cfg)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
