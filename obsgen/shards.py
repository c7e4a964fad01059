"""Sharded topology: the rules split into a shard tier and a global tier.

Past one Prometheus, several Prometheus shards split the scrape targets with ``hashmod``
relabelling and remote-write to a central store, where a central ruler (vmalert over
VictoriaMetrics, a Prometheus with its remote-write receiver, the Mimir or Thanos ruler)
evaluates what spans the whole job. A rule gives the single Prometheus' answer on a shard
only when every series it combines into one output series sits on the same shard.

obsgen shards by **host**: every target of a host (the ranks' processes, the NCCL
sidecar, dcgm-exporter, node_exporter) hashes to the same shard (``sharding.by``, the
Kubernetes node name by default). So a series is local to its shard when it carries a
label that pins it to one host: ``rank`` (a rank runs on one host), ``node``, the GPU's
``UUID``, dcgm-exporter's ``Hostname``/``hostname``, node_exporter's ``nodename``, the
scrape ``instance``, or a process's own host name (``process_host``, and the NCCL
Inspector's ``node``: a pod's name on Kubernetes, and a pod runs on one node). A cluster-wide exporter (kube-state-metrics) and the ruler's own
``ALERTS`` sit on one shard whatever they describe: never local.

The tiers, rule by rule, in each family's order:

* **shard tier**: a record whose expression is local (``local_pins``): every selector
  reads a host-local scraped series or a shard-tier record, every aggregation keeps a
  pinning label, every join matches on one, and nothing makes a series out of nothing
  (``vector``, ``absent``). Evaluated by every shard over its own targets.
* **global tier**: every other record and every alert. Each largest local part of such an
  expression that reads a scraped series is *hoisted*: recorded on the shards under a name
  of ``contract.shard_record`` and read by the global rule in its place. So the global tier
  reads only recorded series and the cluster-wide ones, which is what the shards
  remote-write (``keep_list``).

The global tier reads each shard-tier record one evaluation and a remote write after it
was written: the rules of ``ruler: any`` give the same answers so (``obsgen test
--late-reads`` proves it on the split, tests/test_shards.py on the scenarios).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from . import contract
from .config import Config
from .model import Alert, Family, Record
from .passes import DefinitionError

# Contract labels that pin a series to one host, hence to one shard (see the docstring).
PIN_KEYS = ("rank", "node", "UUID", "Hostname", "hostname", "nodename", "instance",
            "process_host", "inspector_host")
# Emitters whose one target describes the whole cluster: their series are never local.
CLUSTER_WIDE = (contract.KSM, contract.RULER)
# Functions whose output series do not come from their argument's (made from nothing, or
# one value from many): never local.
_NOT_LOCAL_CALLS = {"vector", "absent", "absent_over_time", "scalar", "info"}
_SCALAR = frozenset({"<scalar>"})
SHARD = "shard"  # the shard tier's folder under rules/ and its file names' suffix


def shard_format(cfg: Config) -> str:
    """The shard tier's rule format: the shards are Prometheus servers, PrometheusRule
    manifests where the operator runs them, plain rule files otherwise."""
    return "prometheus-operator" if cfg["format"] == "prometheus-operator" else "prometheus"


def is_shard_file(path: str) -> bool:
    return path.replace("\\", "/").rsplit("/", 1)[-1].endswith(f"-{SHARD}.yaml")


class Unsplittable(DefinitionError):
    """A family whose rules cannot be split: one line naming the family, the rule and why."""

    def __init__(self, problem: str):
        super().__init__([problem])


@dataclass(frozen=True)
class Split:
    shard: list[Family]   # the shard tier: host-local records, hoisted parts included
    global_: list[Family]  # the global tier: the rest, reading hoisted parts by name
    keep: tuple[str, ...]  # series names the global tier reads that the shards hold


class _Env:
    def __init__(self, cfg: Config):
        self.pins = {cfg.label(k) for k in PIN_KEYS if k in contract.LABELS}
        self.local_raw: dict[str, frozenset[str]] = {}
        self.cluster_raw: set[str] = set()
        for m in contract.METRICS.values():
            names = [cfg.metric(m.key) + s for s in
                     (("_bucket", "_sum", "_count") if m.type == contract.HISTOGRAM else ("",))]
            labels = {cfg.label(k) for k in m.labels if k in contract.LABELS}
            for n in names:
                if m.emitter in CLUSTER_WIDE:
                    self.cluster_raw.add(n)
                else:
                    self.local_raw[n] = frozenset((labels | {cfg.label("instance")}) & self.pins)
        self.shard_records: dict[str, frozenset[str]] = {}
        self.global_records: set[str] = set()
        self.strings: dict[str, str] = {}  # the family's masked strings (_Literals)

    def string(self, node) -> str | None:
        """The text of a string literal as written (None when it is not one)."""
        if type(node).__name__ != "StringLiteral":
            return None
        raw = self.strings.get(f'"{node.val}"')
        return raw[1:-1] if raw is not None else node.val


def _labels(mod) -> set[str]:
    return set(mod.labels or []) if mod is not None else set()


def local_pins(node, env: _Env) -> frozenset[str] | None:
    """The pinning labels every output series of ``node`` carries when all its inputs sit
    on one shard; ``_SCALAR`` for a scalar; None when it is not local."""
    kind = type(node).__name__
    if kind in ("NumberLiteral", "StringLiteral"):
        return _SCALAR
    if kind == "MatrixSelector":
        return local_pins(node.vector_selector, env)
    if kind == "VectorSelector":
        if node.name in env.shard_records:
            return env.shard_records[node.name]
        return env.local_raw.get(node.name)
    if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        return local_pins(node.expr, env)
    if kind == "Call":
        name = node.func.name
        if name in _NOT_LOCAL_CALLS:
            return None
        if name == "time" or not node.args:
            return _SCALAR
        found = [local_pins(a, env) for a in node.args]
        if any(p is None for p in found):
            return None
        if name == "label_replace":
            return _label_replace(node, found[0], env)
        vectors = [p for p in found if p is not _SCALAR]
        return vectors[0] if vectors else _SCALAR
    if kind == "AggregateExpr":
        inner = local_pins(node.expr, env)
        if inner is None or inner is _SCALAR:
            return None
        if node.param is not None and local_pins(node.param, env) is None:
            return None
        labels = _labels(node.modifier)
        without = node.modifier is not None and "Without" in str(node.modifier.type)
        out = inner - labels if without else inner & labels
        return frozenset(out) or None
    if kind == "BinaryExpr":
        lhs, rhs = local_pins(node.lhs, env), local_pins(node.rhs, env)
        if lhs is None or rhs is None:
            return None
        if lhs is _SCALAR or rhs is _SCALAR:
            return rhs if lhs is _SCALAR else lhs
        matching = node.modifier.matching if node.modifier is not None else None
        if matching is None:
            common = lhs & rhs
        elif "Include" in str(matching.type):
            common = lhs & rhs & _labels(matching)
        else:
            common = (lhs & rhs) - _labels(matching)
        if not common:
            return None
        card = str(node.modifier.card) if node.modifier is not None else ""
        if str(node.op) == "or":
            return frozenset(lhs & rhs)
        return frozenset(rhs if "OneToMany" in card else lhs)
    return None


def _label_replace(node, pins: frozenset[str], env: _Env) -> frozenset[str] | None:
    """A label written over loses its pin; one copied whole from a pinning label
    (``"$1"`` of ``"(.*)"``) pins as its source does."""
    dst, repl, src, regex = (env.string(a) for a in node.args[1:5])
    out = set(pins) - {dst}
    if src in pins and repl == "$1" and regex in ("(.*)", "(.+)") and dst:
        out.add(dst)
    return frozenset(out) or None


def _reads(node, out: set[str]) -> set[str]:
    kind = type(node).__name__
    if kind == "VectorSelector":
        out.add(node.name)
    for child in _children(node):
        _reads(child, out)
    return out


def _children(node) -> list:
    kind = type(node).__name__
    if kind == "AggregateExpr":
        return [c for c in (node.param, node.expr) if c is not None]
    if kind == "BinaryExpr":
        return [node.lhs, node.rhs]
    if kind == "Call":
        return list(node.args)
    if kind == "MatrixSelector":
        return [node.vector_selector]
    if kind in ("ParenExpr", "SubqueryExpr", "UnaryExpr"):
        return [node.expr]
    return []


def _hoistable(node, env: _Env) -> bool:
    """A local instant vector that reads a scraped series (a shard record alone is read
    at the centre as it is)."""
    if type(node).__name__ in ("MatrixSelector", "NumberLiteral", "StringLiteral"):
        return False
    pins = local_pins(node, env)
    return bool(pins) and pins is not _SCALAR and bool(_reads(node, set()) & set(env.local_raw))


_FILTERS = {"==", "!=", ">", "<", ">=", "<=", "and", "unless"}


def _filters(node) -> bool:
    """A comparison without ``bool``, an ``and`` or an ``unless``: it drops series."""
    while type(node).__name__ == "ParenExpr":
        node = node.expr
    if type(node).__name__ != "BinaryExpr" or str(node.op) not in _FILTERS:
        return False
    return not (node.modifier is not None and node.modifier.return_bool)


def _parts(node, env: _Env, out: list) -> list:
    """The largest hoistable parts of ``node``, outermost first. A part is never a filter
    at its top: the global rule filters the hoisted values itself, because a series a
    filter drops on a shard ends with a staleness marker, and a central store that loses
    it would read the series on for its lookback (obsgen test --late-reads models it)."""
    if _hoistable(node, env) and not _filters(node):
        out.append(node)
        return out
    for child in _children(node):
        _parts(child, env, out)
    return out


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name).strip("_").lower()


def _parse(expr: str):
    import promql_parser

    return promql_parser.parse(expr)


_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`""", re.S)
_DUR = r"\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*"
_DURATION = re.compile(rf"(\[\s*|:\s*|\boffset\s+-?)({_DUR})(?=\s*[\]:)\s])")
_HELD = re.compile(r"(\[\s*|:\s*|\boffset\s+-?)(7\d{3})y(?=\s*[\]:)\s])")


