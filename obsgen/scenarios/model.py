"""What a scenario is: synthetic jobs, how long they run, and what must (not) fire.

Expectations are stated against the ``ALERTS`` series promtool records while it evaluates
the rendered rules, so they hold whatever the alert's annotations print:

- ``Fires``: from ``onset`` on, within ``within`` minutes, the alert fires for exactly
  the label sets given (only their keys are compared), and it did not fire before
  ``onset``;
- ``Quiet``: the alert never fires during the scenario (from ``start`` on);
- ``Holds``: from ``start`` to ``end`` the alert fires at every evaluation for the label
  set given: one episode, never closed and opened again.

``Setting`` reads what a scenario is sized from out of the config: thresholds, windows,
each alert's ``for`` and each family's evaluation interval, in minutes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import Config, duration, seconds
from ..model import Family
from ..promql import Ctx


@dataclass(frozen=True)
class Fires:
    alert: str  # the alert's key in the definitions (Train_...), renamed by the config
    onset: float  # minute the fault starts
    within: float  # minutes after onset by which it fires
    labels: tuple[dict[str, str], ...]  # contract label keys -> values, one per alert
    bound: str  # ``within`` in words, from the config


@dataclass(frozen=True)
class Quiet:
    alert: str
    start: float = 0.0


@dataclass(frozen=True)
class Holds:
    alert: str
    start: float
    end: float
    labels: dict[str, str]


@dataclass
class Scenario:
    sentence: str
    jobs: list  # obsgen.synth Jobs or obsgen.synth_hw Fleets
    minutes: float
    expects: list = field(default_factory=list)


@dataclass(frozen=True)
class NotStated:
    """A scenario that cannot hold under the config, and why (said by render and test)."""
    sentence: str
    reason: str


class Setting:
    """The config's values a scenario is sized from."""

    def __init__(self, cfg: Config, families: list[Family]):
        self.cfg = cfg
        self.alerts = {a.key: a for f in families for a in f.alerts}
        self.families = {f.name: f for f in families}

    def t(self, name: str):
        return self.cfg["thresholds"][name]

    def w(self, name: str) -> float:
        """A window, in minutes."""
        return seconds(self.cfg["windows"][name]) / 60

    def read(self, name: str) -> float:
        """A window, in minutes, as the rules read the step histogram and the gauges logged
        with it over it: where a preset records them once per n steps (Megatron's
        --log-interval), at least n progress windows (obsgen.promql.Ctx.observed)."""
        return seconds(Ctx(self.cfg).stepped(self.cfg["windows"][name])) / 60

    def for_(self, alert: str) -> float:
        return seconds(self.alerts[alert].for_) / 60 if self.alerts[alert].for_ else 0.0

    def every(self, family: str) -> float:
        """Minutes between evaluations of the family's alerts (its interval, else 30 s)."""
        interval = (self.cfg["family_intervals"] or {}).get(family) or self.cfg["rule_interval"]
        return max(seconds(interval) / 60, 0.5) if interval else 0.5

    def facts(self, family: str) -> float:
        """Minutes between evaluations of the family's facts group."""
        interval = ((self.cfg["facts_intervals"] or {}).get(family) or self.cfg["facts_interval"])
        return seconds(interval) / 60 if interval else self.every(family)

    def has(self, alert: str) -> bool:
        return alert in self.alerts


def words(minutes: float) -> str:
    """Minutes as a Prometheus duration (``1h30m``)."""
    return duration(int(round(minutes * 60)))
