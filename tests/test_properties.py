"""Property-based tests: any valid config renders rules promtool accepts; any invalid one
is refused with one line per problem, no traceback, and nothing written.

Configs are generated as text and as bytes (any bytes, and valid configs with bytes put
in: invalid UTF-8, NUL, YAML syntax, alias bombs, deep nesting, object tags).

`make test` runs 10 examples of each property and `make long` (CI) 200, both derandomized
so they are repeatable (OBSGEN_EXAMPLES); `make fuzz` runs 5,000 with fresh randomness
(OBSGEN_FUZZ=1). promtool runs once over the
rule files of every valid example, after they were all rendered.
"""
from __future__ import annotations

import json
import os
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsgen import config, contract, pipeline, promtool, registry, render, targets
from obsgen.cli import main
from obsgen.presets import PRESETS
from obsgen.render import MARKER

FUZZ = os.environ.get("OBSGEN_FUZZ") == "1"
EXAMPLES = 5000 if FUZZ else int(os.environ.get("OBSGEN_EXAMPLES") or 10)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not FUZZ, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
NAMES = registry.alert_names()
FAMILIES = [f.NAME for f in registry.FAMILIES]

# Building blocks ---------------------------------------------------------------------------
label_name = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda s: s not in ("le", "quantile"))
metric_name = st.from_regex(r"[a-z][a-z0-9_:]{0,20}", fullmatch=True)
# Label values: any text Prometheus can hold, quotes, backslashes, braces, templates included.
text = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
    # and the values that broke things before (fuzzing found NEL): always in the mix
    st.sampled_from(['a"b', "c\\d", "e\nf", "{{ $value }}", "g\x85h", "i\u2028j", "{k=~\".*\"}"]))
regex = st.sampled_from(["a|b", "prod-.*", "(?i)train", "[0-9]+", "a\\.b", "x{2,3}", ".*"])
unit = st.sampled_from(["s", "m", "h"])


def duration(low_s: int, high_s: int):
    return st.integers(low_s, high_s).map(lambda n: f"{n}s" if n % 60 else f"{n // 60}m")


def unique_renames(keys: list[str], names) -> st.SearchStrategy:
    """Renames of some keys to names distinct from each other and from kept defaults."""
    def valid(mapping):
        final = {k: mapping.get(k, k) for k in keys}
        return len(set(final.values())) == len(final)
    return st.dictionaries(st.sampled_from(keys), names, max_size=4).filter(valid)


