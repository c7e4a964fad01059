"""``obsgen simulate``: synthetic training jobs with injected faults, served as /metrics.

``scenarios`` names the faults, ``server`` drives ``obsgen.synth`` in (scaled) real time
and serves every rank's metrics, ``prometheus`` writes a matching Prometheus config.
"""
