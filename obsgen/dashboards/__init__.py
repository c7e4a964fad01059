"""Grafana dashboards: the run owner's overview ("will this run finish on time?") and one
view per parallelism (DP, TP, PP, FSDP, EP).

Each view is a module in this package with ``build(env) -> View``, listed in ``VIEWS``
(nothing is discovered). ``files`` is the pipeline's renderer: classic dashboards (one per
view, joined by a links bar that acts as tabs) or, with ``dashboards.format: v2``, one
Grafana 12 schema-v2 dashboard with a tab per view; plus the file-provisioning provider.

``panel_queries`` lists every query of every rendered panel, for tests and benchmarks that
run them against a real Prometheus (``PanelQuery.promql`` fills in the variables).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .. import registry, render
from ..config import Config
from ..model import Family
from ..passes import DefinitionError
from ..promql import Ctx
from . import classic, dp, ep, fsdp, hardware, manifests, overview, pp, recovery, tp, v2
from .model import View
from .query import DATASOURCE, JOB, RANK_VAR, STAGE_VAR, Q

VIEWS = (overview, dp, tp, pp, fsdp, ep, hardware, recovery)  # in tab order
SOURCE = "obsgen/dashboards"
PROVISIONING = "dashboards/provisioning/obsgen.yaml"
V2_NAME = "training"  # the v2 dashboard: dashboards/training.json, uid <prefix>-training


@dataclass(frozen=True)
class Env:
    """What a view needs: the query helper, the config, and the alerts obsgen renders."""
    q: Q
    cfg: Config
    alerts: tuple[str, ...]

    def dash(self, key: str):
        return self.cfg["dashboards"][key]

    @property
    def records(self) -> bool:
        """The panels family is rendered (dashboards.records): the slowest panels read it."""
        return bool(self.cfg["dashboards"]["records"])


def views(families: list[Family], cfg: Config) -> list[View]:
    env = Env(Q(Ctx(cfg)), cfg, tuple(a.name for f in families for a in f.alerts))
    return [v.build(env) for v in VIEWS]


def _notice(source: str) -> str:
    """The generated-file header as one sentence, for a JSON description."""
    return " ".join(render.header(source, comment="").split())


def _validate(built: list[View], families: list[Family], cfg: Config) -> None:
    """Every recorded series a panel reads is rendered, and no extra-selector label takes
    a variable's name. Raises DefinitionError with one line per problem."""
    problems = []
    taken = {DATASOURCE, JOB, RANK_VAR, STAGE_VAR}
    for label in Ctx(cfg).carry:
        if label in taken:
            problems.append(f"selector: label {label!r} clashes with the dashboards' variable "
                            f"${label}; rename it under labels: or set dashboards.enabled: false")
    produced = {r.name for f in families for r in f.records}
    everywhere = {r.name: f.name for f in registry.build(_all_families(cfg)) for r in f.records}
    token = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
    missing: dict[str, set[str]] = {}
    for view in built:
        for panel in view.panels():
            used = {t for q in panel.queries for t in token.findall(q.expr)}
            for name in (used & set(everywhere)) - produced:
                missing.setdefault(everywhere[name], set()).add(name)
    for family, names in sorted(missing.items()):
        problems.append(f"dashboards: panels read {', '.join(sorted(names))}, recorded by family "
                        f"{family!r}, which families: leaves out; add {family} to families or "
                        "set dashboards.enabled: false")
    if problems:
        raise DefinitionError(problems)


def _all_families(cfg: Config) -> Config:
    return Config({**cfg.data, "families": None}, cfg.source)


def _meta(cfg: Config, key: str, title: str, question: str, source: str, variables,
          tabs_bar: bool) -> classic.Meta:
    d = cfg["dashboards"]
    return classic.Meta(
        uid=f"{d['uid_prefix']}-{key}", title=title,
        description=f"{_notice(source)} {question}", tag=d["tag"],
        time_range=d["time_range"], refresh=d["refresh"], variables=tuple(variables),
        trace_link=classic.trace_link(d, JOB), tabs_bar=tabs_bar)


def dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def files(families: list[Family], cfg: Config) -> dict[str, str]:
    """{relative path: content} of the dashboards and their provisioning file."""
    d = cfg["dashboards"]
    if not d["enabled"]:
        return {}
    built = views(families, cfg)
    _validate(built, families, cfg)
    q = Q(Ctx(cfg))
    out: dict[str, str] = {}
    if d["format"] == "v2":
        wanted = tuple(dict.fromkeys(v for view in built for v in view.variables))
        meta = _meta(cfg, V2_NAME, "Training run", "Will this run finish on time? Overview and "
                     "one tab per parallelism.", f"{SOURCE}/*.py", q.variables(wanted), False)
        out[f"dashboards/{V2_NAME}.json"] = dump(v2.dashboard(built, meta, meta.uid))
    else:
        for view in built:
            meta = _meta(cfg, view.key, f"Training · {view.title}", view.question, view.source,
                         q.variables(view.variables), True)
            out[f"dashboards/{view.key}.json"] = dump(classic.dashboard(view, meta))
    out.update(manifests.files(out, cfg))
    out[PROVISIONING] = render.dump_yaml(provider(cfg), f"{SOURCE}/__init__.py")
    return out


def provider(cfg: Config) -> dict:
    """Grafana's dashboard file provider. Put the JSON files in a subdirectory of the path
    (e.g. <path>/Training/): with foldersFromFilesStructure it becomes the folder."""
    d = cfg["dashboards"]
    return {"apiVersion": 1, "providers": [{
        "name": d["uid_prefix"], "orgId": 1, "type": "file", "disableDeletion": False,
        "allowUiUpdates": False, "updateIntervalSeconds": 60,
        "options": {"path": d["path"], "foldersFromFilesStructure": True}}]}


# panel queries -----------------------------------------------------------------------
_VAR = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def expand(expr: str, values: dict[str, str]) -> str:
    """``expr`` with Grafana's variables ($x, ${x}, ${x:fmt}, [[x]]) replaced by
    ``values``; names not in ``values`` (e.g. label_replace's $1) stay as they are."""
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return values.get(name, m.group(0))
    return _VAR.sub(sub, expr)


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str  # dashboard title (classic) or tab title (v2)
    uid: str
    panel: str
    ref: str
    expr: str  # as Grafana sends it, before variables are expanded
    instant: bool
    interval: str = ""  # the panel's min interval (smallest step), "" for the data source's

    def promql(self, job_id: str, *, rank: str = ".*", stage: str = ".*",
               rate_interval: str = "1m", range_: str = "1h", interval: str = "30s",
               extra: dict[str, str] | None = None) -> str:
        """Runnable PromQL: the query as Grafana would send it for job ``job_id`` (rank and
        stage as regular expressions, the extra selector's variables in ``extra``, default
        .*), with $__rate_interval, $__range and $__interval given."""
        values = {JOB: job_id, RANK_VAR: rank, STAGE_VAR: stage, "__rate_interval": rate_interval,
                  "__range": range_, "__interval": interval, **(extra or {})}
        return expand(self.expr, values)


def _classic_queries(doc: dict) -> list[PanelQuery]:
    return [PanelQuery(doc["title"], doc["uid"], p["title"], t["refId"], t["expr"],
                       bool(t.get("instant")), p.get("interval", ""))
            for p in doc.get("panels", []) for t in p.get("targets", [])]


def _v2_queries(doc: dict) -> list[PanelQuery]:
    spec = doc["spec"]
    tab_of = {}
    for tab in spec["layout"]["spec"]["tabs"]:
        for row in tab["spec"]["layout"]["spec"]["rows"]:
            for item in row["spec"]["layout"]["spec"]["items"]:
                tab_of[item["spec"]["element"]["name"]] = tab["spec"]["title"]
    out = []
    for key, el in spec["elements"].items():
        interval = el["spec"]["data"]["spec"]["queryOptions"].get("interval", "")
        for q in el["spec"]["data"]["spec"]["queries"]:
            s = q["spec"]["query"]["spec"]
            out.append(PanelQuery(tab_of[key], doc["metadata"]["name"], el["spec"]["title"],
                                  q["spec"]["refId"], s["expr"], bool(s.get("instant")), interval))
    return out


def queries_of(rendered: dict[str, str]) -> list[PanelQuery]:
    """Every panel query in rendered files ({path: text}, as ``files`` returns), in
    their order."""
    out = []
    for path, text in rendered.items():
        if path.startswith("dashboards/") and path.endswith(".json"):
            doc = json.loads(text)
            out.extend(_v2_queries(doc) if doc.get("kind") == "Dashboard" else _classic_queries(doc))
    return out


def panel_queries(cfg: Config | None = None) -> list[PanelQuery]:
    """Every panel query of every dashboard obsgen renders for ``cfg`` (default: the
    defaults), in file and panel order."""
    from .. import config as config_mod, pipeline

    cfg = cfg or config_mod.Config(json.loads(json.dumps(config_mod.DEFAULTS)), "(defaults)")
    return queries_of(files(pipeline.families(cfg), cfg))
