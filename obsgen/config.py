"""Every tunable of obsgen, with its default and one comment.

A config file (``obsgen.yaml`` by default, optional) is merged over these defaults and
validated against ``config.schema.json``; every problem is reported as one line
``<file>: <path>: <reason>``. Per-alert settings (``for``, severity, team) default to
what the alert's family module declares and are overridden under ``alerts:``.
"""
from __future__ import annotations

import copy
import json
import re
from fractions import Fraction
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from . import contract, userfile

DEFAULTS: dict[str, Any] = {
    # Name presets of real exporters, applied in order (obsgen.presets): default, megatron-otel,
    # dcgm, nccl-inspector (which also renders the inspector family and its panels).
    # megatron-otel alone feeds the gradient alerts and the step-time regression only:
    # no straggler, pipeline, rank or checkpoint alert without obsgen.instrument beside it.
    "presets": ["default"],
    # Renames, contract key -> metric name in your Prometheus (e.g. after a relabel).
    "metrics": {},
    # Renames, contract label key -> label name in your Prometheus.
    "labels": {},
    # Megatron's --log-interval (its default is 100) with presets: [megatron-otel]: it records
    # its step-time histogram once per interval, the interval's mean; required with that preset.
    "megatron_log_interval": None,
    # Kubernetes pod label that holds the job id (e.g. training.kubeflow.org/job-name), read
    # on kube-state-metrics' kube_pod_labels under the name it publishes (jobName -> label_job_name).
    "pod_job_label": "job_id",
    # Extra matchers put on every selector, label -> value (e.g. cluster: a); a value
    # given as {"=~": "a|b"} is a regex. These labels are also kept on recorded series.
    "selector": {},
    "thresholds": {
        # A rank straggles while its busy time is this many times the median of the rest of its stage.
        "straggler_ratio": 1.07,
        # Distinct ranks, not held, that must have straggled within windows.straggler_recurrence for Train_Straggler_Transient.
        "straggler_transient_ranks": 2,
        # Share of a stage's TP (CP, EP) groups whose rank at one position straggles that is a mesh pattern.
        "straggler_pattern_share": 0.5,
        # Share of step time a rank's straggling costs over windows.straggler_recurrence that pages it as recurring (a steady GPU this much slower costs as much).
        "straggler_recurrence_cost": 0.1,
        # A recurring rank's cost must be this many times the next rank's of its stage: a cost shared by several ranks moves.
        "straggler_recurrence_dominance": 2,
        # Share of step time the job lost over windows.straggler_recurrence to stragglers that moved between ranks that pages Train_Straggler_Transient.
        "straggler_transient_cost": 0.15,
        # Gradient norm above this many times its baseline is an explosion.
        "grad_explosion_factor": 10,
        # Gradient norm below this share of its long baseline is vanishing.
        "grad_vanishing_fraction": 0.01,
        # Step-histogram observations (log intervals) a source that records once per log
        # interval (presets with a cadence: megatron-otel) takes within windows.frozen_signal
        # while its grad norm or loss never changes: a NaN its SDK dropped.
        "frozen_observations": 3,
        # Observed bubble above this many times the theoretical (p-1)/(m+p-1) is excess.
        "bubble_excess_factor": 1.5,
        # A training job whose last checkpoint is older than this has stopped checkpointing.
        "checkpoint_max_age": "30m",
        # Checkpoint seconds per training second above this share is too much overhead.
        "checkpoint_overhead_ratio": 0.05,
        # Standard deviation of SM-active across the job's GPUs of one host above which TP is imbalanced.
        "tp_sm_active_stddev": 0.05,
        # XID codes that mean uncorrectable GPU memory errors (48 DBE, 64 row-remap failure, 94/95 contained/uncontained ECC).
        "gpu_ecc_xids": [48, 64, 94, 95],
        # NCCL link recoveries of one job within windows.link_recovery that mean its fabric degrades.
        "nccl_link_recoveries": 2,
        # A host of the job sending less than this share of the job's median InfiniBand rate during all-reduce is asymmetric.
        "ib_asymmetry_ratio": 0.7,
        # Mean step time above this many times the job's own baseline is a regression.
        "step_regression_ratio": 1.2,
        # Restarts within windows.restart_loop, with no checkpoint completed, that make a restart loop.
        "restart_loop_restarts": 3,
        # Checkpoint write throughput (bytes per second spent writing) below which storage is slow.
        "checkpoint_write_bytes_per_second": 1.0e9,
        # A rank last to arrive in more than this share of its group's aligned collectives is late.
        "late_arrival_fraction": 0.9,
        # Aligned collectives a rank needs in the late-arrival window before it is judged.
        "late_arrival_min_collectives": 20,
    },
    "windows": {
        # Rate window for per-rank means; at least 4 scrape intervals.
        "rate": "5m",
        # Rate window of the per-rank busy means the straggler rules judge (and the dashboards' straggler score); at least 2 scrape intervals.
        "straggler": "1m",
        # A slowdown shorter than this never pages on its own: a rank pages once it straggled without a break for this plus windows.straggler.
        "straggler_spell": "3m",
        # Ranks of a stage are not judged for this long after it starts or comes back from a restart (warm-up, compilation).
        "straggler_warmup": "5m",
        # Window over which a rank's recurring straggling, and the job's straggling that moves between ranks, are costed.
        "straggler_recurrence": "30m",
        # A straggler alert stays firing this long after its condition last held: one alert through a recurring fault's quiet spells and a restart.
        "straggler_hold": "12m",
        # Averaging window of the gradient-explosion baseline.
        "grad_baseline": "1h",
        # Averaging window of the vanishing-gradient baseline.
        "grad_long_baseline": "6h",
        # Window in which a grad norm or loss recorded once per log interval counts as
        # frozen (see thresholds.frozen_observations); a longer log interval is not judged.
        "frozen_signal": "15m",
        # A rank that completed no step in this window is not making progress (> 2 steps).
        "progress": "2m",
        # How long a job's world size and progress are remembered after its ranks vanish.
        "memory": "1h",
        # A job with no process left that has stepped (all gone, or new ones loading after a restart) fails after this long without every rank progressing.
        "restart_gap": "15m",
        # Window over which checkpoint overhead is averaged.
        "checkpoint_overhead": "1h",
        # How long an uncorrectable ECC error or ECC XID keeps Train_GPU_ECC firing.
        "gpu_errors": "1h",
        # Window in which NCCL link recoveries of a job are counted.
        "link_recovery": "1h",
        # Window of the step-time baseline (median of the job's mean step time).
        "step_baseline": "6h",
        # Step-time and ETA alerts stay quiet this long after a job starts or restarts (warm-up).
        "restart_quiet": "30m",
        # Window in which restarts without a new checkpoint make a restart loop.
        "restart_loop": "1h",
        # Window over which checkpoint write throughput is measured (must hold a checkpoint).
        "checkpoint_throughput": "1h",
        # Window in which a rank that arrives last in most collectives of a group is late (judged without a break, as busy time is).
        "late_arrival": "1m",
        # Window the NCCL Inspector's textfile is read over (nccl-inspector preset): its
        # newest dump, at least 30 s apart, bridging a scrape that met a half-written file.
        "inspector": "2m",
    },
    # Team label value for each role; alerts route by role (platform: hardware, placement,
    # storage; workload: data, model, code).
    "teams": {"platform": "platform", "workload": "workload"},
    # Per-alert overrides: {Alert_Name: {for: 10m, severity: critical, team: platform, name: X}}.
    "alerts": {},
    # Labels added to every alert (e.g. env: prod).
    "common_labels": {},
    # runbook_url of every alert, when your runbooks live elsewhere ({alert}: the alert
    # name); null derives it from links.base_url.
    "runbook_url": None,
    # Where your rendered files are served, for the links alerts and dashboards carry.
    "links": {
        # URL under which your git host (or docs site) serves the files rendered into --out,
        # e.g. a repository's blob view at main: runbook_url is this + <docs.path>/runbooks/<alert>.md,
        # and the overview's firing alerts link their runbooks. null: the alerts carry the
        # runbook's path and first checks as text (runbook annotation).
        "base_url": None,
        # Your Grafana's root URL: each alert carries a dashboard_url with its job (and rank)
        # filled in. null: no dashboard_url.
        "grafana_url": None,
    },
    # The reference docs and runbooks (alerts.md, metrics.md, config.md, runbooks/, ...).
    "docs": {
        # Render them (false: rules, dashboards and tests only).
        "enabled": True,
        # Folder under the output root they are written to.
        "path": "docs",
    },
    # Evaluation interval of the rule groups; null leaves Prometheus' global interval.
    "rule_interval": None,
    # Evaluation interval of each family's facts group (job shape and placement, which
    # change only when a job starts: world size, planned steps, pipeline shape, its hosts
    # and GPUs), never shorter than rule_interval and at most 2m30s (see facts_intervals);
    # null records them in the family's group.
    "facts_interval": "2m",
    # Evaluation interval of a family's groups where it may be longer than rule_interval:
    # about a fifteenth of the shortest window or `for` its alerts wait on (the bubble, IB
    # and late arrivals: 10 to 30 minutes; checkpoints and restarts: 30 minutes to an hour);
    # the GPUs every 1m, as often as dcgm-exporter's 30 s samples reach a 30 s scrape (its
    # ECC and XID alerts hold for an hour, the SM-active spread waits 15 minutes); the
    # stragglers and late arrivals every 30s, half their 1m window (a rank pages once it
    # was flagged at every evaluation of a spell: every 1m would add a minute to the page);
    # the dashboards' records (dashboards.records) every 5m, their rate window.
    # Never shorter than rule_interval; a family set to null (or absent) is evaluated at
    # rule_interval, and null for the whole key evaluates every family at rule_interval.
    "family_intervals": {"pipeline": "1m", "checkpoints": "2m", "gpus": "1m", "fabric": "1m",
                         "recovery": "2m", "nccl": "30s", "stragglers": "30s", "panels": "5m"},
    # Facts interval of single families, where theirs may differ from facts_interval; at
    # most 2m30s, half the 5m lookback: a ruler that stamps its records at the start of
    # their interval (vmalert's eval_alignment, on by default) leaves a fact a whole
    # interval older than the evaluation that wrote it, and a fact older than the lookback
    # before the next one drops its ranks from every rule that reads it (ruler: prometheus
    # stamps it at the evaluation: at most 4m30s). Null (or absent) takes facts_interval.
    "facts_intervals": {},
    # promtool tests of these rules (obsgen.scenarios), rendered with them and run by `obsgen test`.
    "scenario_tests": {
        # Render them (false: no test files; your own test files are run either way).
        "enabled": True,
        # Folder under the output root they are written to (one obsgen-<family>.yaml each).
        "path": "tests/promtool",
    },
    # Alert families to render, in registry order; null renders all of them (panels: see dashboards.records).
    "families": None,
    # Rule file format: prometheus, prometheus-operator, mimir or thanos (obsgen.targets).
    "format": "prometheus",
    # The ruler that evaluates the rules: "any" for rules that give the same answers on
    # every ruler, including those that read a record back through remote storage one
    # evaluation or more after writing it (vmalert, Mimir, Thanos); "prometheus" for a
    # Prometheus server over its own TSDB (2.x, 3.x, prometheus-operator), which reads a
    # record the moment the rule before it in the group wrote it: the straggler flag then
    # reads its stage baseline's record, the mean no separate liveness of the raw counts,
    # and the mesh is joined once for the positions and the moving excess (see
    # docs/guides/sizing.md). Not with format mimir or thanos.
    "ruler": "any",
    # Past one Prometheus (docs/guides/sizing.md, "One Prometheus or shards"; obsgen.shards).
    "sharding": {
        # Prometheus shards that split the scrape targets by host: 0 for one Prometheus (no
        # split); 2 or more renders the shard tier (rules/shard/), the global tier
        # (rules/) and each shard's scrape relabelling and remote write (sharding/).
        "shards": 0,
        # Target labels hashed (hashmod) to pick a host's shard: every target of a host
        # (ranks, NCCL sidecar, dcgm-exporter, node_exporter) must give the same values.
        "by": ["__meta_kubernetes_pod_node_name"],
        # The central store's remote-write URL the shards send the global tier's series
        # to (VictoriaMetrics' /api/v1/write, or a Prometheus' with its receiver on);
        # required with shards.
        "remote_write_url": None,
    },
    # PrometheusRule manifests (format prometheus-operator), one per family.
    "prometheus_rule": {
        # Namespace the manifests are created in.
        "namespace": "monitoring",
        # Prefix of each manifest's name; the family name follows.
        "name_prefix": "obsgen-",
        # Labels the Prometheus resource's ruleSelector matches.
        "labels": {"app.kubernetes.io/part-of": "obsgen"},
    },
    # Mimir/Cortex ruler namespace of each family's file: this prefix + the family name.
    "mimir_namespace_prefix": "obsgen-",
    "dashboards": {
        # Render the Grafana dashboards into dashboards/ (false: rules only).
        "enabled": True,
        # Record what the slowest panels compute (family panels, every family_intervals.panels) and have them read it: for boards kept open on jobs of thousands of ranks.
        "records": False,
        # "classic": one dashboard per tab, any Grafana; "v2": one Grafana 12 schema-v2 dashboard with tabs.
        "format": "classic",
        # Prefix of every dashboard uid (<prefix>-<view>); differ it to provision two configs into one Grafana.
        "uid_prefix": "obsgen",
        # Tag on every dashboard; the links bar that acts as tabs joins the dashboards with this tag.
        "tag": "obsgen",
        # Directory Grafana reads the JSON from (provider options.path); each subdirectory becomes a folder.
        "path": "/var/lib/grafana/dashboards",
        # Default time range of the dashboards, back from now.
        "time_range": "6h",
        # Auto-refresh interval of the dashboards.
        "refresh": "1m",
        # Rows of the top-N tables and series of the top-N graphs (slowest ranks, most uneven nodes).
        "top_n": 10,
        # Ranks in the straggler heatmap: the ones with the highest score in the time range.
        "heatmap_ranks": 64,
        # Window of the mean time between failures behind the optimal checkpoint interval panel.
        "mtbf_window": "7d",
        # Expert load imbalance (busiest expert's tokens / mean tokens) above which EP is imbalanced.
        "expert_imbalance": 1.5,
        # Trace links on every panel: uid of a Tempo or Jaeger data source in Grafana; null for none.
        "trace_datasource_uid": None,
        # Type of that data source: tempo or jaeger.
        "trace_datasource_type": "tempo",
        # service.name the training processes export their traces under.
        "trace_service_name": "megatron-lm",
        # Trace attribute that holds the run id (the value of job_id).
        "trace_run_id_attribute": "nemo.run.id",
    },
    # Kubernetes manifests of the dashboards, beside their JSON: dashboards/kubernetes/.
    "dashboard_manifests": {
        # Which to render: configmap (the Grafana sidecar, as kube-prometheus-stack runs it), grafana-operator (GrafanaDashboard); [] for none.
        "kinds": [],
        # Namespace the manifests are created in: one the sidecar or the operator watches.
        "namespace": "monitoring",
        # Prefix of each manifest's name; the dashboard's file name follows.
        "name_prefix": "obsgen-",
        # Label the Grafana sidecar finds dashboard ConfigMaps by (kube-prometheus-stack: grafana.sidecar.dashboards.label and labelValue).
        "sidecar_label": {"grafana_dashboard": "1"},
        # Grafana folder of the dashboards (the ConfigMaps' folder annotation, the GrafanaDashboards' spec.folder); null for the General folder.
        "folder": "Training",
        # Annotation the sidecar reads a ConfigMap's folder from (grafana.sidecar.dashboards.folderAnnotation).
        "folder_annotation": "grafana_folder",
        # Labels of the Grafana resources a GrafanaDashboard is imported into (spec.instanceSelector.matchLabels).
        "instance_selector": {"dashboards": "grafana"},
    },
}