class _Literals:
    """The split prints parts of expressions (promql_parser), and that printer writes
    label values unescaped and durations under a second as 0s. So expressions are parsed
    with every string and every duration held by a placeholder it prints unchanged
    (``"__obsgen_lit_<i>__"``, ``<7000 + i>y``), and what is printed gets them back."""

    def __init__(self):
        self.strings: dict[str, str] = {}
        self.durations: dict[str, str] = {}  # placeholder number -> the duration as written

    def mask(self, expr: str) -> str:
        def string(m):
            for key, text in self.strings.items():
                if text == m.group(0):
                    return key
            key = f'"__obsgen_lit_{len(self.strings)}__"'
            self.strings[key] = m.group(0)
            return key

        def duration(m):
            for key, text in self.durations.items():
                if text == m.group(2):
                    return f"{m.group(1)}{key}y"
            key = str(7000 + len(self.durations))
            self.durations[key] = m.group(2)
            return f"{m.group(1)}{key}y"
        return _DURATION.sub(duration, _STRING.sub(string, expr))

    def unmask(self, text: str) -> str:
        text = _HELD.sub(lambda m: m.group(1) + self.durations[m.group(2)], text)
        return re.sub(r'"__obsgen_lit_\d+__"', lambda m: self.strings[m.group(0)], text)


