"""Render ``alertmanager/obsgen-routes.yaml``: routing by team and severity, inhibitions.

The file is a complete Alertmanager configuration that ``amtool check-config`` accepts:

* ``route.routes[0]`` is obsgen's subtree: it matches obsgen's alerts by name, groups
  them by alert and job, and routes each team to ``obsgen-<team>`` and each severity of
  that team to ``obsgen-<team>-<severity>``. To merge it into an existing Alertmanager
  config, copy that subtree under your root route and the ``inhibit_rules``.
* ``receivers`` lists those receivers without integrations (Alertmanager drops what they
  get): give each the webhook, Slack or PagerDuty config of the team.
* ``inhibit_rules``: an alert that declares ``inhibits`` (Train_RankFailed) suppresses
  the alerts of the named families for the same job: with ranks dead or hung, stragglers
  and missed checkpoints are consequences, not news. ``equal`` carries the extra
  selector's labels, so jobs of two clusters with the same id never inhibit each other.

Timings are Alertmanager's usual ones; critical alerts repeat hourly, others every 4h.
"""
from __future__ import annotations

from .config import Config
from .contract import L
from .model import Family, SEVERITIES
from .promql import quote
from .render import dump_yaml

PATH = "alertmanager/obsgen-routes.yaml"
GROUP_WAIT, GROUP_INTERVAL = "30s", "5m"
REPEAT = {"critical": "1h"}
REPEAT_DEFAULT = "4h"


def receiver(team: str, severity: str | None = None) -> str:
    return f"obsgen-{team}" + (f"-{severity}" if severity else "")


def _matcher(label: str, value: str) -> str:
    return f"{label}={quote(value)}"


def _alternatives(names: list[str]) -> str:
    return "|".join(names)


def routes(families: list[Family], cfg: Config) -> dict[str, str]:
    alerts = [a for fam in families for a in fam.alerts]
    by_family = {fam.name: [a.name for a in fam.alerts] for fam in families}
    team_label, severity_label = cfg.label(L.team.key), cfg.label(L.severity.key)
    job = [*cfg["selector"], cfg.label(L.job_id.key)]
    teams = list(dict.fromkeys(cfg["teams"][r] for r in sorted(cfg["teams"])))
    subtree = {
        "matchers": [f"alertname=~{quote(_alternatives([a.name for a in alerts]))}"],
        "receiver": "obsgen-default",
        "group_by": ["alertname", *job],
        "group_wait": GROUP_WAIT,
        "group_interval": GROUP_INTERVAL,
        "repeat_interval": REPEAT_DEFAULT,
        "routes": [
            {"matchers": [_matcher(team_label, team)], "receiver": receiver(team),
             "routes": [{"matchers": [_matcher(severity_label, sev)],
                         "receiver": receiver(team, sev),
                         "repeat_interval": REPEAT.get(sev, REPEAT_DEFAULT)}
                        for sev in SEVERITIES]}
            for team in teams],
    }
    inhibit = []
    for a in alerts:
        targets = [name for fam in a.inhibits for name in by_family.get(fam, [])]
        if targets:
            inhibit.append({"source_matchers": [_matcher("alertname", a.name)],
                            "target_matchers": [f"alertname=~{quote(_alternatives(targets))}"],
                            "equal": job})
    names = ["obsgen-default"] + [r for t in teams for r in
                                  (receiver(t), *(receiver(t, s) for s in SEVERITIES))]
    doc = {
        "route": {"receiver": "obsgen-default", "routes": [subtree]},
        "inhibit_rules": inhibit,
        "receivers": [{"name": n} for n in names],
    }
    return {PATH: dump_yaml(doc, "obsgen/alertmanager.py (routes by team and severity)")}