@st.composite
def valid_configs(draw) -> dict:
    # The scenario tests are rendered by their own property test (tests/test_scenario_
    # properties.py): a render with them simulates jobs for seconds.
    cfg: dict = {"scenario_tests": {"enabled": False, "path": draw(st.sampled_from(
        ["tests/promtool", "ci/tests", "promtool"]))}}
    if draw(st.booleans()):
        cfg["metrics"] = draw(unique_renames(list(contract.METRICS), metric_name))
    if draw(st.booleans()):
        keys = [k for k in contract.LABELS if k not in ("job", "instance")]
        # never to the scrape labels Prometheus adds: CORRUPT's
        cfg["labels"] = draw(unique_renames(keys, label_name.filter(
            lambda n: n not in ("job", "instance"))))
    if draw(st.booleans()):
        cfg["selector"] = draw(st.dictionaries(
            label_name, st.one_of(text, st.fixed_dictionaries({"=~": regex}),
                                  st.fixed_dictionaries({"!=": text})), max_size=3))
    if draw(st.booleans()):
        cfg["thresholds"] = draw(st.fixed_dictionaries({}, optional={
            "straggler_ratio": st.floats(1.01, 5),
            "straggler_transient_ranks": st.integers(2, 64),
            "grad_explosion_factor": st.floats(1.5, 1000),
            "grad_vanishing_fraction": st.floats(1e-6, 0.5),
            "bubble_excess_factor": st.floats(1.01, 10),
            "checkpoint_max_age": duration(60, 86400),
            "checkpoint_overhead_ratio": st.floats(0.001, 0.9),
            "late_arrival_fraction": st.floats(0.05, 0.95),
            "late_arrival_min_collectives": st.integers(1, 100_000),
        }))
    # Windows long enough for the default `for` of the alerts that depend on them.
    if draw(st.booleans()):
        cfg["windows"] = draw(st.fixed_dictionaries({}, optional={
            "rate": duration(60, 3600), "straggler": duration(60, 600),
            "straggler_spell": duration(60, 900), "straggler_warmup": duration(60, 1800),
            "straggler_recurrence": duration(300, 7200), "straggler_hold": duration(60, 3600),
            "grad_baseline": duration(300, 86400), "grad_long_baseline": duration(7200, 172800),
            "progress": duration(60, 900), "memory": duration(600, 86400),
            "checkpoint_overhead": duration(600, 86400),
            "late_arrival": duration(120, 7200)}))
    if draw(st.booleans()):
        cfg["alerts"] = draw(st.dictionaries(st.sampled_from(
            [n for n in NAMES if n not in ("Train_RankFailed", "Train_GradientExplosion",
                                            "Train_GradientVanishing")]),
            st.fixed_dictionaries({}, optional={
                "for": duration(0, 3600), "severity": st.sampled_from(["critical", "warning", "info"]),
                "team": st.sampled_from(["platform", "workload"])}), max_size=3))
    if draw(st.booleans()):
        cfg["teams"] = draw(st.fixed_dictionaries({}, optional={
            "platform": text.filter(bool), "workload": text.filter(bool)}))
    if draw(st.booleans()):
        cfg["common_labels"] = draw(st.dictionaries(label_name, text.filter(bool), max_size=2))
    if draw(st.booleans()):
        cfg["runbook_url"] = "https://" + draw(st.text(string.ascii_letters + "./{}-_", max_size=15)
                                               .filter(lambda s: "{alert}" not in s)) + "/{alert}"
    if draw(st.booleans()):
        cfg["rule_interval"] = draw(st.one_of(st.none(), duration(10, 300)))
    if draw(st.booleans()):
        cfg["dashboards"] = draw(st.fixed_dictionaries({}, optional={
            "format": st.sampled_from(["classic", "v2"]),
            "uid_prefix": st.from_regex(r"[a-zA-Z0-9_-]{1,24}", fullmatch=True),
            "tag": text.filter(bool), "time_range": duration(300, 86400 * 7),
            "top_n": st.integers(1, 100), "heatmap_ranks": st.integers(1, 1000),
            "trace_datasource_uid": st.one_of(st.none(), st.from_regex(r"[a-zA-Z0-9_-]{1,40}", fullmatch=True)),
            "trace_datasource_type": st.sampled_from(["tempo", "jaeger"]),
            "trace_service_name": text.filter(bool)}))
    if draw(st.booleans()):  # a preset that brings a family of its own (obsgen.presets)
        cfg["presets"] = ["default", "nccl-inspector"]
    if draw(st.booleans()):
        cfg["families"] = draw(st.lists(st.sampled_from(FAMILIES), unique=True))
        # Panels read every family's recorded series: a subset is only valid without them.
        cfg.setdefault("dashboards", {})["enabled"] = False
        # a family whose source only a preset brings is valid with that preset only
        needed = [p.name for p in PRESETS.values() if set(p.families) & set(cfg["families"])]
        cfg["presets"] = list(dict.fromkeys(cfg.get("presets", ["default"]) + needed))
    if draw(st.booleans()):
        cfg["format"] = draw(st.sampled_from(sorted(targets.TARGETS)))
    if draw(st.booleans()):  # the shard and the global tier (obsgen.shards)
        cfg["sharding"] = {"shards": draw(st.integers(2, 64)),
                           "by": draw(st.lists(label_name, min_size=1, max_size=2, unique=True)),
                           "remote_write_url": "http://127.0.0.1:8428/api/v1/write"}
    return cfg


