"""The pipeline: config -> definitions -> passes -> validation -> rendered files."""
from __future__ import annotations

from .config import Config
from . import passes, registry, render


def render_all(cfg: Config) -> dict[str, str]:
    """Every generated file, as {relative path: content}. Pure."""
    families = passes.run(registry.build(cfg), cfg)
    return render.rule_files(families, cfg)
