"""Scenarios that prove a config's own alerts: promtool test files rendered with the rules.

``obsgen render`` writes, beside the rules, one promtool test file per family under
``scenario_tests.path`` (``tests/promtool/obsgen-<family>.yaml``): synthetic jobs
(obsgen.synth, obsgen.synth_hw) scraped under the config's metric and label names and
selector, with faults sized from its thresholds and times from its windows and ``for``s,
and checks on the ``ALERTS`` series: *fires within its bound of the onset, for exactly
these ranks* and *never fires*. The test files read the rendered rule files themselves;
``obsgen test`` runs them (and any test file of the user's own in the folder) and names a
failing scenario by its sentence.

A scenario that cannot hold under the config (a family turned off, a threshold no
realistic fault crosses, a window a preset's cadence stretches past the fault) is not left out
silently: it is listed in the file's ``not_stated`` comment and printed by ``obsgen test``.

The registry of scenario modules is ``FAMILIES``, one module per alert family.
"""
from __future__ import annotations

import dataclasses
import re

import yaml

from .. import contract, registry
from ..config import Config, group_interval
from ..model import Family
from ..render import MARKER, header, load_yaml
from . import (checkpoints, fabric, gpus, gradients, nccl, pipeline, progress, ranks, recovery,
               stragglers)
from .model import Fires, Holds, NotStated, Quiet, Scenario, Setting
from .series import SCRAPE, Names, Unstatable, input_series, minutes

# family name -> scenarios(Setting) -> [Scenario | NotStated]. Add a family here.
FAMILIES = {
    "stragglers": stragglers.scenarios,
    "gradients": gradients.scenarios,
    "pipeline": pipeline.scenarios,
    "checkpoints": checkpoints.scenarios,
    "ranks": ranks.scenarios,
    "gpus": gpus.scenarios,
    "fabric": fabric.scenarios,
    "recovery": recovery.scenarios,
    "progress": progress.scenarios,
    "nccl": nccl.scenarios,
}
PREFIX = "obsgen-"
NOT_STATED = "# not stated: "


def path_of(cfg: Config, family: str) -> str:
    return f"{cfg['scenario_tests']['path'].rstrip('/')}/{PREFIX}{family}.yaml"


def owned(cfg: Config) -> tuple[str, ...]:
    """The scenario test files obsgen owns under the output root (removed when stale)."""
    return (f"{cfg['scenario_tests']['path'].rstrip('/')}/{PREFIX}*.yaml",)


def rule_path(cfg: Config, rendered: str) -> str:
    """The rendered rule file (its path under the output root), relative to the test file."""
    depth = len([p for p in cfg["scenario_tests"]["path"].split("/") if p and p != "."])
    return "../" * depth + rendered


def reads(exprs: list[str], cfg: Config) -> set[str]:
    """Contract names of the series a test carries: those the expressions read (of a
    histogram, the _sum and _count they read; no rule reads its buckets)."""
    tokens = {t for e in exprs for t in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e)}
    out = set()
    for metric in contract.METRICS.values():
        suffixes = ("_bucket", "_sum", "_count") if metric.type == contract.HISTOGRAM else ("",)
        out.update(metric.key + s for s in suffixes if cfg.metric(metric.key) + s in tokens)
    return out


def stated(fams: list[Family], cfg: Config) -> dict[str, list]:
    """{family: [Scenario | NotStated]} for the rendered families that have scenarios, their
    sentences naming the alerts as the config names them."""
    setting = Setting(cfg, fams)
    blocked = _blocked(cfg)
    renamed = {a.key: a.name for f in fams for a in f.alerts if a.key != a.name}
    out = {}
    for fam in fams:
        if fam.name not in FAMILIES:
            continue
        items = FAMILIES[fam.name](setting)
        if blocked:
            items = [NotStated(i.sentence, blocked) for i in items]
        out[fam.name] = [dataclasses.replace(i, sentence=_named(i.sentence, renamed)) for i in items]
    for name in FAMILIES:
        if name not in out:
            out[name] = [NotStated(f"the {name} scenarios", "the family is not rendered "
                                   "(families: in the config)")]
    return out


def _named(sentence: str, renamed: dict[str, str]) -> str:
    for key, name in renamed.items():
        sentence = re.sub(rf"\b{key}\b", name, sentence)
    return sentence


def with_required(family: str, by_name: dict[str, Family]) -> list[str]:
    """The family and the rendered families it requires (their records it reads), in order."""
    names = [family]
    for name in names:
        names.extend(r for r in getattr(registry.by_name()[name], "REQUIRES", ())
                     if r not in names and r in by_name)
    return names


def _blocked(cfg: Config) -> str | None:
    """Why no scenario can be stated under the config, or None. A preset's
    cadence is stated: the series are published at it (series.Names.published) and the
    bounds read the step histogram's windows as the rules do (model.Setting.read)."""
    try:
        Names(cfg)
    except Unstatable as err:
        return str(err)
    return None