DEFAULT_PATH = "obsgen.yaml"
DURATION_RE = re.compile(r"^(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
# The longest facts interval, in seconds: half of the 5m lookback (Prometheus' default, and
# a bare selector's on VictoriaMetrics under vmalert's 5m step).
FACTS_MAX = 150.0
# With ruler: prometheus, which stamps a record at its evaluation: under the lookback by one
# evaluation of the straggler family's (30 s).
FACTS_MAX_PROMETHEUS = 270.0
_UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


class ConfigError(Exception):
    """Raised with one line per problem, each naming the file, the path and the reason."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def _longest(*intervals: str | None) -> str | None:
    given = [i for i in intervals if i]
    return max(given, key=seconds) if given else None


def group_interval(cfg, family: str | None = None) -> str | None:
    """The interval of ``family``'s group as rendered: its ``family_intervals`` entry, or
    ``rule_interval`` when that is longer or the family has none (None: Prometheus'
    global interval)."""
    own = (cfg["family_intervals"] or {}).get(family) if family else None
    return _longest(cfg["rule_interval"], own)


def facts_interval(cfg, family: str | None = None) -> str | None:
    """The interval of a facts group as rendered (of ``family``'s, when given):
    its ``facts_intervals`` entry or ``facts_interval``, or its family's group interval
    when that is longer (facts are
    never evaluated more often than the rules); None when facts are recorded in their
    family's group."""
    if not cfg["facts_interval"]:
        return None
    own = (cfg["facts_intervals"] or {}).get(family) if family else None
    return _longest(own or cfg["facts_interval"], group_interval(cfg, family))


def seconds(duration: str) -> float:
    """Seconds in a Prometheus duration such as ``1h30m``."""
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|[ywdhms])", duration))


def duration(secs: float) -> str:
    """A Prometheus duration for ``secs`` (1800 -> 30m, 2.5 -> 2s500ms)."""
    ms = round(Fraction(secs).limit_denominator(1000) * 1000)
    if ms == 0:
        return "0s"
    out = ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        n, ms = divmod(ms, size)
        if n:
            out += f"{n}{unit}"
    return out


@dataclass(frozen=True)
class Config:
    data: dict[str, Any]
    source: str
    notes: tuple[str, ...] = ()  # said once on stderr by the command (an empty file)
    # the presets' and the config's renames, merged at their first use (a render asks
    # tens of thousands of times); the data is not changed after the config is made
    _renames: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def _effective(self, section: str) -> dict[str, str]:
        if section not in self._renames:
            self._renames[section] = _effective(self.data, section)
        return self._renames[section]

    def metric(self, key: str) -> str:
        return self._effective("metrics").get(key, key)

    def label(self, key: str) -> str:
        return self._effective("labels").get(key, key)

    def steps_per_observation(self, key: str) -> int:
        """Training steps one observation of histogram ``key`` stands for: 1, or the config
        setting a preset names for it (Megatron's log interval) while the preset's name
        for the metric is the one read."""
        return _steps_per_observation(self.data, key) or 1

    def per_log_interval(self, key: str) -> bool:
        """Whether histogram ``key`` is read from a source that records it once per log
        interval (a preset's cadence, whatever its setting), as Megatron records its step
        time, grad norm and loss together."""
        return _cadence(self.data, key) is not None

    def scale(self, key: str) -> float:
        """Factor from the unit the source publishes a metric's sums in to the contract's:
        a preset's, only while the metric read is still that preset's (a ``metrics:``
        override back to obsgen.instrument's seconds histogram reads seconds)."""
        from .presets import PRESETS
        name = _effective(self.data, "metrics").get(key, key)
        factor = 1.0
        for preset in self.data.get("presets", ["default"]):
            p = PRESETS[preset]
            if key in p.scales:
                factor = p.scales[key] if p.metrics.get(key, key) == name else 1.0
        return factor


def _apart(a: str, b: str) -> bool:
    """Two contract labels no series carries together (the NCCL Inspector's node and gpu
    beside obsgen's): one name can serve both, as the nccl-inspector preset names them,
    since every rule reads each on its own series."""
    series = [m.labels for m in contract.METRICS.values()] + [r.labels for r in contract.RECORDED.values()]
    return not any(a in labels and b in labels for labels in series)


def ruler_refused(ruler: str | None, fmt: str | None) -> str | None:
    """Why rules for ``ruler`` cannot be loaded in format ``fmt``, or None."""
    if ruler == "prometheus" and fmt in ("mimir", "thanos"):
        return (f"must be 'any' with format {fmt!r}: 'prometheus' is for a Prometheus server "
                "that evaluates its own TSDB")
    return None


# The sizing guide's config for a job of thousands of ranks on one Prometheus (the scale
# benchmark measures it; obsgen plan points large jobs at it).
ONE_PROMETHEUS = {"ruler": "prometheus", "facts_intervals": {"stragglers": "4m"}}


def _cadence(data: dict, key: str) -> str | None:
    """The config setting of the preset whose cadence ``key`` is read with (the preset's
    name for the metric is the one read), or None."""
    from .presets import PRESETS
    name = _effective(data, "metrics").get(key, key)
    for preset in data.get("presets", ["default"]):
        p = PRESETS[preset]
        if key in p.cadence and p.metrics.get(key) == name:
            return p.cadence[key]
    return None


def _steps_per_observation(data: dict, key: str) -> int | None:
    """The preset setting behind ``key``'s cadence (None when unset), or 1."""
    setting = _cadence(data, key)
    return data.get(setting) if setting else 1


def _effective(data: dict, section: str) -> dict[str, str]:
    """Renames of the presets in order, then the config's own."""
    from .presets import PRESETS
    out: dict[str, str] = {}
    for name in data.get("presets", ["default"]):
        out.update(getattr(PRESETS[name], section))
    if section == "labels" and isinstance(data.get("pod_job_label"), str):
        out[contract.L.label_job_id.key] = contract.ksm_pod_label(data["pod_job_label"])
    out.update(data.get(section, {}))
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate keys instead of keeping the last one."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (dict, list)):
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a plain value, got a {type(key).__name__}",
                key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _construct_mapping)


