"""Dashboard lint: the rules of grafana/dashboard-linter that apply to obsgen's dashboards,
plus obsgen's own (every query filtered by the job, every metric known), in Python over
the rendered JSON, classic or schema v2.

PromQL is parsed with ``promql-parser`` after Grafana's variables are
substituted the way the Go linter does: a range variable outside a string becomes a
duration that cannot occur by accident, so ``[$__rate_interval]`` is recognisable after
parsing; variables inside strings (label matchers) stay as written.

``lint(doc, context)`` returns problems as ``"<rule>: <dashboard>: <panel>: <reason>"``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from grafana_foundation_sdk.models import units as _units

from .. import contract
from ..config import Config
from ..model import Family
from .query import ALL, DATASOURCE, JOB, RANK_VAR

GRAFANA_UNITS = frozenset(v for k, v in vars(_units).items()
                          if not k.startswith("_") and isinstance(v, str))
RATE_FUNCS = ("rate", "irate")
COUNTER_FUNCS = ("rate", "irate", "increase")
# Durations that stand for Grafana's range variables while parsing (seconds).
MAGIC = {"__rate_interval": 11277964, "__range": 11277965, "__interval": 11277966,
         "__range_s": 11277967, "__interval_ms": 11277968}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


@dataclass(frozen=True)
class Context:
    """What the rules need to know about the series: every known name, which are
    counters, which carry the job label, and the job label's name."""
    known: frozenset[str]
    counters: frozenset[str]
    job_series: frozenset[str]
    job_label: str = "job_id"
    # histogram series a source records once per several steps (Megatron's log interval):
    # read over the fixed window the rules use, which holds two of its observations
    sparse: frozenset[str] = frozenset()

    @classmethod
    def of(cls, cfg: Config, families: list[Family]) -> "Context":
        known, counters, job_series, sparse = set(), set(), set(), set()
        for m in contract.METRICS.values():
            name = cfg.metric(m.key)
            names = [name + s for s in ("_bucket", "_sum", "_count")] if m.type == contract.HISTOGRAM else [name]
            known.update(names)
            if cfg.steps_per_observation(m.key) > 1:
                sparse.update(names)
            if m.type in (contract.COUNTER, contract.HISTOGRAM):
                counters.update(names)
            if "job_id" in m.labels:
                job_series.update(names)
        recorded = {r.name.format(**cfg["windows"]): r for r in contract.RECORDED.values()}
        for fam in families:
            for rec in fam.records:
                known.add(rec.name)
                if rec.name in recorded and "job_id" in recorded[rec.name].labels:
                    job_series.add(rec.name)
        return cls(frozenset(known), frozenset(counters), frozenset(job_series),
                   cfg.label("job_id"), frozenset(sparse))


# the dashboard, whatever its format ---------------------------------------------------
@dataclass
class Target:
    ref: str
    expr: str
    datasource: str | None


@dataclass
class Panel:
    title: str
    kind: str
    description: str
    unit: str
    datasource: str | None
    targets: list[Target] = field(default_factory=list)


@dataclass
class Variable:
    name: str
    type: str  # datasource, query, custom, ...
    query: str
    label: str = ""
    multi: bool = False
    include_all: bool = False
    all_value: str = ""
    refresh_on_time: bool = False


@dataclass
class Dashboard:
    title: str
    variables: list[Variable]
    panels: list[Panel]


def _uid(ds) -> str | None:
    if isinstance(ds, dict):
        return ds.get("uid") or ds.get("name")
    return ds


def normalize(doc: dict) -> Dashboard:
    """The parts the rules read, from classic JSON or a v2 resource."""
    if doc.get("kind") == "Dashboard" and "spec" in doc:
        return _normalize_v2(doc["spec"])
    variables = [Variable(v["name"], v["type"], v["query"] if isinstance(v.get("query"), str) else "",
                          v.get("label", ""), v.get("multi", False), v.get("includeAll", False),
                          v.get("allValue", ""), v.get("refresh") == 2)
                 for v in doc.get("templating", {}).get("list", [])]
    panels = []
    for p in doc.get("panels", []):
        if p.get("type") == "row":
            continue
        panels.append(Panel(
            p.get("title", ""), p.get("type", ""), p.get("description", ""),
            p.get("fieldConfig", {}).get("defaults", {}).get("unit", ""), _uid(p.get("datasource")),
            [Target(t.get("refId", ""), t.get("expr", ""), _uid(t.get("datasource")))
             for t in p.get("targets", [])]))
    return Dashboard(doc.get("title", ""), variables, panels)


