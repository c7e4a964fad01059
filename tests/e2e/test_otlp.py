"""The megatron-otel preset on the OpenTelemetry path, for real: Megatron-LM's training
instruments emitted by the OpenTelemetry Python SDK's OTLP/HTTP exporter
(tests/e2e/fixtures/megatron_otel.py) straight into VictoriaMetrics' OTLP receiver
(``/opentelemetry/v1/metrics`` with ``-opentelemetry.usePrometheusNaming``), and vmalert
evaluating the rules rendered with ``presets: [megatron-otel]``. Debian's Prometheus
3.5.3 is built without the OTLP receiver (Debian bug 1080354), so VictoriaMetrics
receives. Run in a world 20 times faster than the wall clock, as the parity test is
(tests/e2e/vm.py has why), on the newer line only: 1.79 has no OTLP receiver.

Two runs of four ranks each: one whose grad norm explodes, one whose grad norm turns NaN.
The SDK drops a non-finite gauge value ("Set amount nan is not finite ... ignoring
measurement"), so the NaN never leaves the process and the exported gauge keeps its last
finite value, which the second run pins down; Train_GradientNonFinite fires for it once
the frozen norm has outlasted windows.frozen_signal while the steps went on
(docs/guides/megatron.md says so, and what to run beside Megatron to see it sooner)."""
from __future__ import annotations

import math
import os
import sys
import time

import copy

import pytest

from obsgen import config, pipeline, scenarios, timescale

from . import harness, vm

pytestmark = pytest.mark.e2e
FACTOR = 20.0
MIN = 60 / FACTOR  # wall seconds of a model minute
EXPORT = timescale.SCRAPE_INTERVAL / FACTOR  # the SDK's export interval, as a 30 s scrape
LOG = EXPORT  # Megatron records once per --log-interval: 25 steps of 1.2 s, 30 s
# the NaN run's alert: the frozen window (15m), its for (1m) and evaluations after the fault
FAULT, END = 12 * MIN, 32 * MIN
RUNS = {"otel-explosion": "explode", "otel-nan": "nan"}
RANKS = 4
# What the live path adds to a scenario's bound, in wall seconds: a value reaches
# VictoriaMetrics up to an export after it is set, is searchable up to 4.5 s after it
# arrives (tests/e2e/vm.py) and answered for a second before now; the poll of vmalert's
# alerts, half a second.
LIVE = EXPORT + 4.5 + 1.0 + 0.5


@pytest.fixture(scope="module")
def otlp(procs, tmp_path_factory):
    if vm.missing() or not vm.has_flag("victoria-metrics", "opentelemetry.usePrometheusNaming"):
        message = "VictoriaMetrics with an OTLP receiver (1.145, `make e2e-tools`) missing"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("otlp")
    vm.render(tmp, FACTOR, {"presets": ["megatron-otel"], "megatron_log_interval": 25})
    flushers, sink = [], harness.Webhook()
    try:
        store = vm.start_victoria_metrics(procs, "otlp-victoria-metrics", tmp, FACTOR, flushers,
                                          "-opentelemetry.usePrometheusNaming")
        ruler = vm.start_vmalert(procs, "otlp-vmalert", tmp / "render" / "rules", FACTOR,
                                 store.url, sink.start())
        started = time.time()
        for run, fault in RUNS.items():
            procs.start(run, [sys.executable, str(harness.ROOT / "tests" / "e2e" / "fixtures" /
                                                  "megatron_otel.py"),
                              f"{store.url}/opentelemetry/v1/metrics", run, str(RANKS),
                              str(EXPORT), str(LOG), fault, str(FAULT), str(END)])
        fired: dict[str, set] = {run: set() for run in RUNS}
        signals: set[tuple] = set()
        first: dict[tuple, float] = {}  # (run, alert): wall time it was first seen firing
        while time.time() < started + END + 5 * MIN:
            for a in ruler.alerts():
                if a["state"] == "firing" and a["labels"].get("nemo_run_id") in fired:
                    fired[a["labels"]["nemo_run_id"]].add(a["labels"]["alertname"])
                    signals.add((a["labels"]["nemo_run_id"], a["labels"].get("signal")))
                    first.setdefault((a["labels"]["nemo_run_id"], a["labels"]["alertname"]),
                                     time.time())
            if (time.time() > started + END and "Train_GradientExplosion" in fired["otel-explosion"]
                    and "Train_GradientNonFinite" in fired["otel-nan"]):
                break
            time.sleep(0.5)
        yield {"store": store, "fired": fired, "signals": signals, "started": started,
               "first": first,
               "log": lambda: "\n".join(procs.log(n) for n in (*RUNS, "otlp-vmalert"))}
    finally:
        for f in flushers:
            f.stop()
        sink.stop()
        for name in (*RUNS, "otlp-vmalert", "otlp-victoria-metrics"):
            procs.stop(name)