def split(families: list[Family], cfg: Config) -> Split:
    """The shard and the global tier of these families (see the module docstring)."""
    env = _Env(cfg)
    shard, glob, keep = [], [], set()
    for fam in families:
        shard_rules: list[Record] = []
        global_rules: list[Record | Alert] = []
        hoisted: dict[str, str] = {}  # part's text -> its record name
        lit = _Literals()  # one for the family: a part's text means one thing in it
        env.strings = lit.strings
        for rule in fam.rules:
            tree = _parse(lit.mask(rule.expr))
            if isinstance(rule, Record) and _hoistable(tree, env) or (
                    isinstance(rule, Record) and local_pins(tree, env) not in (None, _SCALAR)):
                env.shard_records[rule.name] = local_pins(tree, env)
                shard_rules.append(rule)
                continue
            text = str(tree)
            bodies: dict[str, None] = {}  # the parts' texts, each once, in order
            for part in _parts(tree, env, []):
                body = str(part)
                bodies[body] = None
                if body not in hoisted:
                    name = contract.shard_record(fam.name, _slug(rule.key if isinstance(rule, Alert)
                                                                 else rule.name), len(hoisted))
                    hoisted[body] = name
                    env.shard_records[name] = local_pins(part, env)
                    shard_rules.append(Record(name, lit.unmask(body),
                                              fact=getattr(rule, "fact", False), group=""))
            # the longest first: a shorter part may be text inside a longer one
            for body in sorted(bodies, key=len, reverse=True):
                pattern = re.compile(r"(?<![a-zA-Z0-9_:])" + re.escape(body))
                text, found = pattern.subn(lambda _m, b=body: hoisted[b], text)
                if not found:
                    raise Unsplittable(f"family {fam.name}: rule {rule.name}: its part "
                                       f"{lit.unmask(body)} is not found again in its printed "
                                       "expression")
            rewritten = replace(rule, expr=lit.unmask(text)) if text != str(tree) else rule
            if isinstance(rule, Record):
                env.global_records.add(rule.name)
            global_rules.append(rewritten)
            keep |= _reads(_parse(text), set()) - env.global_records
        if shard_rules:
            shard.append(replace(fam, rules=tuple(shard_rules)))
        if global_rules:
            glob.append(replace(fam, rules=tuple(global_rules)))
    unknown = keep - set(env.shard_records) - env.cluster_raw - set(env.local_raw)
    keep -= unknown  # names no shard holds (another family's global record) need no write
    return Split(shard, glob, tuple(sorted(keep)))


