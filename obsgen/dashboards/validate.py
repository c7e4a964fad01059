"""Checks on rendered dashboards before anything is written: the dashboard lint always,
and Grafana's own JSON schema when a schema directory is available.

Grafana's schemas (dashboard.jsonschema.json for classic dashboards,
dashboardv2.jsonschema.json for schema v2) ship inside the package, in
``schemas/grafana/`` beside this module (their source and license are in its README);
every render validates against them. ``OBSGEN_GRAFANA_SCHEMAS`` names another directory
holding files of the same names, to validate against a newer copy.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import jsonschema

from ..config import Config
from . import lint, manifests

ENV = "OBSGEN_GRAFANA_SCHEMAS"
SHIPPED = Path(__file__).resolve().parent / "schemas" / "grafana"
FILES = ("dashboard.jsonschema.json", "dashboardv2.jsonschema.json")


class SchemaUnavailable(Exception):
    """The schema directory (OBSGEN_GRAFANA_SCHEMAS) lacks a readable schema file."""


@functools.lru_cache(maxsize=4)
def schema_validators(directory: str) -> dict[str, jsonschema.Draft7Validator]:
    """Validators for classic dashboards and for the spec of v2 dashboards."""
    root = Path(directory)
    docs = []
    for name in FILES:
        try:
            docs.append(json.loads((root / name).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            raise SchemaUnavailable(f"{root / name}: cannot read Grafana's schema ({ENV}="
                                    f"{directory}): {why}") from None
    classic, v2 = docs
    v2["$ref"] = "#/definitions/Dashboard"  # the file has no root; the spec is a Dashboard
    return {"classic": jsonschema.Draft7Validator(classic), "v2": jsonschema.Draft7Validator(v2)}


def schema_problems(doc: dict, validators: dict) -> list[str]:
    if doc.get("kind") == "Dashboard":
        errors = validators["v2"].iter_errors(doc.get("spec", {}))
    else:
        errors = validators["classic"].iter_errors(doc)
    return [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:200]}" for e in errors]


def dashboard_files(files: dict[str, str]) -> dict[str, dict]:
    return {p: json.loads(t) for p, t in files.items()
            if p.startswith("dashboards/") and p.endswith(".json")}


def schema_dir() -> str:
    """The directory the schemas are read from: OBSGEN_GRAFANA_SCHEMAS, else the package's."""
    return os.environ.get(ENV) or str(SHIPPED)


def check(files: dict[str, str], cfg: Config, families) -> list[str]:
    docs = dashboard_files(files)
    if not docs:
        return []
    problems = manifests.problems(files)
    ctx = lint.Context.of(cfg, families)
    try:
        validators = schema_validators(schema_dir())
    except SchemaUnavailable as exc:
        return [str(exc)]
    for path, doc in sorted(docs.items()):
        problems += [f"{path}: lint: {p}" for p in lint.lint(doc, ctx)]
        problems += [f"{path}: Grafana schema: {p}" for p in schema_problems(doc, validators)]
    return problems