def test_megatrons_instruments_land_under_the_names_and_labels_the_preset_reads(otlp):
    """megatron.training.step_duration_ms (unit ms) as ..._ms_milliseconds_{bucket,sum,
    count}, the gauges bare, and the resource attributes nemo.run.id and dl.rank as the
    labels nemo_run_id and dl_rank, on every rank."""
    for name in ("megatron_training_step_duration_ms_milliseconds_count",
                 "megatron_training_step_duration_ms_milliseconds_sum",
                 "megatron_training_loss", "megatron_training_grad_norm"):
        got = otlp["store"].query(f'count by (nemo_run_id) (count by (nemo_run_id, dl_rank) '
                                  f'({name}))')
        assert {s["metric"]["nemo_run_id"]: s["value"][1] for s in got} == {
            run: str(RANKS) for run in RUNS}, (name, otlp["log"]())


def test_an_exploding_grad_norm_fires_on_the_otlp_path_and_nothing_else_does(otlp):
    assert otlp["fired"]["otel-explosion"] == {"Train_GradientExplosion"}, otlp["log"]()


def test_a_nan_grad_norm_never_leaves_the_sdk_and_its_frozen_gauge_fires_non_finite(otlp):
    """After the fault the NaN run exports, at every export, the value it had before it;
    a frozen grad norm while the steps go on fires Train_GradientNonFinite, and only it."""
    store, fault = otlp["store"], otlp["started"] + FAULT
    end = otlp["started"] + END
    series = store.query_range_raw('megatron_training_grad_norm{nemo_run_id="otel-nan"}',
                                   fault - 2 * LOG, end, EXPORT)["data"]["result"]
    assert len(series) == RANKS
    for s in series:
        # the emitter's clock starts once it has imported the SDK: a few seconds late
        before = [float(v) for t, v in s["values"] if float(t) < fault]
        after = [float(v) for t, v in s["values"] if float(t) > fault + 2 * EXPORT + 5]
        assert len(set(before)) > 1 and after, s  # a healthy grad norm moves
        assert len(set(after)) == 1 and math.isfinite(after[0]), s  # frozen, and no NaN
    assert otlp["fired"]["otel-nan"] == {"Train_GradientNonFinite"}, otlp["log"]()
    assert ("otel-nan", "grad_norm") in otlp["signals"] and ("otel-nan", "loss") not in otlp["signals"]


def _bounds(log_interval: int) -> dict[str, float]:
    """{alert: model minutes} the preset's rendered scenarios state for these faults, for
    the config of model time the e2e profile is scaled from."""
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(model time)")
    cfg.data.update({"presets": ["megatron-otel"], "megatron_log_interval": log_interval})
    gradients = scenarios.stated(pipeline.families(cfg), cfg)["gradients"]
    out = {}
    for item in gradients:
        for e in getattr(item, "expects", ()):
            if "spiking" in item.sentence and e.alert == "Train_GradientExplosion":
                out["otel-explosion"] = e.within
            if "SDK drops" in item.sentence and e.alert == "Train_GradientNonFinite":
                out["otel-nan"] = e.within
    return out


def _onset(store, run: str, start: float, end: float) -> float:
    """When the fault reached the store, from the exported grad norm: the first sample of
    the spike, or the first of the value the SDK serves again after the NaN (the last
    finite log, at or before the NaN), less an export."""
    (s,) = store.query_range_raw(f'max(megatron_training_grad_norm{{nemo_run_id="{run}"}})',
                                 start, end, EXPORT)["data"]["result"]
    values = [(float(t), float(v)) for t, v in s["values"]]
    if run == "otel-explosion":
        return next(t for t, v in values if v > 10) - EXPORT
    last = values[-1][1]
    frozen = len(values) - next(i for i, (_, v) in enumerate(reversed(values)) if v != last)
    return values[frozen][0] - EXPORT


def test_the_alerts_fire_within_the_bounds_the_presets_rendered_scenarios_state(otlp):
    """Train_GradientExplosion and the frozen-gauge Train_GradientNonFinite fire on the
    OTLP path within what `obsgen render` states for this config (docs/scenarios.md) and
    what the live path adds (LIVE): the same rules, the SDK's real output."""
    bounds = _bounds(25)
    assert set(bounds) == set(RUNS), bounds
    alert = {"otel-explosion": "Train_GradientExplosion", "otel-nan": "Train_GradientNonFinite"}
    for run in RUNS:
        onset = _onset(otlp["store"], run, otlp["started"], otlp["started"] + END)
        first = otlp["first"][(run, alert[run])]
        late = (first - onset) * FACTOR / 60
        # a stall of the machine stops the emitters, the store and vmalert alike
        live = (LIVE + harness.STALLS.within(onset, first)) * FACTOR / 60
        print(f"{run}: {alert[run]} {late:.1f} model min after the fault; the scenario "
              f"states {bounds[run]:.1f}, the live path adds up to {live:.1f} (the machine's "
              f"stalls included)")
        assert 0 < late <= bounds[run] + live, (run, late, bounds[run], live)
