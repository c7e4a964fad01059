"""Megatron-LM's training metrics as a Prometheus scrape of the OTel collector shows them,
emulated from the code that writes them (not from obsgen's idea of them):

* megatron/training/training.py (main, d98e8a6) calls record_training_metrics at the first
  iteration and whenever ``iteration % log_interval == 0``, with
  ``step_duration_ms = elapsed_time_per_iteration * 1000``: the mean of the iterations
  since the last log. So the step histogram gets one observation per log interval, and
  the grad-norm and loss gauges change at the same moments.
* megatron/core/telemetry/training_metrics.py: a histogram
  ``megatron.training.step_duration_ms`` (unit ms) and gauges
  ``megatron.training.grad_norm`` and ``megatron.training.loss``; the OTel SDK's default
  explicit bucket bounds (ms).
* NeMo Lens v0.2.0 providers.py: resource attributes ``service.name``, ``dl.rank``,
  ``dl.world_size``, ``nemo.run.id`` and ``service.instance.id`` = ``<run>-rank<r>``;
  with the all_ranks export strategy every rank exports.
* The collector's prometheus exporter (cumulative temporality, add_metric_suffixes,
  resource_to_telemetry_conversion): dots become underscores, the unit becomes a
  ``_milliseconds`` suffix, every resource attribute a label; its own ``job`` and
  ``instance`` (from service.name and service.instance.id) arrive as ``exported_job`` and
  ``exported_instance`` behind a scrape without honor_labels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from obsgen.synth import STALE

STEP = "megatron_training_step_duration_ms_milliseconds"
GRAD, LOSS = "megatron_training_grad_norm", "megatron_training_loss"
OTEL_BOUNDS = (0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)


@dataclass(frozen=True)
class MegatronJob:
    run_id: str = "run-7"
    ranks: int = 4
    step_seconds: float = 1.5
    log_interval: int = 100
    start: float = 15.0  # seconds after the first scrape the first iteration ends
    dies: tuple[int, float] | None = None  # (rank, seconds): its process ends then
    # seconds: from then on the signal ("grad_norm" or "loss") is NaN, which the OTel SDK
    # drops ("Set amount nan is not finite ... ignoring measurement"): its gauge keeps
    # exporting the last finite value
    nan_at: tuple[str, float] | None = None
    stops_at: float | None = None  # seconds: no iteration ends after it (a hang); still served

    def labels(self, rank: int) -> dict[str, str]:
        return {"job": "otel-collector", "instance": "otel-collector:8889",
                "exported_job": "megatron-lm", "exported_instance": f"{self.run_id}-rank{rank}",
                "service_name": "megatron-lm", "service_version": "0.2.0",
                "service_instance_id": f"{self.run_id}-rank{rank}",
                "nemo_run_id": self.run_id, "dl_rank": str(rank),
                "dl_world_size": str(self.ranks), "otel_scope_name": "megatron-lm"}

    def logged(self, t: float) -> list[tuple[int, float]]:
        """(iteration, step_duration_ms) of every record_training_metrics call by ``t``."""
        t = min(t, self.stops_at) if self.stops_at is not None else t
        done = math.floor((t - self.start) / self.step_seconds) + 1 if t >= self.start else 0
        # every step takes step_seconds, so the interval's mean is that
        return [(it, self.step_seconds * 1000.0) for it in range(1, done + 1)
                if it == 1 or it % self.log_interval == 0]

    def gauge(self, signal: str, logged: list[tuple[int, float]]) -> float:
        """The value the gauge exports after these logs: the grad norm and the loss of the
        last logged iteration (they move at every log), or of the last before nan_at."""
        its = [it for it, _ in logged]
        if self.nan_at and self.nan_at[0] == signal:
            finite = [it for it in its if self.start + (it - 1) * self.step_seconds < self.nan_at[1]]
            its = finite or its[:1]
        it = its[-1]
        if signal == "grad_norm":
            return 1.0 + 0.05 * math.sin(it)
        return 2.5 + 4.0 * 0.999 ** it

    def series(self, minutes: float, scrape: float = 30.0) -> dict[str, list]:
        """{series in promtool notation: values per scrape}; None before the first record
        (the SDK exports an instrument once it recorded), STALE after its rank died."""
        out: dict[str, list] = {}
        times = [i * scrape for i in range(int(minutes * 60 / scrape) + 1)]
        for r in range(self.ranks):
            lab = self.labels(r)

            def name(metric: str, **extra: str) -> str:
                body = ", ".join(f'{k}="{v}"' for k, v in {**lab, **extra}.items())
                return f"{metric}{{{body}}}"

            for t in times:
                alive = self.dies is None or self.dies[0] != r or t < self.dies[1]
                logs = self.logged(t)
                obs = [ms for _, ms in logs] if alive else None

                def value(v):
                    return STALE if obs is None else (v() if obs else None)

                rows = {name(STEP + "_count"): value(lambda: float(len(obs))),
                        name(STEP + "_sum"): value(lambda: float(sum(obs))),
                        name(GRAD): value(lambda: self.gauge("grad_norm", logs)),
                        name(LOSS): value(lambda: self.gauge("loss", logs))}
                for le in OTEL_BOUNDS + (math.inf,):
                    key = name(STEP + "_bucket", le="+Inf" if le == math.inf else str(le))
                    rows[key] = value(lambda: float(sum(1 for ms in obs if ms <= le)))
                for key, v in rows.items():
                    out.setdefault(key, []).append(v)
        return out
