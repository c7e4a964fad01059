"""Rule file formats: golden files, and each format's groups still valid Prometheus rules."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from obsgen import config, pipeline, promtool, registry, targets

from .golden import assert_golden

GOLDEN = Path(__file__).resolve().parent / "golden" / "targets"
FAMILIES = [f.NAME for f in registry.default_families()]


def render(fmt: str) -> dict[str, str]:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")
    cfg.data["format"] = fmt
    return {p: t for p, t in pipeline.render_all(cfg).items() if p.startswith("rules/")}


def groups_of(fmt: str, doc: dict) -> list[dict]:
    """The rule groups inside a document of the format, checked for its wrapper."""
    if fmt == "prometheus":
        assert set(doc) == {"groups"}
        return doc["groups"]
    if fmt == "prometheus-operator":
        assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
        assert doc["metadata"]["namespace"] == "monitoring"
        assert doc["metadata"]["labels"] == {"app.kubernetes.io/part-of": "obsgen"}
        return doc["spec"]["groups"]
    if fmt == "mimir":  # mimirtool decodes with KnownFields: these two keys only
        assert set(doc) == {"namespace", "groups"}
        return doc["groups"]
    if fmt == "thanos":
        for g in doc["groups"]:
            assert g["partial_response_strategy"] in ("abort", "warn")
        return [{k: v for k, v in g.items() if k != "partial_response_strategy"} for g in doc["groups"]]
    raise AssertionError(fmt)


@pytest.mark.parametrize("fmt", [t for t in targets.TARGETS if t != "prometheus"])
@pytest.mark.parametrize("family", FAMILIES)
def test_target_matches_golden(fmt, family):
    assert_golden(GOLDEN / fmt / f"{family}.yaml", render(fmt)[f"rules/{family}.yaml"])


def test_prometheus_target_is_the_committed_rules():
    root = Path(__file__).resolve().parent.parent
    for path, text in render("prometheus").items():
        assert (root / path).read_text() == text, f"{path} is stale: make render"


@pytest.mark.promtool
@pytest.mark.parametrize("fmt", list(targets.TARGETS))
def test_groups_of_every_format_pass_promtool(fmt, tmp_path):
    files = []
    for path, text in render(fmt).items():
        out = tmp_path / Path(path).name
        out.write_text(yaml.safe_dump({"groups": groups_of(fmt, yaml.safe_load(text))}))
        files.append(out)
    result = promtool.check_rules(files)
    assert result.ok, result.output


def test_mimir_namespaces_are_unique_across_files():
    namespaces = [yaml.safe_load(t)["namespace"] for t in render("mimir").values()]
    assert len(set(namespaces)) == len(namespaces) == len(FAMILIES)


def test_thanos_aborts_only_liveness_groups_on_partial_data():
    strategies = {Path(p).stem: yaml.safe_load(t)["groups"][0]["partial_response_strategy"]
                  for p, t in render("thanos").items()}
    assert strategies == {f: ("abort" if f == "ranks" else "warn") for f in FAMILIES}


@pytest.mark.vmalert
def test_every_rendered_rule_file_loads_in_vmalert():
    root = Path(__file__).resolve().parent.parent
    result = promtool.vmalert_check(sorted((root / "rules").glob("*.yaml")))
    assert result.ok, result.output


@pytest.mark.vmalert
def test_vmalert_refuses_a_broken_rule_file(tmp_path):
    """The check can fail: a rule vmalert cannot parse makes it exit non-zero."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups:\n- name: g\n  rules:\n  - record: a:b:c\n    expr: sum by (x (rate(y[5m]))\n")
    assert not promtool.vmalert_check([bad]).ok


def test_format_flag_overrides_config(tmp_path):
    from obsgen.cli import main
    assert main(["render", "--format", "mimir", "--out", str(tmp_path)]) == 0
    assert yaml.safe_load((tmp_path / "rules" / "ranks.yaml").read_text())["namespace"] == "obsgen-ranks"
