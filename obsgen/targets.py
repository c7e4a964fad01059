"""Rule file formats: the same groups, wrapped the way each ruler loads them.

- ``prometheus``: a rule file (``rule_files:`` in prometheus.yml; also vmalert).
- ``prometheus-operator``: a ``monitoring.coreos.com/v1`` PrometheusRule per family;
  its labels must match the ``ruleSelector`` of the Prometheus resource.
- ``mimir``: a Mimir/Cortex ruler namespace file per family (``mimirtool rules load``):
  ``namespace`` and ``groups`` only, one namespace per file (mimirtool refuses a
  namespace defined in two files).
- ``thanos``: a Thanos ruler file; each group sets ``partial_response_strategy``:
  ``abort`` for liveness families (``Family.liveness``: a store that did not answer
  would look like ranks that stopped), ``warn`` for the others.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .config import Config
from .model import Family

# The engines that load each format's files, and the rule-file fields of the Prometheus 3
# line that some of them refuse (tests/test_targets.py loads a file with each field in
# every engine it can start, and checks this table against their answers). obsgen renders
# none of the three:
# - keep_firing_for (Prometheus 2.42+; vmalert 1.79 refuses it): the straggler and late
#   arrival holds are records (held12m), which the rules after them join (TP groups, mesh
#   patterns) and every engine evaluates alike;
# - query_offset (Prometheus 2.53+; promtool 2.42 and vmalert refuse it): late reads are
#   handled in the rules' windows (obsgen test --late-reads); a server-wide
#   rule_query_offset, where a store needs one, is in docs/remote-rulers.md;
# - group labels (Prometheus 3.0+; promtool 2.42 refuses them): they label records too,
#   and would change the series every join reads; common_labels are for alerts only.
ENGINES: dict[str, tuple[str, ...]] = {
    "prometheus": ("Prometheus 2.42", "Prometheus 3.5", "vmalert 1.79", "vmalert 1.145"),
    "prometheus-operator": ("Prometheus 2.42", "Prometheus 3.5"),
    # their rulers decode Prometheus' rule format; here only promtool checks their groups
    "mimir": ("Prometheus 2.42", "Prometheus 3.5"),
    "thanos": ("Prometheus 2.42", "Prometheus 3.5"),
}
REFUSED_BY: dict[tuple[str, str], frozenset[str]] = {
    ("rule", "keep_firing_for"): frozenset({"vmalert 1.79"}),
    ("group", "query_offset"): frozenset({"Prometheus 2.42", "vmalert 1.79", "vmalert 1.145"}),
    ("group", "labels"): frozenset({"Prometheus 2.42"}),
}


def refused(fmt: str, groups: list[dict]) -> list[str]:
    """Each field of these plain groups that an engine of the format refuses, with it."""
    out = []
    for g in groups:
        for (where, key), engines in REFUSED_BY.items():
            who = sorted(engines & set(ENGINES[fmt]))
            places = [g] if where == "group" else g.get("rules", [])
            if who and any(key in p for p in places):
                out.append(f"group {g.get('name')}: {where} field {key} is refused by "
                           f"{', '.join(who)}, which load format {fmt}")
    return out


@dataclass(frozen=True)
class Target:
    name: str
    document: Callable[[Family, list[dict], Config], dict]  # family, its groups -> file document
    groups: Callable[[dict], list[dict]]  # file document -> plain Prometheus rule groups


def _prometheus(fam: Family, groups: list[dict], cfg: Config) -> dict:
    return {"groups": groups}


def _operator(fam: Family, groups: list[dict], cfg: Config) -> dict:
    pr = cfg["prometheus_rule"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": f"{pr['name_prefix']}{fam.name}", "namespace": pr["namespace"],
                     "labels": dict(pr["labels"])},
        "spec": {"groups": groups},
    }


def _mimir(fam: Family, groups: list[dict], cfg: Config) -> dict:
    return {"namespace": f"{cfg['mimir_namespace_prefix']}{fam.name}", "groups": groups}


def _thanos(fam: Family, groups: list[dict], cfg: Config) -> dict:
    strategy = "abort" if fam.liveness else "warn"
    return {"groups": [{"name": g["name"], "partial_response_strategy": strategy,
                        **{k: v for k, v in g.items() if k != "name"}} for g in groups]}


def _strip_thanos(doc: dict) -> list[dict]:
    return [{k: v for k, v in g.items() if k != "partial_response_strategy"} for g in doc["groups"]]


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("prometheus", _prometheus, lambda doc: doc["groups"]),
    Target("prometheus-operator", _operator, lambda doc: doc["spec"]["groups"]),
    Target("mimir", _mimir, lambda doc: doc["groups"]),
    Target("thanos", _thanos, _strip_thanos),
)}
