"""Scrapes of synthetic jobs (obsgen.synth) as promtool's input series.

A scenario's input is every series its family reads, with scrape labels, all default
histogram buckets, noise, restarts and staleness markers, encoded in promtool's series
notation. ``Names`` puts them under a config's metric and label names and adds its
selector labels, so the series are the ones the config's rules select.
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import re
from typing import Iterable

from .. import contract, synth
from ..config import Config

SCRAPE = 30  # seconds, the scrape and evaluation interval of every scenario


@functools.lru_cache(maxsize=65536)  # runs repeat values; NaN never hits, which is fine
def fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    if 0 < abs(v) < 0.01:  # four significant digits: a tiny norm's noise is not rounded away
        return f"{v:.4g}"
    s = f"{v:.4f}".rstrip("0").rstrip(".")
    return s if s not in ("-0", "") else "0"


def exact(v: float) -> bool:
    return not math.isnan(v) and not math.isinf(v) and float(v).is_integer()


def encode(values: list) -> str:
    """promtool series notation. Runs of equal values, and runs of integers with an even
    integer step, are folded: promtool expands ``a+bxN`` by float arithmetic, and a
    non-integer run could end a hair above the next value, which a counter would read as
    a reset."""
    vals = [float(fmt(v)) if isinstance(v, float) else v for v in values]
    toks, i = [], 0
    while i < len(vals):
        v = vals[i]
        if v is None:
            j = i
            while j < len(vals) and vals[j] is None:
                j += 1
            toks.append("_" if j - i == 1 else f"_x{j - i}")
            i = j
            continue
        if v == synth.STALE:
            toks.append("stale")
            i += 1
            continue
        j = i
        if isinstance(v, float) and not math.isnan(v) and i + 1 < len(vals) and isinstance(vals[i + 1], float):
            step = vals[i + 1] - v
            if step == 0 or (exact(v) and exact(step)):
                while (j + 1 < len(vals) and isinstance(vals[j + 1], float)
                       and vals[j + 1] - vals[j] == step):
                    j += 1
        if j - i >= 2:
            step = vals[i + 1] - v
            toks.append(f"{fmt(v)}x{j - i}" if step == 0 else
                        f"{fmt(v)}{'+' if step > 0 else '-'}{fmt(abs(step))}x{j - i}")
            i = j + 1
            continue
        toks.append(fmt(v))
        i += 1
    return " ".join(toks)


def series_name(key: tuple) -> str:
    labels = dict(key)
    name = labels.pop("__name__")
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def input_series(jobs: list, minutes_: float, reads: Iterable[str],
                 names: "Names | None" = None) -> list[dict]:
    """Scrapes of every job (obsgen.synth Jobs or obsgen.synth_hw Fleets), restricted to
    series whose (contract) name is in ``reads``, under ``names``' metric and label names
    when given."""
    reads = frozenset(reads)
    memo = repr((jobs, minutes_, sorted(reads), names and names.fingerprint()))
    if memo not in _ENCODED:
        companions = names.companions(reads) if names is not None else frozenset()
        table = _scrapes(jobs, minutes_, reads | companions)
        if names is not None:
            table = names.published(table)
            table = {names.key(k): v for k, v in table.items()
                     if dict(k)["__name__"] in reads}
        if len(_ENCODED) > 256:
            _ENCODED.clear()
        _ENCODED[memo] = [{"series": series_name(k), "values": encode(v)}
                          for k, v in sorted(table.items())]
    return [dict(d) for d in _ENCODED[memo]]


_ENCODED: dict[str, list] = {}


_MEMO: dict[str, dict] = {}  # simulations are deterministic: one per process and input


def _scrapes(jobs: list, minutes_: float, reads: frozenset) -> dict[tuple, list]:
    memo = repr((jobs, minutes_, sorted(reads)))
    if memo in _MEMO:
        return _MEMO[memo]
    if not any(r.endswith("_bucket") for r in reads):
        jobs = [_without_buckets(j) for j in jobs]
    ticks = int(minutes_ * 60 // SCRAPE) + 1
    table: dict[tuple, list] = {}
    kept: dict[tuple, bool] = {}  # series key -> whether its name is read
    for job in jobs:
        for scrape in job.run(until=(ticks - 1) * SCRAPE):
            i = int(round(scrape.time / SCRAPE))
            for key, value in scrape.samples.items():
                keep = kept.get(key)
                if keep is None:
                    keep = kept[key] = dict(key)["__name__"] in reads
                if keep:
                    table.setdefault(key, [None] * ticks)[i] = value
    if len(_MEMO) > 256:
        _MEMO.clear()
    _MEMO[memo] = table
    return table


def _without_buckets(source):
    """A Job, or a Fleet of Jobs (obsgen.synth_hw), that publishes no _bucket series."""
    if isinstance(source, synth.Job):
        return dataclasses.replace(source, buckets=False)
    if hasattr(source, "jobs"):
        return dataclasses.replace(source, jobs=[_without_buckets(j) for j in source.jobs])
    return source


def minutes(m: float) -> str:
    """A duration in minutes as promtool reads it (``4m30s``)."""
    s = int(round(m * 60))
    return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"




class Unstatable(ValueError):
    """The series cannot be put under the config's names (said, with the reason)."""


