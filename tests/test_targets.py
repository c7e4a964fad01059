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
@pytest.mark.parametrize("engine", ["Prometheus 2.42", "Prometheus 3.5"])
@pytest.mark.parametrize("fmt", list(targets.TARGETS))
def test_groups_of_every_format_pass_promtool(fmt, engine, tmp_path):
    files = []
    for path, text in render(fmt).items():
        out = tmp_path / Path(path).name
        out.write_text(yaml.safe_dump({"groups": groups_of(fmt, yaml.safe_load(text))}))
        files.append(out)
    result = loads(engine, files)
    assert result.ok, result.output


def test_mimir_namespaces_are_unique_across_files():
    namespaces = [yaml.safe_load(t)["namespace"] for t in render("mimir").values()]
    assert len(set(namespaces)) == len(namespaces) == len(FAMILIES)


def test_thanos_aborts_only_liveness_groups_on_partial_data():
    strategies = {Path(p).stem: yaml.safe_load(t)["groups"][0]["partial_response_strategy"]
                  for p, t in render("thanos").items()}
    assert strategies == {f: ("abort" if f == "ranks" else "warn") for f in FAMILIES}


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


UNSTABLE = Path(__file__).resolve().parent.parent / ".tools" / "unstable" / "bin"


def engines() -> dict[str, tuple[str, str | None]]:
    """Each engine of targets.ENGINES: how it loads a rule file, and its binary (None where
    it is not installed)."""
    from .test_promtool import promtools
    import shutil
    system = shutil.which("vmalert", path="/usr/bin:/usr/local/bin")
    unstable = UNSTABLE / "vmalert"
    return {"Prometheus 2.42": ("promtool", promtools()["2"]),
            "Prometheus 3.5": ("promtool", promtools()["3"]),
            "vmalert 1.79": ("vmalert", system),
            "vmalert 1.145": ("vmalert", str(unstable) if unstable.exists() else None)}


def loads(engine: str, paths: list[Path]) -> promtool.Result:
    kind, binary = engines()[engine]
    if not binary:
        from .test_promtool import missing
        missing(engine)
    if kind == "promtool":
        return promtool.check_rules(paths, binary=binary)
    return promtool.vmalert_check(paths, binary=binary)


@pytest.mark.promtool
@pytest.mark.vmalert
@pytest.mark.parametrize("engine", ["Prometheus 2.42", "Prometheus 3.5", "vmalert 1.79", "vmalert 1.145"])
def test_the_table_of_refused_fields_is_what_each_engine_answers(engine, tmp_path):
    """targets.REFUSED_BY, against each engine's own loader: a file with the field loads
    exactly where the table says it does (and the same file without it loads everywhere)."""
    rule = {"alert": "A", "expr": "vector(1) > 0"}
    variants = {("rule", "keep_firing_for"): {"name": "g", "rules": [{**rule, "keep_firing_for": "5m"}]},
                ("group", "query_offset"): {"name": "g", "query_offset": "1m", "rules": [rule]},
                ("group", "labels"): {"name": "g", "labels": {"env": "prod"}, "rules": [rule]}}
    assert set(variants) == set(targets.REFUSED_BY)
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [rule]}]}))
    assert loads(engine, [plain]).ok
    for field, group in variants.items():
        path = tmp_path / f"{field[1]}.yaml"
        path.write_text(yaml.safe_dump({"groups": [group]}))
        result = loads(engine, [path])
        assert result.ok == (engine not in targets.REFUSED_BY[field]), (field, result.output)


# every format with ruler: any, and those a Prometheus server loads with ruler: prometheus
# (tests/test_config.py: mimir and thanos refuse it)
RENDERINGS = [(f, "any") for f in targets.TARGETS] + [
    ("prometheus", "prometheus"), ("prometheus-operator", "prometheus")]


@pytest.mark.parametrize("fmt,ruler", RENDERINGS)
def test_no_format_renders_a_field_its_engines_refuse(fmt, ruler):
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data.update({"format": fmt, "ruler": ruler})
    target = targets.TARGETS[fmt]
    for path, text in pipeline.render_all(cfg).items():
        if path.startswith("rules/"):
            assert targets.refused(fmt, target.groups(yaml.safe_load(text))) == [], path


def test_a_field_an_engine_refuses_stops_the_render_naming_it():
    """The render's validation refuses a group field an engine of the format would refuse,
    before promtool runs."""
    doc = {"groups": [{"name": "obsgen-ranks", "query_offset": "1m",
                       "rules": [{"record": "job:a:max", "expr": "max by (job_id) (up)"}]}]}
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    problems = pipeline.check_rule_files({"rules/ranks.yaml": yaml.safe_dump(doc)}, cfg)
    assert problems == ["rules/ranks.yaml: group obsgen-ranks: group field query_offset is "
                        "refused by Prometheus 2.42, vmalert 1.145, vmalert 1.79, which load "
                        "format prometheus"]
    cfg.data["format"] = "prometheus-operator"
    wrapped = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
               "metadata": {"name": "x"}, "spec": doc}
    assert pipeline.check_rule_files({"rules/ranks.yaml": yaml.safe_dump(wrapped)}, cfg) == [
        "rules/ranks.yaml: group obsgen-ranks: group field query_offset is refused by "
        "Prometheus 2.42, which load format prometheus-operator"]


@pytest.mark.vmalert
def test_every_rendered_rule_file_loads_in_both_vmalert_lines():
    root = Path(__file__).resolve().parent.parent
    for engine in ("vmalert 1.79", "vmalert 1.145"):
        result = loads(engine, sorted((root / "rules").glob("*.yaml")))
        assert result.ok, (engine, result.output)