# Corruptions that make a valid config invalid, each with the path it must be reported at.
CORRUPT = [
    ("unknown top-level key", lambda c: c.update({"tresholds": {}}), "(top level)"),
    ("unknown threshold", lambda c: c.setdefault("thresholds", {}).update({"ratio": 2}), "thresholds"),
    ("ratio at or below 1", lambda c: c.setdefault("thresholds", {}).update({"straggler_ratio": 1}), "thresholds.straggler_ratio"),
    ("negative fraction", lambda c: c.setdefault("thresholds", {}).update({"grad_vanishing_fraction": -0.1}), "thresholds.grad_vanishing_fraction"),
    ("number as a duration", lambda c: c.setdefault("windows", {}).update({"rate": 300}), "windows.rate"),
    ("negative duration", lambda c: c.setdefault("windows", {}).update({"memory": "-1h"}), "windows.memory"),
    ("zero window", lambda c: c.setdefault("windows", {}).update({"progress": "0m"}), "windows.progress"),
    ("bad label name", lambda c: c.setdefault("labels", {}).update({"rank": "global-rank"}), "labels.rank"),
    ("a scrape label renamed", lambda c: c.setdefault("labels", {}).update({"job": "training_job"}), "labels.job"),
    ("a label renamed to a scrape label", lambda c: c.setdefault("labels", {}).update({"node": "instance"}), "labels.node"),
    ("unknown metric", lambda c: c.setdefault("metrics", {}).update({"train_steps": "x"}), "metrics"),
    ("NUL in a selector", lambda c: c.setdefault("selector", {}).update({"cluster": "a\x00"}), "selector.cluster"),
    ("regex RE2 lacks", lambda c: c.setdefault("selector", {}).update({"env": {"=~": "(?=x)"}}), "selector.env.=~"),
    ("unknown alert", lambda c: c.setdefault("alerts", {}).update({"Train_Nope": {}}), "alerts"),
    ("unknown severity", lambda c: c.setdefault("alerts", {}).update({"Train_RankFailed": {"severity": "page"}}), "alerts.Train_RankFailed.severity"),
    # (with Train_RankFailed's family rendered: an override of an alert that is not
    # rendered is not checked against its windows)
    ("for beyond the memory", lambda c: (c.pop("families", None),
                                         c.setdefault("windows", {}).update({"memory": "1h"}),
                                         c.setdefault("alerts", {}).update({"Train_RankFailed": {"for": "2h"}})), "alerts.Train_RankFailed.for"),
    ("unknown format", lambda c: c.update({"format": "nagios"}), "format"),
    ("list instead of a mapping", lambda c: c.update({"teams": ["platform"]}), "teams"),
]


def _write(tmp: Path, data) -> Path:
    path = tmp / "obsgen.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


# Valid configs -----------------------------------------------------------------------------
_RENDERED: list[tuple[dict, list[Path]]] = []


