"""Time-scaled configs: the same rules, every duration divided by one factor.

The end-to-end tests cannot wait 30 minutes for a straggler to become persistent. They
run a *time-scaled world* instead: the simulator advances its synthetic job ``factor``
times faster than the wall clock (``obsgen simulate --speed``), and the rules are
rendered from a profile whose every window, duration threshold and ``for`` is the
default divided by the same factor. Prometheus' own time constants (scrape and
evaluation interval, lookback delta), the groups' own intervals and Alertmanager's are
divided too. Nothing else changes: thresholds, ratios, fractions and the expressions'
structure are the defaults'.

Two rules are not invariant under the scaling and are left to their promtool fixtures:
Train_ETA_Slip adds a duration (remaining steps x step time, in the model's seconds) to
``time()`` (the wall clock), and Train_CheckpointStorage_Slow compares a rate with an
absolute floor in bytes per second; in a world ``factor`` times faster both see values
``factor`` times off. The simulator's scenarios avoid what they read.

``check(cfg)`` proves a config is such a profile and returns its factor; the simulator
refuses a profile that is not uniform, and tests/test_timescale.py shows that the rules
rendered from the committed profile are the default rules with scaled durations.
"""
from __future__ import annotations


import yaml

from . import registry
from .config import DEFAULTS, Config, defaults, duration, seconds

# Prometheus' and Alertmanager's own time constants in a real deployment, in seconds.
SCRAPE_INTERVAL = 30
EVALUATION_INTERVAL = 30
LOOKBACK_DELTA = 300
AM_GROUP_WAIT, AM_GROUP_INTERVAL, AM_REPEAT_INTERVAL = 30, 300, 4 * 3600
AM_RESOLVE_TIMEOUT = 300

# thresholds that are durations (the schema's $ref duration)
DURATION_THRESHOLDS = ("checkpoint_max_age",)


class NotUniform(ValueError):
    pass


def default_fors() -> dict[str, str]:
    """Every alert's ``for`` as its family declares it."""
    cfg = defaults()
    return {a.name: a.for_ for fam in registry.build(cfg) for a in fam.alerts}


def durations(cfg: Config) -> dict[str, tuple[float, float]]:
    """{what: (default seconds, configured seconds)} for every time constant of a config."""
    out = {f"windows.{k}": (seconds(v), seconds(cfg["windows"][k]))
           for k, v in DEFAULTS["windows"].items()}
    for k in DURATION_THRESHOLDS:
        out[f"thresholds.{k}"] = (seconds(DEFAULTS["thresholds"][k]), seconds(cfg["thresholds"][k]))
    if DEFAULTS["facts_interval"] and cfg["facts_interval"]:
        out["facts_interval"] = (seconds(DEFAULTS["facts_interval"]), seconds(cfg["facts_interval"]))
    for key in ("family_intervals", "facts_intervals"):
        defaults, configured = DEFAULTS[key] or {}, cfg[key] or {}
        for k in dict.fromkeys([*defaults, *configured]):
            d, c = defaults.get(k), configured.get(k)
            out[f"{key}.{k}"] = (seconds(d) if d else 0, seconds(c) if c else 0)
    for name, for_ in default_fors().items():
        got = cfg["alerts"].get(name, {}).get("for", for_)
        out[f"alerts.{name}.for"] = (seconds(for_), seconds(got))
    return out


def check(cfg: Config) -> float:
    """The factor by which ``cfg`` divides every default duration; NotUniform (one line
    per offending duration) when it is not one factor, or when anything else differs from
    the defaults."""
    pairs = durations(cfg)
    ratios = [d / c for d, c in pairs.values() if c > 0]
    if not ratios:
        raise NotUniform(f"{cfg.source}: no duration to derive a factor from")
    factor = max(set(ratios), key=ratios.count)  # the most common one; the rest must agree
    problems = [f"{cfg.source}: {k}: {c:g}s is the default {d:g}s "
                + (f"divided by {d / c:g}, not {factor:g}" if c and d else "(one of them none)")
                for k, (d, c) in pairs.items() if (c == 0) != (d == 0) or (c and abs(d / c - factor) > 1e-9)]
    for key in ("thresholds",):
        for k, v in cfg[key].items():
            if k not in DURATION_THRESHOLDS and v != DEFAULTS[key][k]:
                problems.append(f"{cfg.source}: {key}.{k}: {v!r} differs from the default "
                                f"{DEFAULTS[key][k]!r}; a time-scaled profile changes durations only")
    for name, over in cfg["alerts"].items():
        if set(over) - {"for"}:
            problems.append(f"{cfg.source}: alerts.{name}: only `for` may differ in a time-scaled profile")
    if problems:
        raise NotUniform("\n".join(problems))
    return factor


def profile(factor: float) -> dict:
    """The config that divides every default duration by ``factor``."""
    return {
        "windows": {k: duration(seconds(v) / factor) for k, v in DEFAULTS["windows"].items()},
        "thresholds": {k: duration(seconds(DEFAULTS["thresholds"][k]) / factor)
                       for k in DURATION_THRESHOLDS},
        "alerts": {name: {"for": duration(seconds(f) / factor)}
                   for name, f in default_fors().items()},
        "facts_interval": duration(seconds(DEFAULTS["facts_interval"]) / factor),
        "family_intervals": {k: duration(seconds(v) / factor)
                             for k, v in DEFAULTS["family_intervals"].items() if v},
        "facts_intervals": {k: duration(seconds(v) / factor)
                            for k, v in DEFAULTS["facts_intervals"].items() if v},
    }


def profile_yaml(factor: float) -> str:
    body = yaml.safe_dump(profile(factor), sort_keys=False)
    return (f"# Time-scaled profile: every default duration divided by {factor:g}.\n"
            f"# Written by `python -m obsgen.timescale {factor:g}`; use it with a world that runs\n"
            f"# {factor:g}x faster (`obsgen simulate --config` reads the factor from it).\n" + body)


if __name__ == "__main__":
    import sys

    sys.stdout.write(profile_yaml(float(sys.argv[1])))