def _normalize_v2(spec: dict) -> Dashboard:
    variables = []
    for v in spec.get("variables", []):
        s = v["spec"]
        if v["kind"] == "DatasourceVariable":
            variables.append(Variable(s["name"], "datasource", s.get("pluginId", ""), s.get("label", "")))
        else:
            q = s.get("query", {})
            text = q.get("spec", {}).get("query", "") if isinstance(q, dict) else str(q)
            variables.append(Variable(
                s["name"], v["kind"].removesuffix("Variable").lower(), text, s.get("label", ""),
                s.get("multi", False), s.get("includeAll", False), s.get("allValue", ""),
                s.get("refresh") == "onTimeRangeChanged"))
    panels = []
    for el in spec.get("elements", {}).values():
        s = el["spec"]
        queries = s["data"]["spec"]["queries"]
        sources = {_uid(q["spec"]["query"].get("datasource")) for q in queries}
        panels.append(Panel(
            s.get("title", ""), s["vizConfig"]["group"], s.get("description", ""),
            s["vizConfig"]["spec"]["fieldConfig"]["defaults"].get("unit", ""),
            sources.pop() if len(sources) == 1 else None,
            [Target(q["spec"]["refId"], q["spec"]["query"]["spec"].get("expr", ""),
                    _uid(q["spec"]["query"].get("datasource"))) for q in queries]))
    return Dashboard(spec.get("title", ""), variables, panels)


