"""A Prometheus configuration for a simulator, its time constants scaled with ``speed``.

In a world that runs ``speed`` times faster, Prometheus must scrape and evaluate
``speed`` times more often and forget a vanished series ``speed`` times sooner
(``--query.lookback-delta``, a flag, see ``flags``), or the rules would see a different
job than the one they were written for.
"""
from __future__ import annotations

import yaml

from .. import timescale
from ..config import duration


def config(sd_url: str, speed: float, rule_files: list[str],
           alertmanagers: list[str] = (), scrape_job: str = "training",
           static_targets: dict[str, list[str]] | None = None) -> dict:
    """Prometheus config: the simulator's targets from http_sd (``sd_url``), or static
    targets by scrape job (``static_targets``), and optional Alertmanagers."""
    interval = duration(timescale.SCRAPE_INTERVAL / speed)
    scrape_configs = []
    if sd_url:
        scrape_configs.append({"job_name": scrape_job, "http_sd_configs": [
            {"url": sd_url, "refresh_interval": duration(max(timescale.SCRAPE_INTERVAL / speed, 1))}]})
    for job, targets in (static_targets or {}).items():
        scrape_configs.append({"job_name": job, "static_configs": [{"targets": list(targets)}]})
    doc = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": duration(timescale.EVALUATION_INTERVAL / speed)},
        "rule_files": list(rule_files),
        "scrape_configs": scrape_configs,
    }
    if alertmanagers:
        doc["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]}
    return doc


def flags(speed: float) -> list[str]:
    """Command-line flags that scale with the world."""
    return [f"--query.lookback-delta={duration(timescale.LOOKBACK_DELTA / speed)}"]


def dump(doc: dict) -> str:
    return ("# Prometheus config for `obsgen simulate` (written by --prometheus-config).\n"
            + yaml.safe_dump(doc, sort_keys=False))