def schema(alert_names: list[str] | None = None) -> dict[str, Any]:
    """The JSON Schema, with the contract's metric and label keys (and the alert names,
    when given) filled in so an unknown name is an error."""
    doc = json.loads(resources.files("obsgen").joinpath("config.schema.json").read_text())
    props = doc["properties"]
    props["metrics"]["properties"] = {k: {"$ref": "#/$defs/metric_name"} for k in contract.METRICS}
    props["labels"]["properties"] = {k: {"$ref": "#/$defs/label_name"} for k in contract.LABELS}
    from .presets import PRESETS
    props["presets"]["items"] = {"enum": list(PRESETS)}
    from .registry import FAMILIES  # the families import this module: import them late
    props["family_intervals"]["propertyNames"] = {"enum": [f.NAME for f in FAMILIES]}
    props["facts_intervals"]["propertyNames"] = {"enum": [f.NAME for f in FAMILIES]}
    if alert_names is not None:
        props["alerts"]["properties"] = {a: {"$ref": "#/$defs/alert_override"} for a in alert_names}
    return doc


# Label sets a config replaces whole: a selector with the default's label added would
# select nothing the user meant.
REPLACED = {("dashboard_manifests", "sidecar_label"), ("dashboard_manifests", "instance_selector")}


def _merge(base: dict, over: dict, at: tuple[str, ...] = ()) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if (isinstance(value, dict) and isinstance(out.get(key), dict) and out[key]
                and (*at, key) not in REPLACED):
            out[key] = _merge(out[key], value, (*at, key))
        else:
            out[key] = copy.deepcopy(value)
    return out


