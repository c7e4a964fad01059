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
