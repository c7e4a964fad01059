"""``obsgen plan --shards N``: what the sharded topology (obsgen.shards) puts on each
Prometheus shard and on the central store, for a job of the plan's shape.

Each shard scrapes 1/N of the hosts (``hashmod`` of the host: the hosts spread evenly at
the sizes this is for) and records the shard tier over them. The centre holds what the
shards write, the keep-list, and what its own ruler records.

A kept name's series follow from the labels its output keeps (``out_labels``, from the
expression as written): a shard record always keeps a label that pins it to a host
(``rank``, the GPU's ``UUID``, ``node``, ...), which gives its scope; the labels that fan
a rank out (``op``, ``group``, ``phase``, ``signal``, an HCA's ``device``) multiply it as in
``obsgen.plan``. A name the plan already counts (a contract record, a cluster-wide
exporter's series) keeps the plan's count. Samples per second: each series once per
evaluation of its group (a facts group's interval for the job-shape facts), each scraped
series once per scrape interval.
"""
from __future__ import annotations

from . import contract
from .config import Config
from .plan import BYTES_PER_SERIES, Line, Shape, plan, unread_buckets
from .shards import _SCALAR, _labels, _parse, split
from .timescale import EVALUATION_INTERVAL, SCRAPE_INTERVAL


def _raw_labels(cfg: Config) -> dict[str, frozenset[str]]:
    """Every scraped series name with the labels it carries (the scrape's own included)."""
    out = {}
    for m in contract.METRICS.values():
        labels = {cfg.label(k) for k in m.labels if k in contract.LABELS}
        labels |= {cfg.label("instance"), cfg.label("job")}
        if m.type == contract.HISTOGRAM:
            out[cfg.metric(m.key) + "_bucket"] = frozenset(labels | {"le"})
            out.update({cfg.metric(m.key) + s: frozenset(labels) for s in ("_sum", "_count")})
        else:
            out[cfg.metric(m.key)] = frozenset(labels)
    return out


def out_labels(node, known: dict[str, frozenset[str]]):
    """The labels every output series of ``node`` carries (``_SCALAR`` for a scalar)."""
    kind = type(node).__name__
    if kind in ("NumberLiteral", "StringLiteral"):
        return _SCALAR
    if kind == "MatrixSelector":
        return out_labels(node.vector_selector, known)
    if kind == "VectorSelector":
        return known.get(node.name, frozenset())
    if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        return out_labels(node.expr, known)
    if kind == "Call":
        name = node.func.name
        vectors = [v for v in (out_labels(a, known) for a in node.args) if v is not _SCALAR]
        if name in ("time", "vector", "scalar", "absent", "absent_over_time") or not vectors:
            return frozenset() if name != "time" else _SCALAR
        if name in ("label_replace", "label_join"):
            return vectors[0] | {str(node.args[1]).strip("\"'")}
        if name == "histogram_quantile":
            return vectors[0] - {"le"}
        return vectors[0]
    if kind == "AggregateExpr":
        inner = out_labels(node.expr, known)
        grouping = _labels(node.modifier)
        if node.modifier is not None and "Without" in str(node.modifier.type):
            return inner - grouping
        return frozenset(grouping)
    if kind == "BinaryExpr":
        lhs, rhs = out_labels(node.lhs, known), out_labels(node.rhs, known)
        if lhs is _SCALAR or rhs is _SCALAR:
            return rhs if lhs is _SCALAR else lhs
        op, mod = str(node.op), node.modifier
        card = str(mod.card) if mod is not None else ""
        matching = mod.matching if mod is not None else None
        if op == "or":
            return lhs & rhs
        if op in ("and", "unless"):
            return lhs
        include = set(mod.group_labels or []) if mod is not None else set()
        if "ManyToOne" in card:
            return lhs | include
        if "OneToMany" in card:
            return rhs | include
        filters = op in ("==", "!=", ">", "<", ">=", "<=") and not (mod and mod.return_bool)
        if filters or matching is None:
            return lhs
        if "Include" in str(matching.type):  # on(...): one-to-one keeps the on labels
            return lhs & _labels(matching)
        return lhs - _labels(matching)
    return frozenset()


def _inputs(node, out: list) -> list:
    """The vector selectors ``node`` reads."""
    from .shards import _children
    if type(node).__name__ == "VectorSelector":
        out.append(node)
    for child in _children(node):
        _inputs(child, out)
    return out


def _bound(node, s: Shape, cfg: Config, counts: dict[str, int]) -> int | None:
    """At most how many series an expression has: as many as its largest input (a part
    that reads one rank's loss is one series, not one a rank), a ``tp_rank``/``ep_rank``
    equality matcher keeping one rank in tp (ep)."""
    most = None
    for sel in _inputs(node, []):
        n = counts.get(sel.name)
        if n is None:
            continue
        for m in sel.matchers.matchers if sel.matchers is not None else []:
            if str(m.op) in ("=", "MatchOp.Equal") and m.name == cfg.label("tp_rank"):
                n //= s.tp
            if str(m.op) in ("=", "MatchOp.Equal") and m.name == cfg.label("ep_rank"):
                n //= s.ep
        most = n if most is None else max(most, n)
    return most