@SETTINGS
@given(valid_configs())
def test_valid_configs_render(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("valid")
    path = _write(tmp, data)
    cfg = config.load(path, alert_names=NAMES)  # must not raise: the config is valid
    files = pipeline.render_all(cfg)
    # Every dashboard passes the lint and Grafana's schema (shipped in the package).
    assert pipeline.check_dashboards(files, cfg) == []
    rule_files = []
    for rel, text_ in files.items():
        assert MARKER in text_[:400], rel
        if rel.startswith("rules/"):
            groups = render.rule_groups(rel, yaml.safe_load(text_), cfg)
            out = tmp / rel.replace("/", "_")
            out.write_text(yaml.safe_dump({"groups": groups}, allow_unicode=True))
            rule_files.append(out)
    _RENDERED.append((data, rule_files))


@pytest.mark.promtool
def test_rules_of_every_valid_example_pass_promtool():
    """promtool check rules on all rule files rendered by test_valid_configs_render."""
    assert len(_RENDERED) >= min(EXAMPLES, 100), "run together with test_valid_configs_render"
    files = [f for _, fs in _RENDERED for f in fs]
    result = promtool.check_rules(files) if files else promtool.Result(True, "")
    if not result.ok:
        bad = [data for data, fs in _RENDERED if any(f"{f}:" in result.output for f in fs)]
        pytest.fail(f"promtool refused rules of {len(bad)} configs, e.g.:\n"
                    f"{json.dumps(bad[:1], ensure_ascii=False, indent=1)}\n{result.output[-3000:]}")
    print(f"\n{len(_RENDERED)} valid configs, {len(files)} rule files, all pass promtool")


# Invalid configs ---------------------------------------------------------------------------
@SETTINGS
@given(valid_configs(), st.sampled_from(CORRUPT))
def test_invalid_configs_are_refused_cleanly(tmp_path_factory, data, corruption):
    name, corrupt, path_ = corruption
    corrupt(data)
    tmp = tmp_path_factory.mktemp("invalid")
    cfg_file = _write(tmp, data)
    out = tmp / "out"
    code, err = _render(cfg_file, out)
    assert code == 2, (name, err)
    assert err and all(line.startswith(f"{cfg_file}: ") for line in err), (name, err)
    assert any(line.startswith(f"{cfg_file}: {path_}") for line in err), (name, path_, err)
    assert not out.exists()


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes_or_writes(tmp_path_factory, raw):
    tmp = tmp_path_factory.mktemp("text")
    cfg_file = tmp / "obsgen.yaml"
    cfg_file.write_bytes(raw.encode("utf-8", "surrogatepass"))  # even text that is not UTF-8
    out = tmp / "out"
    code, err = _render(cfg_file, out)
    if code == 0:  # the text happened to be a valid config (empty, a comment, "{}")
        return
    assert code == 2 and err and all(l.startswith(f"{cfg_file}: ") for l in err), err
    assert not out.exists()


HOSTILE = [b"[" * 5000 + b"]" * 5000, b"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
           b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
           b"metrics: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
           b"x: !!python/object/apply:os.system [true]\n", b"\xef\xbb\xbf", b"\x00", b"\xff",
           b"\r\n", b"*", b"&", b"!!binary", b": ", b"- ", b"{", b"'", b'"', b"%YAML 1.1\n"]


@st.composite
def config_bytes(draw) -> bytes:
    """Bytes a config file may hold: any bytes; a valid config with bytes put in, cut out or
    replaced (invalid UTF-8, NUL, YAML's own syntax, bombs and tags among them)."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    data = bytearray(yaml.safe_dump(draw(valid_configs()), allow_unicode=True).encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        piece = draw(st.one_of(st.binary(min_size=1, max_size=8), st.sampled_from(HOSTILE)))
        cut = draw(st.integers(0, 4))
        data[at:at + cut] = piece
    return bytes(data)


@SETTINGS
@given(config_bytes())
def test_arbitrary_bytes_never_crash_or_write(tmp_path_factory, raw):
    tmp = tmp_path_factory.mktemp("bytes")
    cfg_file = tmp / "obsgen.yaml"
    cfg_file.write_bytes(raw)
    out = tmp / "out"
    code, err = _render(cfg_file, out)
    if code == 0:  # still a valid config (the bytes landed in a comment or a value)
        return
    assert code == 2 and err and all(l.startswith(f"{cfg_file}: ") for l in err), err
    assert not out.exists()


def _render(cfg_file: Path, out: Path) -> tuple[int, list[str]]:
    """Run the CLI in-process, capturing stderr; any exception fails the property."""
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        code = main(["render", "--config", str(cfg_file), "--out", str(out)])
    return code, [l for l in buf.getvalue().splitlines() if l]
