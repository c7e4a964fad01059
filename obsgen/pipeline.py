"""The pipeline: config -> definitions -> passes -> validation -> rendered files.

Each renderer takes the validated families and the config and returns
{relative path: content}; adding an output is adding a renderer to RENDERERS.
"""
from __future__ import annotations

from typing import Callable

from . import docs, passes, registry, render
from .config import Config
from .model import Family

Renderer = Callable[[list[Family], Config], dict[str, str]]

RENDERERS: tuple[Renderer, ...] = (
    render.rule_files,
    docs.render_docs,
)


def families(cfg: Config) -> list[Family]:
    """The configured families after the cross-cutting passes, validated."""
    return passes.run(registry.build(cfg), cfg)


def render_all(cfg: Config) -> dict[str, str]:
    """Every generated file, as {relative path: content}. Pure."""
    fams = families(cfg)
    files: dict[str, str] = {}
    for renderer in RENDERERS:
        for path, text in renderer(fams, cfg).items():
            if path in files:
                raise ValueError(f"{path} is rendered twice")
            files[path] = text
    return files