def _scraped_counts(lines: dict[str, Line], cfg: Config) -> dict[str, int]:
    """Series of each scraped name in the plan (a histogram's _bucket, _sum, _count apart)."""
    out = {}
    for m in contract.METRICS.values():
        line = lines.get(m.key)
        if line is None:
            continue
        if m.type == contract.HISTOGRAM:
            each = line.total // (len(m.buckets or contract.DEFAULT_BUCKETS) + 2)
            out.update({cfg.metric(m.key) + "_sum": each, cfg.metric(m.key) + "_count": each,
                        cfg.metric(m.key) + "_bucket": line.total - 2 * each})
        else:
            out[cfg.metric(m.key)] = line.total
    return out


def _per_unit(labels: frozenset[str], s: Shape, cfg: Config) -> tuple[str, int]:
    """(scope, series per unit) of an output carrying ``labels``."""
    has = {k for k in contract.LABELS if cfg.label(k) in labels}
    scope = ("rank" if "rank" in has else "gpu" if has & {"UUID", "gpu"} else
             "host" if has & {"node", "instance", "Hostname", "hostname", "nodename"} else "job")
    n = 1
    if has & {"phase", "signal"}:
        n *= 2
    if "op" in has:
        n *= s.collectives()
    elif "group" in has:
        n *= s.groups()
    if "device" in has and scope == "host":
        n *= s.hcas_per_host
    return scope, n


def sizing(s: Shape, cfg: Config, shards: int, families=None) -> dict:
    """Series and samples per second on each shard and at the centre."""
    from .config import facts_interval, group_interval, seconds
    from .pipeline import families as build
    families = families if families is not None else build(cfg)
    tiers = split(families, cfg)
    lines: dict[str, Line] = {l.name: l for l in plan(
        s, cfg["windows"], {r.name for f in families for r in f.records})}
    units = {"rank": s.ranks, "gpu": s.ranks, "host": s.hosts, "job": 1, "stage": s.pp}
    known = _raw_labels(cfg)
    counts = _scraped_counts(lines, cfg)
    shard_series, every = {}, {}  # name -> series in the job; name -> evaluation seconds
    for fam in tiers.shard:
        for rule in fam.rules:
            tree = _parse(rule.expr)
            labels = out_labels(tree, known)
            known[rule.name] = labels if labels is not _SCALAR else frozenset()
            if rule.name in lines:
                shard_series[rule.name] = lines[rule.name].total
            else:
                scope, per = _per_unit(known[rule.name], s, cfg)
                most = _bound(tree, s, cfg, counts)
                shard_series[rule.name] = min(per * units[scope], most if most is not None
                                              else per * units[scope])
            counts[rule.name] = shard_series[rule.name]
            interval = (facts_interval(cfg, fam.name) if rule.fact else None) or \
                group_interval(cfg, fam.name)
            every[rule.name] = seconds(interval) if interval else EVALUATION_INTERVAL
    scraped = sum(l.total for l in lines.values() if l.type != "recorded")
    kept = {n: counts.get(n, 0) for n in tiers.keep}  # shard records and cluster-wide series
    sent = sum(v / every.get(n, SCRAPE_INTERVAL) for n, v in kept.items())
    glob = sum(lines[r.name].total for f in tiers.global_ for r in f.rules
               if getattr(r, "name", None) in lines and r.name not in shard_series)
    return {"shards": shards, "hosts": -(-s.hosts // shards),
            "shard_scraped": -(-scraped // shards),
            "shard_records": -(-sum(shard_series.values()) // shards),
            "scraped_per_s": scraped / SCRAPE_INTERVAL,
            "stored_per_s": (scraped - unread_buckets(list(lines.values()))) / SCRAPE_INTERVAL,
            "central_written": sum(kept.values()), "central_global": glob,
            "kept_names": len(tiers.keep), "central_per_s": sent}


def report(s: Shape, cfg: Config, shards: int) -> str:
    got = sizing(s, cfg, shards)
    shard = got["shard_scraped"] + got["shard_records"]
    central = got["central_written"] + got["central_global"]
    ratio = got["central_per_s"] / got["scraped_per_s"]
    gib = BYTES_PER_SERIES / 2**30
    return "\n".join([
        "",
        f"sharded over {shards} Prometheus shards by host (sharding.by; docs/sharding.md), at "
        f"a {SCRAPE_INTERVAL} s scrape and a {EVALUATION_INTERVAL} s evaluation interval "
        "where the config sets none:",
        f"each shard: ~{got['hosts']:,} hosts, {got['shard_scraped']:,} scraped series + "
        f"{got['shard_records']:,} shard-tier records = {shard:,}, "
        f"~{shard * gib:.1f} GiB head",
        f"the centre: {got['central_written']:,} series the shards write "
        f"({got['kept_names']} names, the keep-list) + {got['central_global']:,} the global "
        f"tier records (at most) = {central:,}",
        f"central ingest: {got['central_per_s']:,.0f} samples/s from the shards, "
        f"{ratio:.2%} of the {got['scraped_per_s']:,.0f} samples/s they scrape "
        f"({got['central_per_s'] / got['stored_per_s']:.1%} of what they store when they drop "
        "the unread buckets)",
        "time to the page: the single Prometheus' detection latency, plus the shards' remote "
        "write (its batch deadline, 5 s by default) and what the central ruler adds to each "
        "alert (docs/remote-rulers.md)",
    ]) + "\n"
