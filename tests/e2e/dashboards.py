"""Evaluate every panel query of Grafana dashboards against a live Prometheus.

Generic over the dashboard JSON: every string ``expr`` anywhere in the document is a
query (classic ``panels[].targets[]`` and rows, and schema-v2 query specs alike). Grafana
variables are substituted as Grafana would for one job: ``$job_id``, a multi-value
``$rank`` / ``$stage`` as a regex for all values (a single value where the matcher is
``=``), ``$__rate_interval`` and friends from the scrape interval; any other variable
from the dashboard's own templating list (multi-value or All: every value; otherwise its
current value). A variable found nowhere is a problem, not a guess.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import promql_parser

from obsgen import config, timescale

VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")
MULTI = {"rank": "0", "stage": "0", "node": ".+", "op": "AllReduce", "group": "dp"}


@dataclass(frozen=True)
class Query:
    dashboard: str
    where: str  # JSON path of the expr
    expr: str
    variables: tuple = ()  # (name, value, regex value) from the dashboard's templating


def template_variables(doc: dict) -> tuple:
    """(name, single value, value inside a regex matcher) of the dashboard's variables."""
    out = []
    for var in (doc.get("templating") or {}).get("list") or []:
        name = var.get("name")
        current = (var.get("current") or {}).get("value")
        if isinstance(current, list):
            current = current[0] if current else None
        if var.get("includeAll") or var.get("multi") or current in (None, "", "$__all"):
            single = current if current not in (None, "", "$__all") else None
            out.append((name, single, ".*"))
        else:
            out.append((name, str(current), str(current)))
    return tuple(out)


def queries(path: Path) -> list[Query]:
    doc = json.loads(path.read_text())
    variables = template_variables(doc)
    out = []

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr" and isinstance(v, str) and v.strip():
                    title = node.get("refId", "")
                    out.append(Query(path.name, f"{where}.expr{f' ({title})' if title else ''}", v,
                                     variables))
                else:
                    walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                t = v.get("title") if isinstance(v, dict) else None
                walk(v, f"{where}[{i}{f' {t!r}' if t else ''}]")
    walk(doc, "$")
    return out


def substitute(expr: str, job_id: str, speed: float, variables: tuple = ()) -> str:
    scrape = timescale.SCRAPE_INTERVAL / speed
    fixed = {
        "job_id": job_id, "__rate_interval": config.duration(4 * scrape),
        "__interval": config.duration(scrape), "__range": config.duration(3600 / speed),
        "__range_s": str(int(3600 / speed)), "__interval_ms": str(int(scrape * 1000)),
    }
    declared = {name: (single, regex) for name, single, regex in variables}

    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name.isdigit():
            return m.group(0)  # $1: a regex group in label_replace, which Grafana leaves too
        if name in fixed:
            return fixed[name]
        before = expr[:m.start()].rstrip('"')
        in_regex = before.endswith("=~") or before.endswith("!~")
        if name in MULTI:
            return ".*" if in_regex else MULTI[name]
        if name in declared:
            single, regex = declared[name]
            if in_regex or single is not None:
                return regex if in_regex else single
        raise KeyError(f"unknown Grafana variable ${name}")
    return VAR.sub(repl, expr)


def metric_names(expr: str) -> set[str]:
    """Names of the series a (substituted) query selects, from its parsed syntax tree."""
    names: set[str] = set()

    def walk(node):
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            return
        for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for arg in getattr(node, "args", None) or ():
            walk(arg)
    walk(promql_parser.parse(expr))
    return names


@dataclass
class Report:
    problems: list[str]
    not_emitted: list[str]  # queries without data because nothing here exports their metrics
    evaluated: int


def recorded_inputs(rules_dir: Path | None) -> dict[str, set[str]]:
    """{recorded series: the scraped series it is computed from, transitively}."""
    if rules_dir is None:
        return {}
    import yaml

    direct = {}
    for f in sorted(rules_dir.glob("*.yaml")):
        for group in (yaml.safe_load(f.read_text()) or {}).get("groups", []):
            for rule in group.get("rules", []):
                if "record" in rule:
                    direct.setdefault(rule["record"], set()).update(metric_names(rule["expr"]))
    def expand(name, seen=()):
        if name not in direct or name in seen:
            return {name}
        return set().union(*(expand(n, (*seen, name)) for n in direct[name]))
    return {name: expand(name) for name in direct}


def check(prom, paths: list[Path], job_ids: list[str], speed: float,
          rules_dir: Path | None = None, span: float = 90.0) -> Report:
    """Evaluate every query of every dashboard for every job over the last ``span``
    seconds, as a Grafana time-series panel would. A query that errors is a problem; one
    without data for every job is a problem when every series it reads exists in this
    Prometheus, directly or through the recording rules in ``rules_dir`` (otherwise its
    exporter simply does not run here)."""
    present = set(prom.api("label/__name__/values"))
    inputs = recorded_inputs(rules_dir)
    end = time.time()
    step = timescale.SCRAPE_INTERVAL / speed
    problems, not_emitted, evaluated = [], [], 0
    for path in paths:
        for q in queries(path):
            where = f"{q.dashboard}: {q.where}"
            try:
                exprs = [substitute(q.expr, j, speed, q.variables) for j in job_ids]
            except KeyError as exc:
                problems.append(f"{where}: {exc.args[0]}: {q.expr}")
                continue
            has_data, errors = False, []
            for expr in exprs:
                evaluated += 1
                answer = prom.query_range_raw(expr, end - span, end, step)
                if answer.get("status") != "success":
                    errors.append(answer.get("error", answer))
                    break
                has_data = has_data or any(r.get("values") for r in answer["data"]["result"])
                if has_data:
                    break
            if errors:
                problems.append(f"{where}: error {errors[0]}: {q.expr}")
            elif not has_data:
                names = metric_names(exprs[0])
                scraped = set().union(*(inputs.get(n, {n}) for n in names)) if names else set()
                missing = sorted(scraped - present)
                recorded = [n for n in names - present if ":" in n and n not in inputs]
                if recorded:  # no exporter to blame: the rules should record it
                    problems.append(f"{where}: reads {', '.join(recorded)}, which no rule "
                                    f"records here: {q.expr}")
                elif missing:
                    not_emitted.append(f"{where}: no series {', '.join(missing)} here")
                else:
                    problems.append(f"{where}: no data for any of {len(job_ids)} jobs: {q.expr}")
    return Report(problems, not_emitted, evaluated)
