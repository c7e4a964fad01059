"""The definitions families produce: recording rules, alerts, and the family itself."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace

SEVERITIES = ("critical", "warning", "info")
ROLES = ("platform", "workload")


def expr(text: str) -> str:
    """Normalise an expression written as an indented triple-quoted string."""
    return textwrap.dedent(text).strip("\n").rstrip()


@dataclass(frozen=True)
class Record:
    name: str  # rendered name (contract.RECORDED, windows filled in)
    expr: str
    # A fact of the job's shape or placement (changes only when the job starts): recorded
    # in the family's facts group, evaluated every facts_interval (obsgen.render).
    fact: bool = False
    # A group of the family's own for records that read no other record of it, so the
    # ruler evaluates them side by side (groups run concurrently, a group's rules one after
    # another): ``obsgen-<family>-<group>``, at the family's interval.
    group: str = ""


@dataclass(frozen=True)
class Inhibit:
    """Alerts (family names or alert keys) a firing alert suppresses in Alertmanager, for
    the same job and the same values of ``same`` (contract label keys, e.g. rank)."""
    targets: tuple[str, ...]
    same: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    role: str  # which team the alert routes to: platform or workload
    summary: str
    description: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    # ``for`` must stay below this share of a window the condition depends on, e.g.
    # ("memory", 0.5): otherwise the evidence is gone before the alert can fire.
    for_within: tuple[str, float] | None = None
    key: str = ""  # the name in the definitions, which config overrides refer to
    # what this one suppresses in Alertmanager for the same job: family names or alert
    # keys (for the same job), or Inhibit (also for the same values of other labels)
    inhibits: tuple["str | Inhibit", ...] = ()

    def __post_init__(self):
        if not self.key:
            object.__setattr__(self, "key", self.name)

    def with_(self, **changes) -> "Alert":
        return replace(self, **changes)


@dataclass(frozen=True)
class Family:
    name: str
    doc: str
    rules: tuple[Record | Alert, ...]
    requires: tuple[str, ...] = ()  # families whose recorded series this one reads
    # True when a missing series means "something died": such rules must not be
    # evaluated on partial data (Thanos partial_response_strategy: abort).
    liveness: bool = False

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(r for r in self.rules if isinstance(r, Record))

    @property
    def alerts(self) -> tuple[Alert, ...]:
        return tuple(r for r in self.rules if isinstance(r, Alert))