# PromQL -------------------------------------------------------------------------------
def expand(expr: str) -> str:
    """``expr`` ready to parse: range variables outside strings become magic durations,
    other variables outside strings become identifiers; strings stay as written."""
    out, pos = [], 0
    for m in _STRING.finditer(expr):
        out.append(_expand_code(expr[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_expand_code(expr[pos:]))
    return "".join(out)


def _expand_code(code: str) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return f"{MAGIC[name]}s" if name in MAGIC else f"grafana_var_{name}"
    return _VAR.sub(sub, code)


def parse(expr: str):
    import promql_parser  # imported here: only the lint parses PromQL

    return promql_parser.parse(expand(expr))


def _children(node) -> list:
    kind = type(node).__name__
    if kind == "AggregateExpr":
        return [c for c in (node.param, node.expr) if c is not None]
    if kind == "BinaryExpr":
        return [node.lhs, node.rhs]
    if kind == "Call":
        return list(node.args)
    if kind == "MatrixSelector":
        return [node.vector_selector]
    if kind in ("ParenExpr", "SubqueryExpr", "UnaryExpr"):
        return [node.expr]
    return []


def walk(node, parents: tuple = ()):
    """(node, parents) for every node, depth first."""
    yield node, parents
    for child in _children(node):
        yield from walk(child, parents + (node,))


def selectors(node) -> list:
    return [n for n, _ in walk(node) if type(n).__name__ == "VectorSelector"]


def _func(node) -> str:
    return node.func.name if type(node).__name__ == "Call" else ""


# rules --------------------------------------------------------------------------------
def _templated(uid: str | None) -> bool:
    return uid in ("$" + DATASOURCE, "${%s}" % DATASOURCE)


def template_datasource(d: Dashboard, ctx: Context) -> list[str]:
    ds = [v for v in d.variables if v.type == "datasource"]
    if len(ds) != 1 or ds[0].name != DATASOURCE or ds[0].query != "prometheus":
        return [f"{d.title}: needs one Prometheus data source variable named {DATASOURCE!r}"]
    if ds[0].label != "Data source":
        return [f"{d.title}: the data source variable should be labelled 'Data source'"]
    return []


def template_job(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    job = next((v for v in d.variables if v.name == JOB), None)
    if job is None or job.type != "query" or job.multi:
        out.append(f"{d.title}: needs a single-value query variable {JOB!r}")
    rank = next((v for v in d.variables if v.name == RANK_VAR), None)
    if rank is not None and not (rank.multi and rank.include_all and rank.all_value == ALL):
        out.append(f"{d.title}: variable {RANK_VAR!r} must be multi-value with All = {ALL!r} "
                   "(a list of every rank does not scale)")
    return out


def template_on_time_change_reload(d: Dashboard, ctx: Context) -> list[str]:
    return [f"{d.title}: variable {v.name!r} must refresh on time range change"
            for v in d.variables if v.type == "query" and not v.refresh_on_time]


def template_label_promql(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for v in d.variables:
        if v.type != "query":
            continue
        m = re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)", v.query, re.S)
        if not m:
            out.append(f"{d.title}: variable {v.name!r}: {v.query!r} is not label_values(selector, label)")
            continue
        try:
            parse(m.group(1))
        except Exception as exc:  # promql_parser raises plain exceptions
            out.append(f"{d.title}: variable {v.name!r}: invalid selector: {exc}")
    return out


def panel_datasource(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for p in d.panels:
        if not _templated(p.datasource):
            out.append(f"{d.title}: {p.title}: panel data source {p.datasource!r} is not ${DATASOURCE}")
        for t in p.targets:
            if t.datasource is not None and not _templated(t.datasource):
                out.append(f"{d.title}: {p.title}: query {t.ref} uses data source {t.datasource!r}")
    return out


def panel_title_description(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for p in d.panels:
        if not p.title.strip():
            out.append(f"{d.title}: a {p.kind} panel has no title")
        if not p.description.strip():
            out.append(f"{d.title}: {p.title}: no description")
        elif "\n" in p.description or "Healthy" not in p.description:
            out.append(f"{d.title}: {p.title}: the description must be one line saying what "
                       "healthy looks like ('Healthy: ...')")
    return out


def panel_units(d: Dashboard, ctx: Context) -> list[str]:
    return [f"{d.title}: {p.title}: unit {p.unit!r} is not a Grafana unit"
            for p in d.panels if p.unit not in GRAFANA_UNITS]


def panel_no_targets(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for p in d.panels:
        if not p.targets:
            out.append(f"{d.title}: {p.title}: no queries")
        out += [f"{d.title}: {p.title}: query {t.ref} is empty" for t in p.targets if not t.expr.strip()]
    return out


def _each_query(d: Dashboard):
    for p in d.panels:
        for t in p.targets:
            if not t.expr.strip():
                continue
            try:
                yield p, t, parse(t.expr)
            except Exception:  # reported by target_promql
                continue


def target_promql(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for p in d.panels:
        for t in p.targets:
            if t.expr.strip():
                try:
                    parse(t.expr)
                except Exception as exc:
                    out.append(f"{d.title}: {p.title}: query {t.ref} is not valid PromQL: "
                               f"{str(exc).splitlines()[0]}")
    return out


def target_rate_interval(d: Dashboard, ctx: Context) -> list[str]:
    rate = timedelta(seconds=MAGIC["__rate_interval"])
    out = []
    for p, t, tree in _each_query(d):
        for node, parents in walk(tree):
            if type(node).__name__ != "MatrixSelector" or not parents:
                continue
            func = _func(parents[-1])
            if (func in RATE_FUNCS and node.range != rate
                    and node.vector_selector.name not in ctx.sparse):
                out.append(f"{d.title}: {p.title}: query {t.ref}: {func}() over "
                           f"{node.vector_selector.name} must use $__rate_interval")
    return out


def _is_counter(name: str, ctx: Context) -> bool:
    return name in ctx.counters or name.endswith("_total")


def target_counter_agg(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for p, t, tree in _each_query(d):
        for node, parents in walk(tree):
            if type(node).__name__ != "VectorSelector" or not _is_counter(node.name or "", ctx):
                continue
            ok = (len(parents) >= 2 and type(parents[-1]).__name__ == "MatrixSelector"
                  and _func(parents[-2]) in COUNTER_FUNCS)
            if not ok:
                out.append(f"{d.title}: {p.title}: query {t.ref}: counter {node.name} is read "
                           "outside rate/irate/increase")
    return out


def target_job(d: Dashboard, ctx: Context) -> list[str]:
    """Every selector of a series that carries the job label is filtered by $job_id, and
    every query has at least one such selector (series without the label, such as
    dcgm-exporter's, are joined to one)."""
    want = {"$" + JOB, "${%s}" % JOB}
    out = []
    for p, t, tree in _each_query(d):
        filtered, unfiltered = 0, []
        for sel in selectors(tree):
            if sel.name not in ctx.job_series:
                continue
            if any(m.name == ctx.job_label and str(m.op) == "MatchOp.Equal" and m.value in want
                   for m in sel.matchers.matchers):
                filtered += 1
            else:
                unfiltered.append(f"{d.title}: {p.title}: query {t.ref}: {sel.name} has no "
                                  f'{ctx.job_label}="${JOB}" matcher')
        out += unfiltered
        if filtered == 0 and not unfiltered:
            out.append(f"{d.title}: {p.title}: query {t.ref} is not filtered by ${JOB}")
    return out


def target_known_metric(d: Dashboard, ctx: Context) -> list[str]:
    out = []
    for p, t, tree in _each_query(d):
        for sel in selectors(tree):
            if sel.name not in ctx.known:
                out.append(f"{d.title}: {p.title}: query {t.ref} reads {sel.name}, which is "
                           "neither in the contract nor a recording rule obsgen renders")
    return out


RULES = {
    "template-datasource-rule": template_datasource,
    "template-job-rule": template_job,
    "template-on-time-change-reload-rule": template_on_time_change_reload,
    "template-label-promql-rule": template_label_promql,
    "panel-datasource-rule": panel_datasource,
    "panel-title-description-rule": panel_title_description,
    "panel-units-rule": panel_units,
    "panel-no-targets-rule": panel_no_targets,
    "target-promql-rule": target_promql,
    "target-rate-interval-rule": target_rate_interval,
    "target-counter-agg-rule": target_counter_agg,
    "target-job-rule": target_job,
    "target-known-metric-rule": target_known_metric,
}


def lint(doc: dict, ctx: Context) -> list[str]:
    d = normalize(doc)
    return [f"{rule}: {problem}" for rule, fn in RULES.items() for problem in fn(d, ctx)]
