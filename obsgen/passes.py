"""Cross-cutting passes over the built families, then validation.

Each pass takes the families and returns new ones; none of them knows about any
particular alert. Order: per-alert overrides, routing and common labels, runbook links.
"""
from __future__ import annotations

import re
from dataclasses import replace

from . import contract
from .contract import L
from .config import Config, seconds
from .model import Alert, Family, Record, SEVERITIES, ROLES
from .promql import template_literal


class DefinitionError(Exception):
    """A problem with the definitions as configured, one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def _map_alerts(families: list[Family], fn) -> list[Family]:
    return [replace(f, rules=tuple(fn(r) if isinstance(r, Alert) else r for r in f.rules))
            for f in families]


def overrides(families: list[Family], cfg: Config) -> list[Family]:
    """Per-alert ``for``, severity and team role from the config's ``alerts:``."""
    def apply(a: Alert) -> Alert:
        o = cfg["alerts"].get(a.key, {})
        return a.with_(name=o.get("name", a.name), for_=o.get("for", a.for_),
                       severity=o.get("severity", a.severity), role=o.get("team", a.role))
    return _map_alerts(families, apply)


def routing_labels(families: list[Family], cfg: Config) -> list[Family]:
    """severity and team labels, then the config's common labels."""
    def apply(a: Alert) -> Alert:
        labels = {cfg.label(L.severity.key): a.severity, cfg.label(L.team.key): cfg["teams"][a.role],
                  **a.labels}
        labels.update(cfg["common_labels"])
        # Prometheus and vmalert expand templates in alert labels: config text stays text.
        return a.with_(labels={k: template_literal(v) for k, v in labels.items()})
    return _map_alerts(families, apply)


# the dashboard an alert's dashboard_url opens, by family (others: the overview)
DASHBOARD_OF = {"gpus": "hardware", "fabric": "hardware", "pipeline": "pp", "recovery": "recovery"}


def runbook_path(cfg: Config, alert: str) -> str:
    """Where the runbook of ``alert`` is rendered, under the output root."""
    return f"{cfg['docs']['path'].strip('/')}/runbooks/{alert}.md"


def runbook_url(cfg: Config, alert: str) -> str | None:
    """The configured runbook_url, else one under links.base_url, else None."""
    if cfg["runbook_url"]:
        return cfg["runbook_url"].replace("{alert}", alert)
    base = cfg["links"]["base_url"]
    if base and cfg["docs"]["enabled"]:
        return f"{base.rstrip('/')}/{runbook_path(cfg, alert)}"
    return None


def runbook_links(families: list[Family], cfg: Config) -> list[Family]:
    """runbook_url where one can be given (runbook_url or links.base_url); else a runbook
    annotation with where the runbook is rendered and its first checks, so that the page
    still says what to do. dashboard_url with the job (and rank) when links.grafana_url
    is set."""
    from . import familydoc
    out = []
    for fam in families:
        doc = familydoc.parse(f"obsgen/alerts/{fam.name}.py", fam.doc)

        def apply(a: Alert, fam=fam, doc=doc) -> Alert:
            notes = dict(a.annotations)
            url = runbook_url(cfg, a.name)
            if url:
                notes["runbook_url"] = template_literal(url)
            else:
                adoc = doc.alerts.get(a.key)
                checks = " ".join(f"{i}. {c}" for i, c in enumerate(adoc.checks, 1)) if adoc else ""
                where = (f"{runbook_path(cfg, a.name)} where obsgen rendered the rules. "
                         if cfg["docs"]["enabled"] else "")
                notes["runbook"] = template_literal(f"{where}Check first: {checks}".strip())
            grafana = cfg["links"]["grafana_url"]
            if grafana and cfg["dashboards"]["enabled"]:
                view = DASHBOARD_OF.get(fam.name, "overview")
                if cfg["dashboards"]["format"] == "v2":
                    from .dashboards import V2_NAME
                    view = V2_NAME
                uid = f"{cfg['dashboards']['uid_prefix']}-{view}"
                job, rank = cfg.label(L.job_id.key), cfg.label(L.rank.key)
                link = (f"{grafana.rstrip('/')}/d/{uid}?var-job_id={{{{ $labels.{job} }}}}")
                if f"$labels.{rank}" in a.summary + a.description and view != "recovery":
                    link += f"&var-rank={{{{ $labels.{rank} }}}}"
                notes["dashboard_url"] = link
            return a.with_(annotations=notes)
        out.extend(_map_alerts([fam], apply))
    return out


def one_record_per_series(families: list[Family], cfg: Config) -> list[Family]:
    """Drop a recording rule that repeats an earlier one exactly (same name, same
    expression): it is the same series, e.g. when two windows are configured equal.
    The same name with another expression stays, for validation to refuse."""
    seen: set[tuple[str, str]] = set()
    out = []
    for fam in families:
        rules = []
        for r in fam.rules:
            if isinstance(r, Record):
                if (r.name, r.expr) in seen:
                    continue
                seen.add((r.name, r.expr))
            rules.append(r)
        out.append(replace(fam, rules=tuple(rules)))
    return out


PASSES = (one_record_per_series, overrides, routing_labels, runbook_links)


def run(families: list[Family], cfg: Config) -> list[Family]:
    for p in PASSES:
        families = p(families, cfg)
    validate(families, cfg)
    return families


def validate(families: list[Family], cfg: Config) -> None:
    """Names unique, every recorded series an expression reads rendered by some family,
    severities and roles known. Raises DefinitionError with every problem."""
    problems: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    keys: dict[str, str] = {}
    for fam in families:
        for rule in fam.rules:
            name = rule.name
            kind = "alert" if isinstance(rule, Alert) else "record"
            if kind == "alert" and name in keys:
                renamed = rule if rule.key != rule.name else None
                other = keys[name]
                path = f"alerts.{rule.key}.name" if renamed else f"alerts.{other}.name"
                problems.append(f"{cfg.source}: {path}: {name!r} is the name of another alert "
                                f"({other if renamed else rule.key}); alert names must be unique")
            elif (kind, name) in seen:
                problems.append(f"{fam.name}: {kind} {name} is also defined in {seen[(kind, name)]}")
            seen[(kind, name)] = fam.name
            if kind == "alert":
                keys[name] = rule.key
                if rule.for_within:
                    window, share = rule.for_within
                    limit = seconds(cfg["windows"][window]) * share
                    if seconds(rule.for_) >= limit:
                        problems.append(
                            f"{cfg.source}: alerts.{rule.key}.for: must be shorter than "
                            f"{share:g} x windows.{window} ({cfg['windows'][window]}), got "
                            f"{rule.for_}; the evidence it waits for is gone by then")
            if isinstance(rule, Alert):
                if rule.severity not in SEVERITIES:
                    problems.append(f"{fam.name}: {name}: unknown severity {rule.severity!r}")
                if rule.role not in ROLES:
                    problems.append(f"{fam.name}: {name}: unknown team role {rule.role!r}")
    produced = {name for (kind, name) in seen if kind == "record"}
    recorded_names = {r.name.format(**cfg["windows"]) for r in contract.RECORDED.values()}
    token = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
    for fam in families:
        for rule in fam.rules:
            for used in set(token.findall(rule.expr)) & recorded_names:
                if used not in produced:
                    problems.append(f"{fam.name}: {rule.name} reads {used}, which no rendered "
                                    "family records")
    if problems:
        raise DefinitionError(problems)
