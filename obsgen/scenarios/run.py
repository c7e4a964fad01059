"""``obsgen test``: promtool on the rendered rules and on every test file in the folder.

The rule files are read as rendered, whatever the format: the groups of a
PrometheusRule, Mimir or Thanos file are written, unchanged, to a plain rule file
promtool reads. A test file obsgen rendered runs one scenario at a time, so a failure is
named by its sentence; a test file of the user's own runs as written.

With ``late=True`` (``obsgen test --late-reads``) the scenarios run on the rules as a
ruler on remote storage reads them (``late.late_rules``: every record one evaluation
late), each "fires within" check moved by the alert's delay (``late.delays``); the
user's own files, whose times are theirs, are left out.

With ``boundaries=True`` (``obsgen test --boundaries``) every test runs again on rules
whose windows are left-open (Prometheus 3), with their inputs half an interval late,
and with both (``boundaries``). A scenario's firing checks move one evaluation later;
a test file of the user's own has every check one evaluation later and compared as an
outcome (``boundaries.shifted_outcome``: the same alerts with the same labels, values
within a tolerance), since its annotations print values read at its own times.
"""
from __future__ import annotations

import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

import yaml

from .. import promtool
from ..config import Config, duration, seconds
from ..output import is_generated
from . import PREFIX, boundaries as edges, late as late_reads
from .series import SCRAPE
from ..render import load_yaml, rule_groups


@dataclass
class Outcome:
    label: str  # the scenario's sentence (and file), or the user's file
    ok: bool
    output: str


def plain_rules(rules: list[Path], cfg: Config, tmp: Path) -> dict[str, Path]:
    """{rendered rule file name: a plain Prometheus rule file of its groups}."""
    by_name = {p.name: p.resolve() for p in rules}
    if cfg["format"] == "prometheus":
        return by_name
    return rewritten(by_name, tmp / "rules", lambda docs: [
        {"groups": rule_groups(name, d, cfg)} for name, d in zip(by_name, docs)])


def ours(path: Path) -> bool:
    return path.name.startswith(PREFIX) and is_generated(path)


def rewritten(plain: dict[str, Path], folder: Path, transform) -> dict[str, Path]:
    """The plain rule files, their documents passed through ``transform`` (all at once:
    a rewrite may need every file's records), written into ``folder``."""
    docs = [load_yaml(p.read_text()) for p in plain.values()]
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, doc in zip(plain, transform(docs)):
        out[name] = folder / name
        out[name].write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20))
    return out


def read_late(plain: dict[str, Path], tmp: Path) -> tuple[dict[str, Path], dict[str, float]]:
    """The plain rule files with every record read one evaluation late, and each alert's
    added delay in seconds."""
    from ..shards import is_shard_file
    docs = [load_yaml(p.read_text()) for p in plain.values()]
    # a shard tier's records come from Prometheus shards, whose staleness markers the
    # central store keeps (remote write carries them)
    kept = frozenset(r["record"] for name, d in zip(plain, docs) if is_shard_file(name)
                     for g in d.get("groups") or [] for r in g["rules"] if "record" in r)
    return (rewritten(plain, tmp / "late",
                      lambda d: late_reads.late_rules(d, SCRAPE, late_reads.LOOKBACK, kept)),
            late_reads.delays(docs, SCRAPE))


ALERTNAME = re.compile(r'alertname="([^"]+)"')


def _later(test: dict, delay: Callable[[str], float]) -> dict:
    """``test`` with each check that an alert fires evaluated ``delay(alert)`` later."""
    checks = []
    for check in test.get("promql_expr_test") or []:
        name = ALERTNAME.search(check["expr"])
        if check.get("exp_samples") and name and delay(name.group(1)):
            check = {**check, "eval_time": duration(seconds(check["eval_time"])
                                                    + delay(name.group(1)))}
        checks.append(check)
    return {**test, "promql_expr_test": checks}


def split(path: Path, plain: dict[str, Path], tmp: Path,
          later: Callable[[str], float] | None = None,
          shift: bool = False) -> list[tuple[str, Path]]:
    """One test file per scenario of a rendered file, reading ``plain`` rule files (each
    firing check moved ``later(alert)``; with ``shift``, every input half an
    interval late)."""
    doc = load_yaml(path.read_text())
    files = [plain.get(Path(f).name, (path.parent / f).resolve()) for f in doc["rule_files"]]
    out = []
    for i, test in enumerate(doc.get("tests") or []):
        if shift:
            test = edges.shifted(test, _interval(test, doc))
        if later:
            test = _later(test, later)
        one = tmp / f"{path.stem}-{i}.yaml"
        one.write_text(yaml.safe_dump({**doc, "rule_files": [str(f) for f in files],
                                       "tests": [test]}, sort_keys=False, width=1 << 20))
        out.append((f"{test['name']} ({path.name})", one))
    return out


