"""Render ``alertmanager/obsgen-routes.yaml``: routing by team and severity, inhibitions.

The file is a complete Alertmanager configuration that ``amtool check-config`` accepts:

* ``route.routes[0]`` is obsgen's subtree: it matches obsgen's alerts by name, groups
  them by alert and job, and routes each team to ``obsgen-<team>`` and each severity of
  that team to ``obsgen-<team>-<severity>``. To merge it into an existing Alertmanager
  config, copy that subtree under your root route and the ``inhibit_rules``.
* ``receivers`` lists those receivers without integrations (Alertmanager drops what they
  get): give each the webhook, Slack or PagerDuty config of the team.
* ``inhibit_rules``: an alert that declares ``inhibits`` suppresses the alerts it names
  (whole families, or single alerts) for the same job: a cause is paged, not its effects.
  Train_RankFailed suppresses the straggler and checkpoint alerts (with ranks dead or
  hung, they are consequences); the straggler alerts that name a GPU, a TP group or a
  mesh position suppress Train_Bubble_Excess, Train_StepTime_Regression and
  Train_ETA_Slip (the other stages' idle time, the slower steps and the later finish are
  the straggler's); Train_Straggler_Persistent suppresses Train_Straggler_LateArrival of
  the same rank (one fault, two signals). ``equal`` carries the extra selector's labels,
  so jobs of two clusters with the same id never inhibit each other.

Timings are Alertmanager's usual ones; critical alerts repeat hourly, others every 4h.
"""
from __future__ import annotations

from .config import Config
from .contract import L
from .model import Family, Inhibit, SEVERITIES
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


def inhibitions(families: list[Family], cfg: Config) -> list[tuple[str, list[str], list[str]]]:
    """(source alert, target alerts, labels that must be equal) of every inhibition among
    the rendered alerts, under the config's names; targets not rendered are left out."""
    by_family = {fam.name: [a.name for a in fam.alerts] for fam in families}
    by_key = {a.key: a.name for fam in families for a in fam.alerts}
    job = [*cfg["selector"], cfg.label(L.job_id.key)]
    out: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # one rule per source and equal
    for a in (a for fam in families for a in fam.alerts):
        for entry in a.inhibits:
            inhibit = entry if isinstance(entry, Inhibit) else Inhibit((entry,))
            equal = tuple(job + [cfg.label(k) for k in inhibit.same])
            out.setdefault((a.name, equal), []).extend(
                n for t in inhibit.targets for n in by_family.get(t, [by_key[t]] if t in by_key else []))
    return [(source, targets, list(equal)) for (source, equal), targets in out.items() if targets]


def routes(families: list[Family], cfg: Config) -> dict[str, str]:
    alerts = [a for fam in families for a in fam.alerts]
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
    inhibit = [{"source_matchers": [_matcher("alertname", source)],
                "target_matchers": [f"alertname=~{quote(_alternatives(targets))}"],
                "equal": equal}
               for source, targets, equal in inhibitions(families, cfg)]
    names = ["obsgen-default"] + [r for t in teams for r in
                                  (receiver(t), *(receiver(t, s) for s in SEVERITIES))]
    doc = {
        "route": {"receiver": "obsgen-default", "routes": [subtree]},
        "inhibit_rules": inhibit,
        "receivers": [{"name": n} for n in names],
    }
    return {PATH: dump_yaml(doc, "obsgen/alertmanager.py (routes by team and severity)")}
