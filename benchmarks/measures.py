"""What the scale benchmark's results say, as numbers: the suites and groups of a size,
a group's ruler time per 30 s, panel lookups, the targets, and how numbers are written.
Shared by the report's tables (benchmarks.report) and its prose (benchmarks.findings)."""
from __future__ import annotations

import math

GROUP_TARGET_MS = 1000  # every rule group, at the largest size
SUITE_TARGET_MS = 3000  # all groups together: 10% of a 30 s evaluation interval
# The naive suite is the same rules in every run, so its time measures the machine. The
# run on which the time budgets were first met (results.json of commit ef5e5cf) measured it
# at these ms per 30 s; a run on a slower machine reads its groups against the budgets
# divided by its ratio to them.
REFERENCE_NAIVE_MS = {1024: 253.0, 4096: 1056.0, 16384: 4733.0}
PANEL_TARGET_MS = 2000  # every panel over 1 h
STRAGGLER_TARGET = 5.0  # naive straggler rule / obsgen straggler family


def naive_families() -> set[str]:
    from . import naive

    return set(naive.FAMILY.values())


def sizes(results: dict) -> list[dict]:
    return [results["sizes"][k] for k in sorted(results["sizes"], key=int)]


def suite(size: dict, name: str) -> dict:
    return {g: v for g, v in size["groups"].items() if v["suite"] == name}


def family(group: str) -> str:
    """The family of a group: obsgen-gpus and obsgen-gpus-facts are both gpus, and
    obsgen-panels-tp (a group of the family's own) is panels."""
    return group.split("-")[1]


EVALUATION = 30  # s: the rule interval; facts groups and family_intervals' groups are slower


def per_evaluation(v: dict) -> float:
    """A group's ruler time per 30 s evaluation interval: its evaluation time, scaled by
    how often it is evaluated (a group every 2m costs a quarter of its time, every 1m half)."""
    return v["ms"] * EVALUATION / v.get("interval", EVALUATION)


def total_ms(size: dict, name: str) -> float:
    """What the suite's groups cost the ruler per 30 s (see per_evaluation)."""
    return sum(per_evaluation(v) for v in suite(size, name).values())


def machine_factor(size: dict) -> float | None:
    """This run's naive suite over the reference run's at the same size (2: twice as slow)."""
    ref = REFERENCE_NAIVE_MS.get(size["ranks"])
    return total_ms(size, "naive") / ref if ref else None


def straggler_ratio(size: dict, name: str = "obsgen") -> float | None:
    """The naive straggler rule's time over the straggler family's, per 30 s: its main
    group and its facts group (the mesh, every facts_interval) in proportion; of the
    ``before:`` groups with name "before" (None where they hold no straggler group)."""
    ours = sum(per_evaluation(v) for g, v in suite(size, name).items()
               if family(g.removeprefix("before:")) == "stragglers")
    return size["groups"]["naive-stragglers"]["ms"] / ours if ours else None


def once_ms(size: dict, name: str) -> float:
    """Every group of the suite evaluated once, whatever its interval."""
    return sum(v["ms"] for v in suite(size, name).values())


def panels_of(size: dict, name: str = "obsgen") -> dict:
    return size["panels"].get(name, {})


RECORDS = "records"  # dashboards.records: the panels family's group and the panels reading it


def with_records(size: dict) -> dict:
    """Every panel as dashboards.records renders it: the records board's panels in place of
    the default ones of the same name."""
    return {**panels_of(size), **panels_of(size, RECORDS)}


def slowest_panel(size: dict, name: str = "obsgen") -> tuple[str, dict]:
    return max(panels_of(size, name).items(), key=lambda kv: kv[1]["ms"])


def errors(results: dict) -> list[str]:
    out = []
    for size in sizes(results):
        for g, v in size["groups"].items():
            out += [f"{size['ranks']} ranks, {g}: {e}" for e in v["errors"]]
        for s, ps in size["panels"].items():
            for p, v in ps.items():
                out += [f"{size['ranks']} ranks, {s} panel {p}: {e}" for e in v["errors"]]
    return out


def timed_rounds(size: dict) -> str:
    # sizes measured before the rounds were recorded ran the default: 2 and 2
    r = size["built"].get("rounds", {"rules": 2, "panels": 2})
    return f"{r['rules']}, {r['panels']}"


def fmt_ms(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.2f}"


def fmt_mib(b: int) -> str:
    return f"{b / 2**20:,.0f}"


def growth_exponent(a: float, b: float, na: int, nb: int) -> str:
    """Exponent k of cost ~ N^k between two sizes (1 = linear)."""
    if not a or not b or a <= 0 or b <= 0 or na == nb:
        return "-"
    return f"{math.log(b / a) / math.log(nb / na):.2f}"


def per_series_us(size: dict) -> float | None:
    """µs per series of a plain selector and max: `max by (job_id) (train_world_size)`."""
    ms = next((g["rules"]["job:train_world_size:max"] for g in size["groups"].values()
               if g["suite"] == "obsgen" and "job:train_world_size:max" in g["rules"]), None)
    return 1000 * ms / size["ranks"] if ms else None