class Names:
    """The contract's names as a config has them: metric renames (a histogram's _bucket,
    _sum and _count with it), label renames, and a value for each label of the extra
    selector, added to every series so that the config's rules select them."""

    def __init__(self, cfg: Config):
        self.metrics: dict[str, str] = {}
        for m in contract.METRICS.values():
            to = cfg.metric(m.key)
            suffixes = ("_bucket", "_sum", "_count") if m.type == contract.HISTOGRAM else ("",)
            self.metrics.update({m.key + s: to + s for s in suffixes})
        self.labels = {lab.key: cfg.label(lab.key) for lab in contract.LABELS.values()}
        # histograms a preset publishes in another unit or once per several steps
        self.units = {m.key: (cfg.scale(m.key), cfg.steps_per_observation(m.key))
                      for m in contract.METRICS.values() if m.type == contract.HISTOGRAM
                      and (cfg.scale(m.key), cfg.steps_per_observation(m.key)) != (1, 1)}
        self.extra = {k: selector_value(k, v) for k, v in cfg["selector"].items()}
        self.extra = {k: v for k, v in self.extra.items() if v is not None}

    def fingerprint(self) -> tuple:
        return (sorted(self.metrics.items()), sorted(self.labels.items()), sorted(self.extra.items()),
                sorted(self.units.items()))

    def companions(self, reads: frozenset) -> frozenset:
        """What publishing ``reads`` takes beside them: a histogram's ``_count`` where its
        ``_sum`` is read (the completed intervals are counted from it)."""
        return frozenset(m + "_count" for m in self.units if m + "_sum" in reads) - reads

    def published(self, table: dict[tuple, list]) -> dict[tuple, list]:
        """Per-step histograms as their source publishes them: the sums in its unit (a
        factor ``scale`` to the contract's), and with a cadence of ``n`` steps one
        observation per ``n`` steps, valued at the mean of those steps (Megatron's
        --log-interval): a scrape sees the observations of the intervals completed by then.
        Buckets are not published by such sources; none is read. A sum is published from
        its count: the table holds both (``companions``)."""
        if not self.units:
            return table
        out = dict(table)
        for key, values in table.items():
            labels = dict(key)
            name = labels["__name__"]
            base = next((m for m in self.units if name in (m + "_sum", m + "_count")), None)
            if base is None or not name.endswith("_count"):
                continue
            scale, n = self.units[base]
            sum_key = tuple(sorted({**labels, "__name__": base + "_sum"}.items()))
            sums = table.get(sum_key)
            counts, totals = [], []
            knots = [(0.0, 0.0)]  # (steps, seconds) at each scrape of this process
            for i, c in enumerate(values):
                t = sums[i] if sums is not None else None
                if not _sample(c):
                    counts.append(c)
                    totals.append(t)
                    continue
                if c < knots[-1][0]:  # a new process: its counters start from zero
                    knots = [(0.0, 0.0)]
                done = (c // n) * n  # steps of the intervals completed by this scrape
                counts.append(done / n)
                if _sample(t):
                    knots.append((c, t))
                    # each interval observed once, at its mean: the seconds at its last step
                    totals.append(_seconds_at(knots, done) / n / scale)
                else:
                    totals.append(t)
            out[key] = counts
            if sums is not None:
                out[sum_key] = totals
        return out

    def metric(self, name: str) -> str:
        return self.metrics.get(name, name)

    def label(self, key: str) -> str:
        return self.labels.get(key, key)

    def key(self, key: tuple) -> tuple:
        """A series key (sorted (label, value) pairs, ``__name__`` among them) renamed."""
        out = {("__name__" if k == "__name__" else self.label(k)):
               (self.metric(v) if k == "__name__" else v) for k, v in key}
        out.update(self.extra)
        return tuple(sorted(out.items()))

    def labelset(self, labels: dict[str, str]) -> dict[str, str]:
        return {self.label(k): v for k, v in labels.items()}


def _seconds_at(knots: list[tuple[float, float]], step: float) -> float:
    """The seconds a process had trained at ``step``, from its (steps, seconds) at each
    scrape: the steps between two scrapes take equal time."""
    i = bisect.bisect_left(knots, (step, -math.inf))
    if i == len(knots):
        return knots[-1][1]
    (c1, t1), (c0, t0) = knots[i], knots[max(i - 1, 0)]
    return t1 if c1 == step or c1 == c0 else t0 + (t1 - t0) * (step - c0) / (c1 - c0)


def _sample(v) -> bool:
    return isinstance(v, (int, float)) and v is not synth.STALE and v == v


def selector_value(label: str, matcher) -> str | None:
    """A value of ``label`` that the selector's matcher accepts (None: the label left off,
    which ``!=`` and ``!~`` of a non-empty pattern accept)."""
    op, val = ("=", matcher) if isinstance(matcher, str) else next(iter(matcher.items()))
    if op == "=":
        return val
    if op == "!=":
        return None if val != "" else "obsgen-scenario"
    try:
        pattern = re.compile(val)
    except re.error as err:
        raise Unstatable(f"selector {label}: {op}{val!r} is not a regex Python reads ({err})")
    if op == "!~":
        if not pattern.fullmatch(""):
            return None
        for candidate in ("obsgen-scenario", "x", "0"):
            if not pattern.fullmatch(candidate):
                return candidate
        raise Unstatable(f"selector {label}: !~{val!r} excludes every value tried")
    # =~: the pattern itself, its alternatives, or the anchors taken off
    bare = re.sub(r"^\(\?[a-z]+\)", "", val)  # inline flags, e.g. (?i)
    for candidate in (val, *val.split("|"), bare, bare.strip("^$"), *bare.strip("^$()").split("|")):
        if pattern.fullmatch(candidate):
            return candidate
    raise Unstatable(f"selector {label}: no literal value found that =~{val!r} matches; "
                     "give the selector as a plain value to have the scenarios stated")
