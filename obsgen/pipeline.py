"""The pipeline: config -> definitions -> passes -> validation -> rendered files.

Each renderer takes the validated families and the config and returns
{relative path: content}; adding an output is adding a renderer to RENDERERS. Each
validator checks rendered files (with the real tools) before anything is written;
adding a check is adding a validator to VALIDATORS.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import yaml

from . import alertmanager, dashboards, docs, passes, promtool, registry, render, scenarios, shards, targets
from .config import Config
from .model import Family
from .render import load_yaml

Renderer = Callable[[list[Family], Config], dict[str, str]]
Validator = Callable[[dict[str, str], Config], list[str]]


class ValidationError(Exception):
    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def check_rule_files(files: dict[str, str], cfg: Config) -> list[str]:
    """promtool check rules on the groups of every rendered rule file, whatever its format."""
    from . import shards
    rules = {p: t for p, t in files.items() if p.startswith("rules/")}
    if not rules:
        return []
    refused = [f"{rel}: {line}" for rel, text in sorted(rules.items())
               for line in targets.refused(
                   shards.shard_format(cfg) if shards.is_shard_file(rel) else cfg["format"],
                   render.rule_groups(rel, load_yaml(text), cfg))]
    if refused:
        return refused
    with tempfile.TemporaryDirectory(prefix="obsgen-validate-") as tmp:
        paths = []
        for rel, text in sorted(rules.items()):
            path = Path(tmp) / Path(rel).name
            path.write_text(yaml.safe_dump({"groups": render.rule_groups(rel, load_yaml(text), cfg)}))
            paths.append(path)
        result = promtool.check_rules(paths)
    if result.ok:
        return []
    return [f"promtool check rules failed on the rendered rules:\n{result.output.replace(tmp, 'rules')}"]


def check_dashboards(files: dict[str, str], cfg: Config) -> list[str]:
    """Dashboard lint, and Grafana's JSON schemas (shipped in the package, or OBSGEN_GRAFANA_SCHEMAS)."""
    from .dashboards import validate as dashboard_checks
    return dashboard_checks.check(files, cfg, families(cfg))


VALIDATORS: tuple[Validator, ...] = (
    check_rule_files,
    check_dashboards,
)


def validate(files: dict[str, str], cfg: Config) -> None:
    problems = [p for v in VALIDATORS for p in v(files, cfg)]
    if problems:
        raise ValidationError(problems)

RENDERERS: tuple[Renderer, ...] = (
    render.rule_files,
    docs.render_docs,
    dashboards.files,
    alertmanager.routes,
    scenarios.files,
    shards.files,
)


def families(cfg: Config) -> list[Family]:
    """The configured families after the cross-cutting passes, validated."""
    return passes.run(registry.build(cfg), cfg)


def render_all(cfg: Config) -> dict[str, str]:
    """Every generated file, as {relative path: content}. Pure. The reference docs go
    under docs.path (their links are relative), or nowhere when docs.enabled is false."""
    fams = families(cfg)
    files: dict[str, str] = {}
    docs_path = cfg["docs"]["path"].strip("/")
    for renderer in RENDERERS:
        for path, text in renderer(fams, cfg).items():
            if path.startswith("docs/"):
                if not cfg["docs"]["enabled"]:
                    continue
                path = docs_path + path[len("docs"):]
            if path in files:
                raise ValueError(f"{path} is rendered twice")
            files[path] = text
    return files


def owned(cfg: Config) -> tuple[str, ...]:
    """Globs of the files obsgen owns outside its managed folders (removed when stale and
    generated): the scenario tests, and the reference docs when docs.path is elsewhere."""
    from .output import MANAGED_DIRS
    docs_path = cfg["docs"]["path"].strip("/")
    docs = () if docs_path.split("/")[0] in MANAGED_DIRS else (f"{docs_path}/**/*.md",)
    return scenarios.owned(cfg) + docs
