"""Ground truth for the hardware cases, read from the scrapes as the fixtures encode them
(the same samples promtool sees), never from running the rules."""
from __future__ import annotations

import statistics

from obsgen.contract import L, M
from obsgen.synth import STALE

from ..support import SCRAPE, _fmt

MIN = 60


def scrapes(source, minutes: float) -> dict[float, dict]:
    """{time: {labels tuple: value}} of a Job or Fleet, values as encoded."""
    return {s.time: {k: float(_fmt(v)) for k, v in s.samples.items() if v != STALE}
            for s in source.run(until=minutes * MIN)}


def series(scr: dict, t: float, name: str, **match) -> list[tuple[dict, float]]:
    out = []
    for key, v in scr.get(t, {}).items():
        labels = dict(key)
        if labels["__name__"] == name and all(labels.get(k) == w for k, w in match.items()):
            out.append((labels, v))
    return out


def sm_stddev(scr: dict, minute: float, node: str, gpus: range) -> float:
    """Population standard deviation of SM-active of GPUs ``gpus`` of ``node``."""
    values = [v for l, v in series(scr, minute * MIN, M.DCGM_FI_PROF_SM_ACTIVE.key)
              if node in (l.get(L.Hostname.key), l.get(L.hostname.key)) and int(l[L.gpu.key]) in gpus]
    return statistics.pstdev(values)


def step_mean(scr: dict, t: float, job_id: str, window: float = 300) -> float | None:
    """job:train_step_seconds:mean5m at ``t``: sum over ranks of the rises of _sum over those
    of _count between the first and last sample in [t - window, t] (no counter resets)."""
    num = den = 0.0
    for suffix in ("_sum", "_count"):
        total = 0.0
        by_series: dict[tuple, list[float]] = {}
        for tt in sorted(x for x in scr if t - window <= x <= t):
            for labels, v in series(scr, tt, M.train_step_seconds.key + suffix,
                                    **{L.job_id.key: job_id}):
                by_series.setdefault(tuple(sorted(labels.items())), []).append(v)
        for vals in by_series.values():
            if len(vals) >= 2:
                total += vals[-1] - vals[0]
        num, den = (total, den) if suffix == "_sum" else (num, total)
    return num / den if den > 0 else None


def step_baseline(scr: dict, t: float, job_id: str, window: float = 6 * 3600) -> float:
    """Median of the recorded step mean over the evaluations in [t - window, t]."""
    values = [m for tt in sorted(scr) if t - window <= tt <= t
              if (m := step_mean(scr, tt, job_id)) is not None]
    return statistics.median(values)