def _path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


_BOUNDS = {"exclusiveMinimum": ">", "minimum": ">=", "exclusiveMaximum": "<", "maximum": "<="}


def _reason(e: jsonschema.ValidationError) -> str:
    v, got = e.validator, e.instance
    if v == "additionalProperties":
        extra = sorted(set(got) - set(e.schema.get("properties", {})))
        known = ", ".join(sorted(e.schema.get("properties", {}))) or "none"
        return f"unknown key {extra[0]!r} (known: {known})" if extra else e.message
    if v in _BOUNDS:
        return f"must be {_BOUNDS[v]} {e.validator_value}, got {got!r}"
    if v == "type":
        want = e.validator_value if isinstance(e.validator_value, str) else " or ".join(e.validator_value)
        return f"must be of type {want}, got {type(got).__name__} {got!r}"
    if v == "enum":
        return f"must be one of {', '.join(map(str, e.validator_value))}, got {got!r}"
    if v == "pattern":
        hint = e.schema.get("description", f"must match {e.validator_value}")
        return f"{hint}, got {got!r}"
    if v in ("minProperties", "maxProperties") and "description" in e.schema:
        return f"{e.schema['description']}, got {got!r}"
    if v == "minItems":
        return f"must list at least {e.validator_value} item{'s' if e.validator_value != 1 else ''}, got {got!r}"
    if v == "uniqueItems":
        return f"must not list an item twice, got {got!r}"
    if v == "minLength":
        return f"must not be empty, got {got!r}"
    if v == "required":
        return e.message
    return e.message


