"""The e2e profile is the default config with every duration divided by one factor, and
the rules it renders are the default rules with scaled durations: same structure, same
thresholds. This is what keeps the end-to-end tests honest."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from obsgen import config, contract, pipeline, registry, timescale
from obsgen.config import seconds

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "e2e" / "obsgen-e2e.yaml"
NAMES = registry.alert_names()


def load(path) -> config.Config:
    return config.load(path, alert_names=NAMES)


def defaults() -> config.Config:
    return config.Config(copy.deepcopy(config.DEFAULTS), "(defaults)")


def normalised(cfg: config.Config, factor: float) -> list[dict]:
    """Every rule with recorded names replaced by their contract key, durations as
    seconds divided by ``factor``, and duration thresholds likewise."""
    names = {r.name.format(**cfg["windows"]): f"<{r.key}>" for r in contract.RECORDED.values()}
    numbers = {f"{seconds(cfg['thresholds'][k]):g}": f"{seconds(cfg['thresholds'][k]) / factor:g}"
               for k in timescale.DURATION_THRESHOLDS}
    out = []
    for path, text in sorted(pipeline.render_all(cfg).items()):
        if not path.startswith("rules/"):
            continue
        for group in yaml.safe_load(text)["groups"]:
            for rule in group["rules"]:
                expr = re.sub(r"[a-z_]+:[a-z_]+:[a-z_0-9]+", lambda m: names.get(m.group(0), m.group(0)),
                              rule["expr"])
                expr = re.sub(r"\[(\w+)(?::(\w+))?\]", lambda m: "[" + ":".join(
                    f"{seconds(d) / factor:g}s" for d in m.groups() if d) + "]", expr)
                expr = re.sub(r"\boffset (\w+)", lambda m: f"offset {seconds(m.group(1)) / factor:g}s",
                              expr)
                expr = re.sub(r"(?<![\w.])(\d+)(?![\w.])", lambda m: numbers.get(m.group(1), m.group(1)), expr)
                out.append({"name": names.get(rule.get("record"), rule.get("alert")), "expr": expr,
                            "for": seconds(rule.get("for", "0s")) / factor,
                            "labels": rule.get("labels")})
    return out


def test_the_committed_profile_is_the_default_divided_by_60():
    assert PROFILE.read_text() == timescale.profile_yaml(60)
    assert timescale.check(load(PROFILE)) == 60


def test_the_default_config_is_its_own_profile_with_factor_1():
    assert timescale.check(defaults()) == 1


def test_profile_rules_are_the_default_rules_with_scaled_durations():
    default, scaled = normalised(defaults(), 60), normalised(load(PROFILE), 1)
    assert default and len(default) == len(scaled)
    for d, s in zip(default, scaled):
        assert d == s


def test_the_comparison_sees_a_changed_threshold(tmp_path):
    doc = yaml.safe_load(PROFILE.read_text())
    doc["thresholds"]["straggler_ratio"] = 1.2
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert normalised(defaults(), 60) != normalised(load(path), 1)
    with pytest.raises(timescale.NotUniform, match="thresholds.straggler_ratio"):
        timescale.check(load(path))


def test_a_profile_with_one_duration_off_is_refused_with_its_path(tmp_path):
    doc = yaml.safe_load(PROFILE.read_text())
    doc["windows"]["progress"] = "4s"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(timescale.NotUniform) as err:
        timescale.check(load(path))
    assert str(err.value) == (f"{path}: windows.progress: 4s is the default 120s divided by 30, "
                              "not 60")



@pytest.mark.parametrize("intervals, offending", [
    ({"nccl": "2s"}, "family_intervals.nccl: 2s is the default 30s divided by 15, not 60"),
    ({"ranks": "1s"}, "family_intervals.ranks: 1s is the default 0s"),
    (None, "family_intervals.nccl: 0s is the default 30s"),
], ids=["a family interval off", "an interval for a family that has none", "no family intervals"])
def test_a_profile_with_other_family_intervals_is_refused(tmp_path, intervals, offending):
    doc = yaml.safe_load(PROFILE.read_text())
    doc["family_intervals"] = intervals if intervals is None else {**doc["family_intervals"], **intervals}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(timescale.NotUniform, match=offending.replace(".", r"\.")):
        timescale.check(load(path))


DURATIONS = {"30 minutes": (1800, "30m"), "2.5 seconds": (2.5, "2s500ms"), "an hour": (3600, "1h"),
             "zero": (0, "0s"), "6 hours": (21600, "6h"), "half a second": (0.5, "500ms")}


@pytest.mark.parametrize("secs,text", list(DURATIONS.values()), ids=list(DURATIONS))
def test_duration_text(secs, text):
    assert config.duration(secs) == text
    assert seconds(text) == secs
