"""Checks on rendered dashboards before anything is written: the dashboard lint always,
and Grafana's own JSON schema when a schema directory is available.

Grafana's schemas (dashboard.jsonschema.json for classic dashboards,
dashboardv2.jsonschema.json for schema v2) are not shipped with obsgen; point
``OBSGEN_GRAFANA_SCHEMAS`` at a directory holding them (the Makefile uses the copy in
../shared/schemas/grafana when it exists) and every render validates against them.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import jsonschema

from ..config import Config
from . import lint

ENV = "OBSGEN_GRAFANA_SCHEMAS"


@functools.lru_cache(maxsize=4)
def schema_validators(directory: str) -> dict[str, jsonschema.Draft7Validator]:
    """Validators for classic dashboards and for the spec of v2 dashboards."""
    root = Path(directory)
    classic = json.loads((root / "dashboard.jsonschema.json").read_text())
    v2 = json.loads((root / "dashboardv2.jsonschema.json").read_text())
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


def check(files: dict[str, str], cfg: Config, families) -> list[str]:
    docs = dashboard_files(files)
    if not docs:
        return []
    problems = []
    ctx = lint.Context.of(cfg, families)
    directory = os.environ.get(ENV)
    validators = schema_validators(directory) if directory else None
    for path, doc in sorted(docs.items()):
        problems += [f"{path}: lint: {p}" for p in lint.lint(doc, ctx)]
        if validators:
            problems += [f"{path}: Grafana schema: {p}" for p in schema_problems(doc, validators)]
    return problems
