"""The alert families obsgen renders, in order. Add a family here; nothing is discovered."""
from __future__ import annotations

from types import ModuleType

from .alerts import (checkpoints, fabric, gpus, gradients, inspector, nccl, panels,
                     pipeline, progress, ranks, recovery, stragglers)
from .config import Config, defaults
from .model import Family
from .promql import Ctx

FAMILIES: tuple[ModuleType, ...] = (stragglers, gradients, pipeline, checkpoints, ranks,
                                    gpus, fabric, recovery, progress, nccl, inspector, panels)
# Rendered when the dashboards read them (dashboards.records), whatever families: says.
PANEL_RECORDS = panels.NAME


def panel_records(cfg: Config) -> bool:
    return bool(cfg["dashboards"]["enabled"] and cfg["dashboards"]["records"])


def by_name() -> dict[str, ModuleType]:
    return {f.NAME: f for f in FAMILIES}


def selected(cfg: Config) -> list[ModuleType]:
    """Families the config asks for, in registry order, with the families they read from."""
    wanted = cfg["families"]
    names = {f.NAME for f in FAMILIES} if wanted is None else set(wanted)
    names.discard(PANEL_RECORDS)
    if panel_records(cfg):
        names.add(PANEL_RECORDS)
    # a family whose source only a preset brings (inspector): with that preset, unless
    # families: names others and leaves it out
    from .presets import ONLY_WITH_PRESET, families_of
    enabled = families_of(cfg["presets"])
    names -= ONLY_WITH_PRESET - enabled
    if wanted is None:
        names |= enabled
    while True:  # requirements point backwards or forwards and chain: repeat until settled
        more = {r for f in FAMILIES if f.NAME in names for r in getattr(f, "REQUIRES", ())}
        if more <= names:
            break
        names |= more
    return [f for f in FAMILIES if f.NAME in names]


def default_families() -> list[ModuleType]:
    """The families the default config renders (panels only with dashboards.records, the
    inspector family only with the nccl-inspector preset)."""
    return selected(defaults())


def build(cfg: Config) -> list[Family]:
    ctx = Ctx(cfg)
    return [f.build(ctx) for f in selected(cfg)]


def alert_names() -> list[str]:
    """Every alert name, from the definitions built with the default config."""
    cfg = defaults()
    return [a.name for fam in build(cfg) for a in fam.alerts]
