"""Reference docs and runbooks, generated from the definitions (jinja2, text only).

- ``docs/alerts.md``: every alert with its expression, ``for``, severity, team, and the
  config keys that change it;
- ``docs/metrics.md``: the contract as configured, who emits each metric and what reads it;
- ``docs/nccl.md``: the NCCL sidecar's version lines, settings and communicator names;
- ``docs/runbooks/<Alert>.md``: what the alert means and the first three things to check
  (from the family docstring), the PromQL to look at, tuning and silencing.

"Config keys that change it" is derived, not declared: each threshold and window is
perturbed in turn and the alerts whose rules (or the recorded series they read) change
are the ones that key affects.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from importlib import resources

import jinja2

from . import contract, familydoc
from .config import Config, duration, facts_interval, seconds
from .model import Family
from .promql import Ctx, identifiers
from .render import MARKER, group_name, load_yaml

TUNED_SECTIONS = ("thresholds", "windows")


def header_md(source: str) -> str:
    return (f"<!-- {MARKER} from {source}. Do not edit: change obsgen.yaml (or the "
            "definitions) and run `obsgen render`. -->\n")


def _environment() -> jinja2.Environment:
    def load(name: str) -> str:
        return resources.files("obsgen.templates").joinpath(name).read_text(encoding="utf-8")

    env = jinja2.Environment(loader=jinja2.FunctionLoader(load), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    return env


def template_text(text: str, cfg: Config) -> str:
    """An annotation template as prose: label references become <label>, values <value>,
    a list of series from a query (``range query``) <ranks>."""
    text = re.sub(r"\{\{ range query .*?\{\{ \.Labels\.(\w+) \}\}\{\{ end \}\}\{\{ end \}\}",
                  r" <\1s>", text)
    text = re.sub(r"\{\{ with \$labels\.(\w+) \}\}(.*?)\{\{ \. \}\}(.*?)\{\{ end \}\}",
                  lambda m: f"{m.group(2)}<{m.group(1)}>{m.group(3)}", text)
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", r"<\1>", text)
    return re.sub(r"\{\{[^}]*\$value[^}]*\}\}", "<value>", text)


# Dependencies ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Index:
    """Which recorded series and metrics each rule reads, as configured."""
    records: dict[str, str]  # recorded name -> expression
    metric_names: dict[str, contract.Metric]  # series name (with suffixes) -> metric

    @classmethod
    def build(cls, families: list[Family], cfg: Config) -> "Index":
        names = {}
        for m in contract.METRICS.values():
            base = cfg.metric(m.key)
            for suffix in (("_sum", "_count", "_bucket") if m.type == contract.HISTOGRAM else ("",)):
                names[base + suffix] = m
        return cls({r.name: r.expr for f in families for r in f.records}, names)

    def closure(self, expr: str) -> tuple[list[str], list[contract.Metric]]:
        """Recorded series read by ``expr`` (transitively) and the metrics under them."""
        seen, metrics, todo = [], [], [expr]
        while todo:
            ids = identifiers(todo.pop())
            for name in sorted(ids):
                if name in self.records and name not in seen:
                    seen.append(name)
                    todo.append(self.records[name])
                elif name in self.metric_names and self.metric_names[name] not in metrics:
                    metrics.append(self.metric_names[name])
        return seen, metrics


def _perturbed(cfg: Config, section: str, key: str) -> Config:
    data = copy.deepcopy(cfg.data)
    v = data[section][key]
    if isinstance(v, list):  # a set of codes: one more
        data[section][key] = v + [max(v) + 1]
    elif isinstance(v, str):  # a duration: double it
        data[section][key] = f"{int(seconds(v) * 2)}s"
    elif isinstance(v, int) and not isinstance(v, bool):
        data[section][key] = v + 1
    else:
        data[section][key] = v * 0.9 if v < 1 else v + 0.05
    return Config(data, cfg.source)


def _fingerprints(families: list[Family]) -> dict[str, str]:
    index = Index.build(families, Config({"metrics": {}}, ""))
    out = {}
    for f in families:
        for a in f.alerts:  # keyed by the definition's name: renames come with the passes
            records, _ = index.closure(a.expr)
            out[a.key] = "\n".join([a.expr, a.summary, a.description] + [index.records[r] for r in records])
    return out


def tuning_keys(families: list[Family], cfg: Config, build) -> dict[str, list[str]]:
    """Alert name -> config keys (``section.key``) whose change changes the alert.
    ``build`` makes the definitions for a config (the passes are not needed: they do not
    change expressions or annotation text)."""
    base = _fingerprints(families)
    memo = (json.dumps(cfg.data, sort_keys=True, default=str), tuple(sorted(base.items())), build)
    if memo not in _tuned:
        keys: dict[str, list[str]] = {name: [] for name in base}
        for section in TUNED_SECTIONS:
            for key in cfg[section]:
                changed = _fingerprints(build(_perturbed(cfg, section, key)))
                for name, fp in base.items():
                    if changed.get(name) != fp:
                        keys[name].append(f"{section}.{key}")
        if len(_tuned) > 64:
            _tuned.clear()
        _tuned[memo] = keys
    keys = _tuned[memo]
    return {a.name: list(keys[a.key]) for f in families for a in f.alerts}


# tuning_keys' answers by config and definitions: each costs a build of the definitions
# per tuned key, and a process that renders one config again (the tests, `obsgen test`
# after `render`) asks again
_tuned: dict[tuple, dict[str, list[str]]] = {}


# Rendering ------------------------------------------------------------------------------
def render_docs(families: list[Family], cfg: Config) -> dict[str, str]:
    from .registry import build as build_families  # the definitions under perturbed configs

    env = _environment()
    ctx = Ctx(cfg)
    index = Index.build(families, cfg)
    keys = tuning_keys(families, cfg, build_families)
    job_filter = {ctx.l(contract.L.job_id): "JOB"}
    recorded_by_name = {ctx.rname(r): r for r in contract.RECORDED.values()}
    files: dict[str, str] = {}
    fam_views, readers_of_metric, readers_of_record = [], {}, {}
    hops, paths = _chains(families, cfg)
    late = {a: sum(p) for a, p in paths.items()}
    from .alertmanager import inhibitions
    inhibits: dict[str, list] = {}
    inhibited_by: dict[str, list] = {}
    for source, targets, equal in inhibitions(families, cfg):
        inhibits.setdefault(source, []).append({"alerts": targets, "equal": equal})
        for t in targets:
            inhibited_by.setdefault(t, []).append({"alerts": [source], "equal": equal})

    for fam in families:
        module = fam.name
        doc = familydoc.parse(f"obsgen/alerts/{module}.py", fam.doc)
        alerts = []
        for a in fam.alerts:
            adoc = doc.alerts.get(a.key)  # the definitions' name: a config may rename it
            if adoc is None:
                raise familydoc.DocError(f"obsgen/alerts/{module}.py: no '## {a.key}' section")
            records, metrics = index.closure(a.expr)
            for r in records:
                readers_of_record.setdefault(r, []).append(a.name)
            for m in metrics:
                readers_of_metric.setdefault(m.key, []).append(a.name)
            reads = [{"query": _filtered(ctx, ctx.r(recorded_by_name[r]), job_filter),
                      "help": recorded_by_name[r].help} for r in records]
            _, direct = _direct_metrics(index, a.expr)
            reads += [{"query": _filtered(ctx, ctx.m(m), job_filter), "help": m.help} for m in direct]
            view = {
                "name": a.name, "expr": a.expr, "for_": a.for_, "severity": a.severity,
                "team": cfg["teams"][a.role], "tuning": keys[a.name],
                "hops": hops.get(a.name, 0), "late": duration(late.get(a.name, 0)),
                "summary_text": template_text(a.summary, cfg) + ". " + template_text(a.description, cfg),
                "description_text": template_text(a.description, cfg),
                "inhibits": inhibits.get(a.name, []),
                "inhibited_by": inhibited_by.get(a.name, []),
            }
            alerts.append(view)
            # Silence by the labels the alert identifies itself with, the job first.
            job = ctx.l(contract.L.job_id)
            matchers = [job] + [l for l in re.findall(r"\$labels\.(\w+)", a.summary + a.description)
                                if l not in (job, ctx.l(contract.L.node), ctx.l(contract.L.signal))]
            view["where"] = _where(ctx, a.summary + a.description)
            files[f"docs/runbooks/{a.name}.md"] = env.get_template("runbook.md.j2").render(
                header=header_md(f"obsgen/alerts/{module}.py"), alert=view, doc=adoc,
                family={"name": module}, team=view["team"], reads=reads, keys=keys[a.name],
                matchers=list(dict.fromkeys(matchers)))
        for r in fam.records:  # records read by other records
            for other in identifiers(r.expr):
                if other in index.records:
                    readers_of_record.setdefault(other, []).append(r.name)
            for name in identifiers(r.expr):
                if name in index.metric_names:
                    readers_of_metric.setdefault(index.metric_names[name].key, []).append(r.name)
        fam_views.append({"name": module, "doc": doc, "alerts": alerts})

    if cfg["dashboards"]["enabled"]:  # panels read metrics too, directly or through records
        from .dashboards import views
        for view in views(families, cfg):
            for row in view.rows:
                for panel in row.panels:
                    reader = f"panel {view.title} / {panel.title}"
                    for query in panel.queries:
                        records, metrics = index.closure(query.expr)
                        for r in records:
                            readers_of_record.setdefault(r, []).append(reader)
                        for m in metrics:
                            readers_of_metric.setdefault(m.key, []).append(reader)

    settings = {f"{s}.{k}": v for s in TUNED_SECTIONS for k, v in cfg[s].items()}
    env.filters["setting"] = lambda k: f"now {settings[k]}"
    files["docs/alerts.md"] = env.get_template("alerts.md.j2").render(
        header=header_md("the alert families in obsgen/alerts/"), families=fam_views)
    metrics = [{"name": cfg.metric(m.key), "type": m.type, "unit": m.unit, "help": m.help,
                "emitter": m.emitter, "labels": [cfg.label(l) for l in m.labels],
                "readers": list(dict.fromkeys(readers_of_metric.get(m.key, [])))}
               for m in contract.METRICS.values()]
    group_of = {r.name: group_name(f, r, cfg) for f in families for r in f.records}
    recorded = [{"name": name, "labels": [cfg.label(l) for l in recorded_by_name[name].labels],
                 "help": recorded_by_name[name].help, "group": group_of[name],
                 "readers": list(dict.fromkeys(readers_of_record.get(name, [])))}
                for name in index.records]
    from . import configdoc
    files["docs/config.md"] = configdoc.render(
        header_md("the comments in obsgen/config.py and obsgen/config.schema.json"))
    from .scenarios.late import RULERS
    files["docs/remote-rulers.md"] = env.get_template("remote-rulers.md.j2").render(
        header=header_md("obsgen/scenarios/late.py"), rulers=RULERS,
        interval=cfg["rule_interval"] or "30s", nonfinite=ctx.m(contract.M.train_nonfinite),
        new_matters=any(r.delay(p, new=True) > r.delay(p) for r in RULERS for p in paths.values()),
        alerts=[{**a, "reads": len(paths.get(a["name"], ())),
                 "delays": [duration(r.delay(paths.get(a["name"], ()))) for r in RULERS]}
                for f in fam_views for a in f["alerts"]])
    from .presets import PRESETS
    files["docs/presets.md"] = env.get_template("presets.md.j2").render(
        header=header_md("obsgen/presets.py"), presets=[
            {"name": p.name, "source": p.source, "assumes": p.assumes, "covers": p.covers,
             "checked": p.checked,
             "scales": p.scales,
             "renames": [(f"{k} (label)" if k in p.labels else k, v)
                         for k, v in list(p.metrics.items()) + list(p.labels.items())]}
            for p in PRESETS.values()])
    from .nccl.groups import COMM_NAMES
    from .nccl.versions import FEATURES, SETTINGS
    files["docs/nccl.md"] = env.get_template("nccl.md.j2").render(
        header=header_md("obsgen/nccl/versions.py and obsgen/nccl/groups.py"),
        features=FEATURES, settings=SETTINGS, names=sorted(COMM_NAMES.items()))
    files["docs/metrics.md"] = env.get_template("metrics.md.j2").render(
        header=header_md("obsgen/contract.py"), metrics=metrics, recorded=recorded,
        facts_interval=facts_interval(cfg))
    return files


def _chains(families: list[Family], cfg: Config) -> tuple[dict[str, int], dict[str, tuple]]:
    """Each alert's recording-rule hops and the evaluation intervals of its slowest chain
    of record reads (obsgen.scenarios.late), from the rendered groups."""
    import yaml

    from .render import rule_files, rule_groups
    from .scenarios import late
    docs = [{"groups": rule_groups(path, load_yaml(text), cfg)}
            for path, text in rule_files(families, cfg).items()]
    every = seconds(cfg["rule_interval"]) if cfg["rule_interval"] else 30.0
    return late.depths(docs, every), late.paths(docs, every)


def _direct_metrics(index: Index, expr: str):
    ids = identifiers(expr)
    return None, [m for name, m in index.metric_names.items() if name in ids and not name.endswith(("_sum", "_count", "_bucket"))]


def _filtered(ctx: Ctx, selector: str, match: dict[str, str]) -> str:
    extra = ", ".join(f'{k}="{v}"' for k, v in match.items())
    if selector.endswith("}"):
        return selector[:-1] + ", " + extra + "}"
    return f"{selector}{{{extra}}}"


def _where(ctx: Ctx, text: str) -> list[dict]:
    """Queries from what the alert names (its job, rank or host) to the hosts and GPUs."""
    L, M = contract.L, contract.M
    rank, node = ctx.l(L.rank), ctx.l(L.node)
    if f"$labels.{rank}" in text:
        at = {L.job_id: "JOB", L.rank: "RANK"}
        return [{"query": ctx.m(M.train_rank_gpu_info, match=at),
                 "help": f"the rank's host (`{node}`) and GPU (`UUID`, as dcgm-exporter names "
                         "it: its DCGM_FI_* series carry the same UUID)"},
                {"query": ctx.m(M.train_rank_mesh_info, match=at),
                 "help": "the rank's place in the parallel mesh (stage, TP/CP/EP/DP positions "
                         "and groups)"}]
    if f"$labels.{node}" in text:
        return [{"query": ctx.m(M.train_rank_gpu_info, match={L.job_id: "JOB", L.node: "NODE"}),
                 "help": "the job's ranks on that host, and their GPUs"}]
    return [{"query": ctx.m(M.train_rank_gpu_info, match={L.job_id: "JOB"}),
             "help": "every rank of the job, its host and GPU"}]