def files(fams: list[Family], cfg: Config) -> dict[str, str]:
    """Renderer: one promtool test file per family with scenarios."""
    if not cfg["scenario_tests"]["enabled"]:
        return {}
    # the rendered rules: group names, what they read
    from ..render import rule_files, rule_groups, rule_path as render_path
    from ..shards import SHARD
    rendered = rule_files(fams, cfg)
    by_name = {f.name: f for f in fams}
    out = {}
    listed = stated(fams, cfg)
    out["docs/scenarios.md"] = reference(listed, cfg)
    for family, items in listed.items():
        if family not in by_name:
            continue
        names = with_required(family, by_name)
        # each family's shard tier (a sharded render) before its global tier
        paths = [p for n in names for p in (render_path(n, SHARD), render_path(n))
                 if p in rendered]
        groups = [g for p in paths for g in rule_groups(p, load_yaml(rendered[p]), cfg)]
        exprs = [r["expr"] for g in groups for r in g["rules"]]
        out[path_of(cfg, family)] = test_file(
            family, [rule_path(cfg, p) for p in paths], [g["name"] for g in groups],
            reads(exprs, cfg), items, cfg, by_name)
    return out


def reference(listed: dict[str, list], cfg: Config) -> str:
    """docs/scenarios.md: every scenario of the config, and what it leaves unstated."""
    lines = [f"<!-- {MARKER} from obsgen/scenarios/ and the config. Do not edit: change "
             "obsgen.yaml (or the definitions) and run `obsgen render`. -->", "",
             "# Scenarios: the promtool tests of these alerts", "",
             f"`obsgen render` writes them to `{cfg['scenario_tests']['path']}/{PREFIX}<family>.yaml` "
             "for this config; `obsgen test` runs them. Each is a synthetic job scraped under the "
             "config's names, with its fault sized from the thresholds and its bound from the "
             "windows and `for`s (see each family's module in `obsgen/scenarios/`).", ""]
    for family, items in listed.items():
        lines += [f"## {family}", ""]
        lines += [f"- {i.sentence}" if isinstance(i, Scenario) else
                  f"- *not stated:* {i.sentence}: {i.reason}" for i in items]
        lines.append("")
    return "\n".join(lines)


def _alert_name(key: str, by_name: dict[str, Family]) -> str:
    for fam in by_name.values():
        for a in fam.alerts:
            if a.key == key:
                return a.name
    raise KeyError(key)


def test_file(family: str, rule_files: list[str], order: list[str], read: set[str],
              items: list, cfg: Config, by_name: dict[str, Family]) -> str:
    names = Names(cfg) if any(isinstance(i, Scenario) for i in items) else None
    tests, skipped = [], []
    for item in items:
        if isinstance(item, NotStated):
            skipped.append(f"{item.sentence}: {item.reason}")
            continue
        tests.append({"name": item.sentence, "interval": f"{SCRAPE}s",
                      "input_series": input_series(item.jobs, item.minutes, read, names),
                      "promql_expr_test": checks(item, names, by_name,
                                                 group_interval(cfg, family) or f"{SCRAPE}s")})
    # every group at the family's own interval, as it runs (its facts groups as often)
    doc = {"rule_files": rule_files,
           "evaluation_interval": group_interval(cfg, family) or f"{SCRAPE}s",
           "group_eval_order": order, "tests": tests}
    body = yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                     sort_keys=False, width=1 << 20, allow_unicode=True)
    notes = "".join(f"{NOT_STATED}{line}\n" for line in skipped)
    return header(f"obsgen/scenarios/{family}.py") + notes + body


def checks(item: Scenario, names: Names, by_name: dict[str, Family], every: str) -> list[dict]:
    from ..config import seconds
    out = []
    for e in item.expects:
        alert = _alert_name(e.alert, by_name)
        firing = f'ALERTS{{alertname="{alert}", alertstate="firing"}}'
        if isinstance(e, Quiet):
            span = item.minutes - e.start
            out.append({"expr": f"count by (alertname) (count_over_time({firing}[{minutes(span)}]))",
                        "eval_time": minutes(item.minutes), "exp_samples": []})
        elif isinstance(e, Fires):
            keys = sorted({names.label(k) for ls in e.labels for k in ls})
            before = e.onset - SCRAPE / 60  # the last evaluation before the onset
            if before > 0:
                out.append({"expr": f"count by (alertname) (count_over_time({firing}[{minutes(before)}]))",
                            "eval_time": minutes(before), "exp_samples": []})
            out.append({"expr": f"count by ({', '.join(keys)}) ({firing})",
                        "eval_time": minutes(e.onset + e.within),
                        "exp_samples": [{"labels": _labels(names.labelset(ls)), "value": 1}
                                        for ls in e.labels]})
        elif isinstance(e, Holds):
            # every evaluation from start to end: a range of whole intervals less half of
            # one holds that many of them on Prometheus 2 and 3 alike
            step = seconds(every) / 60
            n = int(round((e.end - e.start) / step)) + 1
            keys = sorted({names.label(k) for k in e.labels})
            sel = ", ".join(f'{names.label(k)}="{v}"' for k, v in sorted(e.labels.items()))
            held = f'ALERTS{{alertname="{alert}", alertstate="firing", {sel}}}'
            out.append({"expr": f"max by (alertname, {', '.join(keys)}) "
                                f"(count_over_time({held}[{minutes(n * step - step / 2)}]) >= bool {n})",
                        "eval_time": minutes(e.end),
                        "exp_samples": [{"labels": _labels(
                            {**names.labelset(e.labels), "alertname": alert}), "value": 1}]})
    return out


def _labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def unstated(cfg: Config) -> list[str]:
    """"<sentence>: <reason>" of every scenario the config leaves unstated."""
    from ..pipeline import families
    return [f"{i.sentence}: {i.reason}" for items in stated(families(cfg), cfg).values()
            for i in items if isinstance(i, NotStated)]