SHARD_LABEL = "__tmp_obsgen_shard"  # the hashmod result, dropped after relabelling


def shard_config(cfg: Config, keep: tuple[str, ...], index: int) -> dict:
    """What shard ``index`` adds to its Prometheus config: ``relabel_configs`` to append
    to every scrape job (hash the host, keep this shard's), and the ``remote_write`` of
    exactly the series the global tier reads."""
    sharding = cfg["sharding"]
    return {
        "relabel_configs": [
            {"source_labels": list(sharding["by"]), "modulus": sharding["shards"],
             "target_label": SHARD_LABEL, "action": "hashmod"},
            {"source_labels": [SHARD_LABEL], "regex": str(index), "action": "keep"},
        ],
        "remote_write": [{
            "url": sharding["remote_write_url"],
            "write_relabel_configs": [
                {"source_labels": ["__name__"], "regex": "|".join(keep), "action": "keep"}],
        }],
    }


def files(families: list[Family], cfg: Config) -> dict[str, str]:
    """Renderer: docs/sharding.md, which says where each family's rules run (or would run,
    on one Prometheus), and sharding/shard-<i>.yaml for each shard of a sharded config."""
    from .render import dump_yaml
    if not cfg["sharding"]["shards"] and not cfg["docs"]["enabled"]:
        return {}
    tiers = split(families, cfg)
    out = {f"sharding/shard-{i}.yaml": dump_yaml(shard_config(cfg, tiers.keep, i), "obsgen/shards.py")
           for i in range(cfg["sharding"]["shards"])}
    out["docs/sharding.md"] = reference(families, tiers, cfg)
    return out


def reference(families: list[Family], tiers: Split, cfg: Config) -> str:
    """docs/sharding.md: each family's rules by tier, and what the shards write."""
    from .render import MARKER
    shard = {f.name: f for f in tiers.shard}
    glob = {f.name: f for f in tiers.global_}
    by = ", ".join(f"`{b}`" for b in cfg["sharding"]["by"])
    count = cfg["sharding"]["shards"]
    lines = [f"<!-- {MARKER} from obsgen/shards.py and the config. Do not edit: change "
             "obsgen.yaml (or the definitions) and run `obsgen render`. -->", "",
             "# Where the rules run: shards and the centre", ""]
    if count:
        lines += [f"{count} Prometheus shards split the targets by host (hashmod of {by}). "
                  "Each loads `rules/shard/*.yaml` and adds `sharding/shard-<i>.yaml`; the "
                  "central ruler loads `rules/*.yaml`."]
    else:
        hosts = ", ".join(cfg["sharding"]["by"])
        lines += ["This config runs on one Prometheus (`sharding.shards: 0`), which loads "
                  f"`rules/*.yaml`. With `sharding.shards` set (and `by: [{hosts}]`), "
                  "its rules split as below: the shards load `rules/shard/*.yaml`, the "
                  "central ruler the rest."]
    lines += ["obsgen's sizing guide, \"One Prometheus or shards\", says when to shard and "
              "how to deploy each tier. Every family below splits; one that could not would "
              "be refused by the render with the rule and the reason.", ""]
    for fam in families:
        lines += [f"## {fam.name}", ""]
        if fam.name not in shard:
            lines += ["Evaluated wholly at the centre: none of its rules reads a series a "
                      "shard holds alone.", ""]
        else:
            lines += ["On every shard:", ""]
            lines += [f"- `{r.name}`: `{' '.join(r.expr.split())}`" for r in shard[fam.name].rules]
            lines.append("")
        if fam.name in glob:
            lines += ["At the centre: " + ", ".join(f"`{r.name}`" for r in glob[fam.name].rules),
                      ""]
    lines += ["## What the shards write to the centre", "",
              "The `write_relabel_configs` keep-list of every shard: the series the centre "
              "reads.", ""]
    lines += [f"- `{name}`" for name in tiers.keep]
    return "\n".join(lines) + "\n"