def _interval(test: dict, doc: dict) -> float:
    """A test's input interval: its own, else the file's evaluation interval (promtool's
    default for both: 1m)."""
    return seconds(str(test.get("interval") or doc.get("evaluation_interval") or "1m"))


def _rewired(path: Path, plain: dict[str, Path], tmp: Path, shift: bool = False) -> Path:
    """The user's test file ``path`` reading ``plain`` rule files in place of its own of
    the same names (with ``shift``, each test as ``boundaries.shifted_outcome``)."""
    return _with_tests(path, plain, tmp / path.name, lambda t, doc: (
        edges.shifted_outcome(t, _interval(t, doc)) if shift else t))


def _with_tests(path: Path, plain: dict[str, Path], out: Path, each) -> Path:
    """The test file ``path`` written to ``out``, reading ``plain`` rule files in place of
    its own of the same names, each test passed through ``each(test, doc)``."""
    doc = load_yaml(path.read_text())
    files = [str(plain.get(Path(f).name, (path.parent / f).resolve())) for f in doc["rule_files"]]
    tests = [each(t, doc) for t in doc.get("tests") or []]
    out.write_text(yaml.safe_dump({**doc, "rule_files": files, "tests": tests},
                                  sort_keys=False, width=1 << 20))
    return out


def _boundary_todo(plain: dict[str, Path], fixtures: list[Path], tmp: Path):
    for i, (variant, (opened, shift)) in enumerate(edges.VARIANTS.items()):
        where = tmp / f"variant-{i}"
        where.mkdir()
        rules = rewritten(plain, where / "rules", edges.left_open_rules) if opened else plain
        for path in fixtures:
            if ours(path):  # inputs half an interval late: each firing one evaluation later
                later = (lambda alert: SCRAPE) if shift else None
                yield from ((f"{label} [{variant}]", one, path.parent)
                            for label, one in split(path, rules, where, later, shift))
            else:
                yield f"{path} [{variant}]", _rewired(path, rules, where, shift), path.parent


def for_vmalert_tool(path: Path, plain: dict[str, Path], tmp: Path) -> Path:
    """The test file ``path`` as vmalert-tool reads it: the same format but for
    ``metricsql_expr_test`` in place of ``promql_expr_test``, reading ``plain`` rules."""
    return _with_tests(path, plain, tmp / f"vmalert-tool-{path.name}", lambda t, doc: {
        ("metricsql_expr_test" if k == "promql_expr_test" else k): v for k, v in t.items()})


def run(rules: list[Path], fixtures: list[Path], cfg: Config, jobs: int = 2,
        late: bool = False, boundaries: bool = False,
        vmalert_tool: bool = False) -> list[Outcome]:
    """The outcome of every scenario of obsgen's test files and of every other test file
    (``late``: of obsgen's scenarios only, on the rules read late; ``boundaries``: of
    each in the boundary variants; ``vmalert_tool``: of each of obsgen's files as a whole,
    by vmalert-tool unittest, which reads records late as ``late`` does)."""
    with tempfile.TemporaryDirectory(prefix="obsgen-test-") as tmp:
        plain = plain_rules(rules, cfg, Path(tmp))
        if vmalert_tool:
            def one(path: Path) -> Outcome:
                result = promtool.vmalert_tool_unittest(
                    for_vmalert_tool(path, plain, Path(tmp)), cwd=Path(tmp))
                return Outcome(f"{path} [vmalert-tool]", result.ok,
                               result.output.replace(tmp, "<rules>"))
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                return list(pool.map(one, [f for f in fixtures if ours(f)]))
        delays = None
        if boundaries:
            return _run(list(_boundary_todo(plain, fixtures, Path(tmp))), jobs, tmp)
        if late:
            plain, delays = read_late(plain, Path(tmp))
        todo: list[tuple[str, Path, Path]] = []  # (label, file, cwd)
        for path in fixtures:
            if ours(path):
                todo.extend((label, one, path.parent)
                            for label, one in split(path, plain, Path(tmp),
                                                    delays and (lambda a: delays.get(a, 0.0))))
            elif not late:
                todo.append((str(path), path, path.parent))

        return _run(todo, jobs, tmp)


def _run(todo: list[tuple[str, Path, Path]], jobs: int, tmp: str) -> list[Outcome]:
    def one(item):
        label, path, cwd = item
        result = promtool.test_rules([path.resolve()], cwd=cwd)
        return Outcome(label, result.ok, result.output.replace(tmp, "<rules>"))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, todo))
