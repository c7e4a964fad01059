"""Regenerate the promtool test files in tests/promtool/ from the case tables.

    python -m tests.promtool.build          # write the files that changed
    python -m tests.promtool.build --check  # exit 1 when a committed file is stale

Each family's cases live in tests/promtool/cases/<family>.py as ``CASES``, a dict from
a sentence that names the case to a ``support.Case``.
"""
from __future__ import annotations

import argparse
import copy
import functools
import importlib
import re
import sys
from pathlib import Path

import yaml

from obsgen import contract, pipeline, registry
from obsgen.config import DEFAULTS, Config

from . import support

HERE = Path(__file__).resolve().parent


def default_config() -> Config:
    return Config(copy.deepcopy(DEFAULTS), "(defaults)")


def reads(exprs: list[str], cfg: Config) -> set[str]:
    """Series names the fixture carries: every gauge, the step-time histogram every job
    exports, and every other contract metric the expressions read. A histogram is carried
    with all its buckets, as a scrape has it."""
    tokens = {t for e in exprs for t in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e)}
    out = set()
    for metric in contract.METRICS.values():
        name = cfg.metric(metric.key)
        names = ([name + s for s in ("_bucket", "_sum", "_count")]
                 if metric.type == contract.HISTOGRAM else [name])
        if tokens & set(names) or metric.type == contract.GAUGE or metric is contract.M.train_step_seconds:
            out.update(names)
    return out


def config_for(family: str) -> Config:
    """The defaults, with dashboards.records on for the family it renders (panels), and
    the preset a family's source needs (inspector: nccl-inspector)."""
    from obsgen.presets import PRESETS
    cfg = default_config()
    if family == registry.PANEL_RECORDS:
        cfg.data["dashboards"]["records"] = True
    cfg.data["presets"] += [p.name for p in PRESETS.values() if family in p.families]
    return cfg


@functools.lru_cache(maxsize=None)
def _rendered(family: str) -> dict[str, str]:
    return pipeline.render_all(config_for(family))


def extra_rules(family: str) -> str | None:
    """The rule file of a family the default render leaves out (panels), as the fixture
    reads it from tests/promtool/rules/; None for the others (read from rules/)."""
    if family in {f.NAME for f in registry.default_families()}:
        return None
    return _rendered(family)[f"rules/{family}.yaml"]


def rule_file(name: str) -> str:
    return f"rules/{name}.yaml" if extra_rules(name) is not None else f"../../rules/{name}.yaml"


@functools.lru_cache(maxsize=None)
def render_family(family: str) -> str:
    cfg = config_for(family)
    files = _rendered(family)
    names = [family]  # the family, then what it reads from, transitively
    for name in names:
        names.extend(r for r in getattr(registry.by_name()[name], "REQUIRES", ()) if r not in names)
    docs = [yaml.safe_load(files[f"rules/{n}.yaml"]) for n in names]
    exprs = [r["expr"] for d in docs for g in d["groups"] for r in g["rules"]]
    cases = importlib.import_module(f"tests.promtool.cases.{family}").CASES
    # The family's own group first, then those it reads: the records it reads from another
    # group are one evaluation old, the most a live ruler (groups on their own schedules)
    # shows; without an order promtool picks one per run.
    order = [g["name"] for d in docs for g in d["groups"]]
    return support.build_file(
        family, [rule_file(n) for n in names], docs, reads(exprs, cfg), cases,
        source=f"tests/promtool/cases/{family}.py (python -m tests.promtool.build)",
        group_eval_order=order, every=every(family, docs[0]))


# Families whose cases are evaluated every 30 s although their groups run less often: their
# expected values and annotations were computed for a record at most 30 s old.
EVERY_SCRAPE = {"checkpoints", "recovery", "panels"}


def every(family: str, doc: dict) -> str | None:
    """How often promtool evaluates ``family``'s cases: its group's interval, as it runs in
    production (promtool evaluates every group of a file at one interval, so its facts
    groups, rarer in production, are evaluated as often); every scrape for EVERY_SCRAPE."""
    return None if family in EVERY_SCRAPE else doc["groups"][0].get("interval")


def fixture_with(family: str, cfg: Config, cases: dict, rule_dir: Path) -> str:
    """The promtool test file of ``cases`` on ``family``'s rules as ``cfg`` renders them
    (a user's config), those rules and the ones they read written under ``rule_dir``."""
    files = pipeline.render_all(cfg)
    names = [family]
    for name in names:
        names.extend(r for r in getattr(registry.by_name()[name], "REQUIRES", ()) if r not in names)
    docs = [yaml.safe_load(files[f"rules/{n}.yaml"]) for n in names]
    for n in names:
        (rule_dir / f"{n}.yaml").write_text(files[f"rules/{n}.yaml"])
    exprs = [r["expr"] for d in docs for g in d["groups"] for r in g["rules"]]
    return support.build_file(
        family, [str(rule_dir / f"{n}.yaml") for n in names], docs, reads(exprs, cfg), cases,
        source="a test's config", group_eval_order=[g["name"] for d in docs for g in d["groups"]],
        every=every(family, docs[0]))


def families() -> list[str]:
    return [f.NAME for f in registry.FAMILIES if (HERE / "cases" / f"{f.NAME}.py").exists()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("families", nargs="*")
    args = ap.parse_args(argv)
    stale = []
    for fam in args.families or families():
        outputs = [(HERE / f"{fam}.yaml", render_family(fam))]
        if (rules := extra_rules(fam)) is not None:
            outputs.append((HERE / rule_file(fam), rules))
        for path, text in outputs:
            if path.exists() and path.read_text() == text:
                continue
            if args.check:
                stale.append(str(path.relative_to(HERE)))
            else:
                path.parent.mkdir(exist_ok=True)
                path.write_text(text)
                print(f"wrote {path.relative_to(HERE.parent.parent)} ({len(text) // 1024} KiB)")
    if stale:
        print("stale promtool fixtures: " + ", ".join(stale) +
              "; run `python -m tests.promtool.build`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