def _text_problem(value: str) -> str | None:
    """Why a label value cannot be carried exactly into PromQL, YAML and templates."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode text (it holds a lone surrogate)"
    return None


def _semantic(data: dict) -> list[tuple[str, str]]:
    """Checks JSON Schema cannot express; run on a config that passed the schema."""
    from .promql import regex_problem

    out = []
    from .presets import PRESETS, families_of
    enabled = families_of(data.get("presets", ["default"]))
    for fam in data.get("families") or []:
        needs = [p.name for p in PRESETS.values() if fam in p.families]
        if needs and fam not in enabled:
            out.append(("families", f"{fam} reads a source only the {needs[0]} preset brings: "
                                    f"add {needs[0]} to presets"))
    # Renames must keep names apart: two metrics (or labels) under one name would make the
    # rules read one signal as another. The scrape labels Prometheus adds (job, instance)
    # are names too: a label renamed to one of them would read the scrape target as it.
    metrics = {k: _effective(data, "metrics").get(k, k) for k in contract.METRICS}
    labels = {k: _effective(data, "labels").get(k, k) for k in contract.LABELS}
    scrape = {"job": "the scrape job", "instance": "the scrape target"}
    for section, names in (("metrics", metrics), ("labels", labels)):
        for key in _effective(data, section):
            others = [k for k, v in names.items() if v == names[key] and k != key
                      and not (section == "labels" and _apart(key, k))]
            if section == "labels" and key in scrape:
                out.append((f"labels.{key}", f"{key} is the label Prometheus adds for "
                                             f"{scrape[key]} of every series, which obsgen "
                                             "never renames (the training job's id is "
                                             "labels.job_id)"))
            elif section == "labels" and names[key] in scrape:
                out.append((f"labels.{key}", f"{names[key]!r} is the label Prometheus adds for "
                                             f"{scrape[names[key]]} of every series; keep "
                                             f"{key} under a name of its own"))
            elif others:
                out.append((f"{section}.{key}", f"{names[key]!r} is also the name of {section}.{others[0]}"))
    for key, name in data.get("labels", {}).items():
        if name in ("le", "quantile") or name.startswith("__"):
            out.append((f"labels.{key}", f"{name!r} is reserved by Prometheus (histogram buckets, "
                                         "summaries or internal labels)"))
    from .presets import PRESETS
    for preset in data.get("presets", ["default"]):
        for key, setting in PRESETS[preset].cadence.items():
            if _steps_per_observation(data, key) is None:
                out.append((setting, f"required with presets: [{preset}]: it records "
                                     f"{key} once per log interval, the interval's mean; set "
                                     "it to the job's --log-interval (Megatron's default is 100)"))
    for section in ("windows", "thresholds"):
        for key, value in data.get(section, {}).items():
            if isinstance(value, str) and seconds(value) <= 0:
                out.append((f"{section}.{key}", f"must be a duration above zero, got {value!r}"))
    for key in ("rule_interval", "facts_interval"):
        if data.get(key) and seconds(data[key]) <= 0:
            out.append((key, f"must be a duration above zero, got {data[key]!r}"))
    for key in ("family_intervals", "facts_intervals"):
        for family, value in (data.get(key) or {}).items():
            if value and seconds(value) <= 0:
                out.append((f"{key}.{family}", f"must be a duration above zero, got {value!r}"))
    facts = [("facts_interval", data.get("facts_interval"))] + [
        (f"facts_intervals.{f}", v) for f, v in (data.get("facts_intervals") or {}).items()]
    for path, value in facts:
        if not value or seconds(value) <= FACTS_MAX:
            continue
        if data.get("ruler") != "prometheus":
            out.append((path, f"must be at most {duration(FACTS_MAX)}, half the 5m lookback, "
                              f"got {value!r}: vmalert stamps a record at the start of its "
                              "interval, so a fact would lapse before the next evaluation "
                              "(ruler: prometheus allows up to "
                              f"{duration(FACTS_MAX_PROMETHEUS)})"))
        elif seconds(value) > FACTS_MAX_PROMETHEUS:
            out.append((path, f"must be at most {duration(FACTS_MAX_PROMETHEUS)}, 30s under "
                              f"the 5m lookback, got {value!r}: a fact would lapse before "
                              "the next evaluation"))
    if problem := ruler_refused(data.get("ruler"), data.get("format")):
        out.append(("ruler", problem))
    sharding = data.get("sharding") or {}
    if sharding.get("shards"):
        if not sharding.get("remote_write_url"):
            out.append(("sharding.remote_write_url", "required with sharding.shards: the "
                        "central store's remote-write URL the shards send the global tier's "
                        "series to"))
        if data.get("ruler") == "prometheus":
            out.append(("ruler", "must be any with sharding.shards: the global tier reads "
                                 "the shards' records back through remote write, a write "
                                 "or more after they were recorded"))
    for label, value in data.get("selector", {}).items():
        op, text = ("=", value) if isinstance(value, str) else next(iter(value.items()))
        path = f"selector.{label}" if isinstance(value, str) else f"selector.{label}.{op}"
        problem = _text_problem(text) or (regex_problem(text) if op in ("=~", "!~") else None)
        if problem:
            out.append((path, problem))
    for section in ("common_labels", "teams"):
        for key, value in data.get(section, {}).items():
            if isinstance(value, str) and (problem := _text_problem(value)):
                out.append((f"{section}.{key}", problem))
    if isinstance(data.get("runbook_url"), str) and (problem := _text_problem(data["runbook_url"])):
        out.append(("runbook_url", problem))
    return out


def validate(data: Any, source: str, alert_names: list[str] | None = None) -> list[str]:
    """Problems with a config, one line each, sorted by path."""
    validator = jsonschema.Draft202012Validator(schema(alert_names))
    problems = []
    for err in validator.iter_errors(data):
        # Report the most specific failure of a oneOf/anyOf rather than the umbrella: of
        # the branch the value's type matches (a duration that is no duration is not "must
        # be null"), else the shortest.
        within = [c for c in err.context if c.validator != "type"] or err.context
        leaf = min(within, key=lambda c: len(c.message)) if err.context else err
        path = _path(leaf) if err.context else _path(err)
        problems.append((path, f"{source}: {path}: {_reason(leaf)}"))
    if not problems and isinstance(data, dict):
        problems = [(path, f"{source}: {path}: {why}") for path, why in _semantic(data)]
    return [line for _, line in sorted(set(problems))]


def defaults() -> Config:
    """The default config, a copy of its own."""
    return Config(copy.deepcopy(DEFAULTS), "(defaults)")


CONFIG_LIMIT = 1 << 20  # bytes of a config file read at most (one is a few kilobytes)


def load(path: str | Path | None = None, alert_names: list[str] | None = None) -> Config:
    """Load ``path`` (or the defaults when it is None and obsgen.yaml does not exist).

    A file that cannot be a config (see obsgen.userfile: missing, a directory, unreadable,
    too large, not UTF-8, NUL bytes, YAML too deep, an alias bomb, object tags) raises
    ConfigError with one line. An empty file (or only comments) is the defaults, and the
    returned config's ``notes`` say so."""
    if path is None:
        path = DEFAULT_PATH if Path(DEFAULT_PATH).exists() else None
    if path is None:
        return defaults()
    source = str(path)
    try:
        text = userfile.read_text(path, limit=CONFIG_LIMIT)
        user = userfile.load_yaml(text, source, _UniqueKeyLoader)  # safe: no Python objects
    except userfile.InputError as exc:
        raise ConfigError([str(exc)]) from None
    notes: tuple[str, ...] = ()
    if user is None:
        user = {}
        notes = (f"{source}: holds no settings; the defaults apply",)
    if not isinstance(user, dict):
        raise ConfigError([f"{source}: (top level): must be a mapping, got {type(user).__name__}"])
    problems = validate(user, source, alert_names)
    if problems:
        raise ConfigError(problems)
    return Config(_merge(DEFAULTS, user), source, notes)
