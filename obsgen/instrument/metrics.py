"""The contract's metrics as prometheus_client objects, built from ``obsgen.contract``.

Every metric obsgen.instrument emits (``EMITTERS``: the instrument's own, and the
collective volume it shares with the NCCL sidecar) is created with the contract's
name, help and labels, plus ``node`` (the host), which every series of a rank carries so
an alert can say where a straggler runs. Histograms get the contract's buckets
(prometheus_client's defaults unless the contract names others). Gauges get a multiprocess mode so the
same objects work when the ranks of a node share a multiprocess directory.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import contract
from ..contract import L

EMITTERS = (contract.INSTRUMENT, contract.NCCL_SIDECAR, contract.INSTRUMENT_RESTART)

# Multiprocess mode of gauges: the most recent value of live processes. Every series has
# a rank label, so values of different ranks never merge.
GAUGE_MODE = "livemostrecent"


def labelnames(metric: contract.Metric) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*metric.labels, L.node.key)))


@dataclass
class Metrics:
    """prometheus_client metric objects by contract key."""
    by_key: dict

    def __getitem__(self, metric: contract.Metric):
        return self.by_key[metric.key]


def build(registry) -> Metrics:
    import prometheus_client as pc

    out = {}
    for m in contract.METRICS.values():
        if m.emitter not in EMITTERS:
            continue
        kw = dict(name=m.key, documentation=f"{m.help} ({m.unit})", labelnames=labelnames(m),
                  registry=registry)
        if m.type == contract.HISTOGRAM:
            out[m.key] = pc.Histogram(buckets=m.buckets or contract.DEFAULT_BUCKETS, **kw)
        elif m.type == contract.COUNTER:
            out[m.key] = pc.Counter(**kw)
        else:
            out[m.key] = pc.Gauge(multiprocess_mode=GAUGE_MODE, **kw)
    return Metrics(out)
