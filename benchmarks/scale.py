"""Scale benchmark: what obsgen's rules and dashboards cost in a real Prometheus for one
training job of 1,024 to 16,384 ranks, against the reference document's naive rules on
the same data, in the same run.

    python -m benchmarks.scale             # make bench: 1,024, 4,096 and 16,384 ranks
    python -m benchmarks.scale --quick     # make bench-quick: 256 ranks, a few minutes
    python -m benchmarks.scale --report    # rewrite RESULTS.md and the plot from saved results

For each size it

1. streams the job's series as OpenMetrics (``benchmarks/stream.py``), one shard of
   hosts at a time, into ``promtool tsdb create-blocks-from openmetrics``;
2. writes the recorded series the rules and panels read: the recording rules are
   evaluated by Prometheus itself over the whole history with ``promtool tsdb
   create-blocks-from rules``, one dependency level at a time (a rule that reads another
   rule's series needs that series in the TSDB first), restarting Prometheus between
   levels so it sees the new blocks;
3. lets Prometheus compact the overlapping blocks into one per time range, as a server
   that had ingested the data would hold it;
4. starts a fresh Prometheus on loopback and times, through the HTTP API with
   ``stats=all``, every rule of every group at five evaluation times (the last 8 minutes,
   2 minutes apart) after one untimed warm-up round, alternating obsgen's and the naive
   suite's groups from round to round so load from other processes falls on both, and
   every dashboard panel query over the last hour as Grafana sends it (30 s step, or the
   panel's min interval when longer; ``$__rate_interval`` = max(2m, step + 30 s) for a
   30 s scrape), with the panels as the defaults render them and, for the panels that
   read differently, as ``dashboards.records`` does (its groups timed as a suite of their
   own); medians of the rounds. The time is
   Prometheus' own ``evalTotalTime`` (what the ruler spends in the engine, no HTTP or
   JSON), with the samples each query read, which no load changes;
5. measures peak RSS (``VmHWM``): one fresh Prometheus per suite evaluating its rules at
   the five times, and the timing process after everything.

``--quick`` (256 ranks, for ``make e2e``) skips step 3: Prometheus only starts merging
blocks a minute after it starts, and a smoke test need not wait for it.

Every Prometheus is stopped and the size's TSDB deleted in ``finally`` blocks.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from obsgen import pipeline
from obsgen.registry import PANEL_RECORDS
from obsgen.config import DEFAULTS, ONE_PROMETHEUS, Config, seconds
from obsgen.dashboards import PanelQuery, panel_queries
from obsgen.promql import identifiers

from . import naive, prom, stream
from .measures import RECORDS, family

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
SIZES = (1024, 4096, 16384)
QUICK = 256
BACKFILL_ARGS = ("--query.timeout=30m",)
EVAL_TIMES = tuple(stream.END - m * 60 for m in (8, 6, 4, 2, 0))
PANEL_RANGE = 3600
PANEL_STEP = 30  # Grafana's step for 1 h: the data source's 30 s scrape, or the panel's min interval


def panel_step(q: PanelQuery) -> int:
    """The step Grafana queries the panel at over the last hour: the scrape interval, or
    the panel's min interval when that is longer (1 h / the panel's ~1,000 points is less)."""
    return max(PANEL_STEP, int(seconds(q.interval)) if q.interval else 0)


def rate_interval(q: PanelQuery) -> str:
    """Grafana's $__rate_interval for a 30 s scrape: max(4 x scrape, step + scrape)."""
    return f"{max(4 * stream.SCRAPE, panel_step(q) + stream.SCRAPE)}s"


# suites -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    group: str
    kind: str  # record or alert
    name: str
    expr: str
    interval: float = stream.SCRAPE  # the group's evaluation interval, seconds


def default_config() -> Config:
    """The defaults as docs/guides/sizing.md sets them for a large job on one Prometheus,
    which evaluates them over its own TSDB, as here: ``ruler: prometheus`` and the mesh
    facts every 4m. ``benchmarks/baseline/rules.yaml`` can hold the straggler family
    rendered for any ruler (the default, ``ruler: any``)."""
    cfg = Config(copy.deepcopy(DEFAULTS), "(defaults, one Prometheus)")
    cfg.data.update(copy.deepcopy(ONE_PROMETHEUS))
    return cfg


def config_changes() -> dict:
    """The keys the benchmark's config sets apart from obsgen's defaults."""
    data = default_config().data
    return {k: v for k, v in data.items() if DEFAULTS.get(k) != v}


def records_config() -> Config:
    """The defaults with dashboards.records: the panels family, and the panels reading it."""
    cfg = default_config()
    cfg.data["dashboards"]["records"] = True
    return cfg


def records_suites(defaults: list[PanelQuery]) -> tuple[list[Rule], list[PanelQuery]]:
    """With dashboards.records: the panels family's groups (measured apart: the default
    renders without it) and every query of the panels that read differently."""
    cfg = records_config()
    rules = [r for r in obsgen_rules(cfg) if family(r.group) == PANEL_RECORDS]
    same = set(defaults)
    qs = panels(cfg)
    changed = {(q.dashboard, q.panel) for q in qs if q not in same}  # every query of those
    return rules, [q for q in qs if (q.dashboard, q.panel) in changed]


def _groups(doc: dict) -> list[Rule]:
    out = []
    for g in doc["groups"]:
        for r in g["rules"]:
            kind = "record" if "record" in r else "alert"
            out.append(Rule(g["name"], kind, r.get("record") or r["alert"], r["expr"],
                            seconds(g["interval"]) if g.get("interval") else stream.SCRAPE))
    return out


def obsgen_rules(cfg: Config) -> list[Rule]:
    """The rules `obsgen render` writes for ``cfg``, group by group."""
    files = pipeline.render_all(cfg)
    out = []
    for path in sorted(p for p in files if p.startswith("rules/") and p.endswith(".yaml")):
        out.extend(_groups(yaml.safe_load(files[path])))
    return out


def rules_sha() -> str:
    """A fingerprint of the rules measured (obsgen's, at the defaults): two runs compare
    their times only when they measured the same rules."""
    text = "\n".join(f"{r.group} {r.name} {r.interval} {r.expr}" for r in obsgen_rules(default_config()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def naive_rules() -> list[Rule]:
    return _groups(naive.rules_file())


def panels(cfg: Config) -> list[PanelQuery]:
    return panel_queries(cfg)


BASELINE = HERE / "baseline"


def before_rules(current: list[Rule] | None = None) -> list[Rule]:
    """The rule groups this benchmark changed, as they were before (if a baseline is kept),
    group names prefixed ``before:``. A series they record under a name the current rules
    record differently is renamed ``<name>_before`` (and so are the reads of it), so both
    versions can be backfilled side by side."""
    path = BASELINE / "rules.yaml"
    if not path.exists():
        return []
    old = _groups(yaml.safe_load(path.read_text()))
    now = {r.name: " ".join(r.expr.split())
           for r in current or obsgen_rules(default_config()) if r.kind == "record"}
    clash: set[str] = set()

    def rename(text: str) -> str:
        for name in clash:
            text = re.sub(rf"(?<![\w:]){re.escape(name)}(?![\w:])", name + "_before", text)
        return text

    # to a fixed point: a record that reads a renamed one differs from its current self too
    while True:
        more = {r.name for r in old if r.kind == "record" and r.name in now
                and now[r.name] != " ".join(rename(r.expr).split())} - clash
        if not more:
            break
        clash |= more

    return [Rule("before:" + r.group, r.kind, rename(r.name) if r.kind == "record" else r.name,
                 rename(r.expr), r.interval) for r in old]


def before_panels() -> list[PanelQuery]:
    path = BASELINE / "panels.json"
    if not path.exists():
        return []
    return [PanelQuery(**q) for q in json.loads(path.read_text())]


def recording(rule_sets: list[list[Rule]]) -> list[Rule]:
    """The recording rules of several suites, each name once (same name, same expr)."""
    out: dict[str, Rule] = {}
    for rules in rule_sets:
        for r in rules:
            if r.kind != "record":
                continue
            if r.name in out and " ".join(out[r.name].expr.split()) != " ".join(r.expr.split()):
                raise ValueError(f"{r.name} is recorded with two expressions; rename one")
            out.setdefault(r.name, r)
    return list(out.values())


def panel_expr(q: PanelQuery, job_id: str) -> str:
    return q.promql(job_id, rate_interval=rate_interval(q), range_="1h",
                    interval=f"{panel_step(q)}s")


def levels(rules: list[Rule]) -> list[list[Rule]]:
    """Recording rules by dependency level: level 0 reads only scraped series, level k
    reads a series recorded at level k-1."""
    records = {r.name: r for r in rules if r.kind == "record"}
    depth: dict[str, int] = {}

    def level(name: str, seen=()) -> int:
        if name not in depth:
            if name in seen:
                raise ValueError(f"recording rules form a cycle through {name}")
            deps = identifiers(records[name].expr) & set(records) - {name}
            depth[name] = 1 + max((level(d, (*seen, name)) for d in deps), default=-1)
        return depth[name]

    out: list[list[Rule]] = []
    for name, rule in records.items():
        d = level(name)
        while len(out) <= d:
            out.append([])
        out[d].append(rule)
    return out


def read_families(exprs: list[str]) -> frozenset[str]:
    names = set()
    for e in exprs:
        if "__name__" in e:  # a query by name pattern could read anything
            return frozenset(stream.Bench(8, pp=1).series())
        names |= identifiers(e)
    return frozenset(names)


# building the TSDB ---------------------------------------------------------------------------
def into_blocks(paths: Iterable[Path], data: Path, log) -> None:
    """promtool writes each OpenMetrics file of ``paths`` into blocks in ``data``, and the
    file is removed once read. ``paths`` is lazy: the next file is written while promtool
    reads the one before, so at most two exist at once."""
    promtool = prom.binary("promtool")
    pending: tuple[subprocess.Popen, Path] | None = None

    def finish(p: tuple[subprocess.Popen, Path]) -> None:
        proc, path = p
        if proc.wait() != 0:
            raise RuntimeError(f"promtool failed on {path}; see {log.name}")
        path.unlink()

    try:
        for path in paths:
            if pending:
                finish(pending)
            pending = (subprocess.Popen([promtool, "tsdb", "create-blocks-from", "openmetrics",
                                         "-q", str(path), str(data)], stdout=log, stderr=log), path)
        if pending:
            finish(pending)
            pending = None
    finally:
        if pending and pending[0].poll() is None:
            pending[0].kill()
            pending[0].wait()


def backfill_raw(b: stream.Bench, data: Path, work: Path, read: frozenset[str],
                 shard_ranks: int, log) -> dict:
    """Stream the job into blocks, a shard of hosts at a time (into_blocks)."""
    totals: dict[str, int] = {}
    samples = 0
    biggest = 0

    def files():
        nonlocal samples, biggest
        # The job-level series span the whole job history (several 2 h block ranges);
        # promtool reads its input once per block range, so they go in a file of their own.
        parts: list[range | None] = [None, *stream.shards(b, shard_ranks)]
        for i, ranks in enumerate(parts):
            path = work / f"shard-{i}.om"
            with open(path, "w", buffering=1 << 22) as fh:
                if ranks is None:
                    w = stream.write(b, fh, range(0), job=True, read=read)
                else:
                    w = stream.write(b, fh, ranks, job=False, read=read)
            biggest = max(biggest, path.stat().st_size)
            samples += w.samples
            for k, v in w.written.items():
                totals[k] = totals.get(k, 0) + v
            yield path

    t0 = time.monotonic()
    try:
        into_blocks(files(), data, log)
    finally:
        for p in work.glob("shard-*.om"):
            p.unlink()
    return {"series": totals, "samples": samples, "largest_shard_bytes": biggest,
            "seconds": time.monotonic() - t0}


LONG = frozenset({"train_grad_norm", "train_loss", "train_nonfinite"})


def backfill_recorded(b: stream.Bench, data: Path, work: Path, rules: list[Rule], log,
                      long: frozenset[str] = LONG, args: tuple[str, ...] = BACKFILL_ARGS) -> dict:
    """Recorded series over the job's whole history, evaluated by Prometheus, level by
    level. ``long``: the series (scraped or recorded before) that span the whole job
    history; what reads them is recorded over it too."""
    promtool = prom.binary("promtool")
    t0 = time.monotonic()
    lv = levels(rules)
    # Series derived from the job-level gradient norm are recorded over the whole job
    # history (their rules read 6 h); the others over the ranks' window, the only time
    # their inputs exist.
    long = set(long)
    for d, level_rules in enumerate(lv):
        spans: dict[int, list[Rule]] = {}
        for r in level_rules:
            if identifiers(r.expr) & long:
                long.add(r.name)
                spans.setdefault(b.start, []).append(r)
            else:
                spans.setdefault(b.end - b.rank_history, []).append(r)
        # promtool reads each rule over the whole window in one range query: at 16,384 ranks
        # on a loaded machine that outlasted Prometheus' default 2m query timeout (a 503)
        with prom.Prometheus(data, work / "prometheus.log", args) as p:
            for i, (start, span_rules) in enumerate(sorted(spans.items())):
                rule_file = work / f"recording-{d}-{i}.yaml"
                rule_file.write_text(yaml.safe_dump({"groups": [{"name": f"level-{d}", "rules": [
                    {"record": r.name, "expr": r.expr} for r in span_rules]}]}, sort_keys=False))
                out = work / f"recorded-{d}-{i}"
                res = subprocess.run(
                    [promtool, "tsdb", "create-blocks-from", "rules", "-q", f"--url={p.url}",
                     f"--start={start}", f"--end={b.end}", f"--eval-interval={stream.SCRAPE}s",
                     f"--output-dir={out}", str(rule_file)], stdout=log, stderr=log)
                if res.returncode != 0:
                    raise RuntimeError(f"promtool could not backfill level {d}; see {log.name}")
                rule_file.unlink()
        for out in work.glob(f"recorded-{d}-*"):
            for block in out.iterdir():
                shutil.move(str(block), data / block.name)
            shutil.rmtree(out)
    return {"levels": len(lv), "seconds": time.monotonic() - t0}


# measuring -----------------------------------------------------------------------------------
@dataclass
class Measure:
    times: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    samples: int = 0
    peak: int = 0
    series: int = 0
    error: str = ""

    def add(self, t: prom.Timing) -> None:
        self.times.append(t.seconds)
        self.walls.append(t.wall)
        self.samples, self.peak, self.series = t.samples, t.peak, t.series

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")


def _run(p: prom.Prometheus, fn, *args) -> prom.Timing | str:
    try:
        return fn(*args)
    except prom.QueryError as e:
        return str(e)


def time_rules(p: prom.Prometheus, rules: list[Rule], at: float, out: dict) -> None:
    for r in rules:
        m = out.setdefault((r.group, r.name, at), Measure())
        t = _run(p, p.query, r.expr, at)
        if isinstance(t, str):
            m.error = t
        else:
            m.add(t)


def time_panels(p: prom.Prometheus, qs: list[PanelQuery], job_id: str, out: dict) -> None:
    for q in qs:
        m = out.setdefault((q.dashboard, q.panel, q.ref), Measure())
        expr = panel_expr(q, job_id)
        if q.instant:
            t = _run(p, p.query, expr, stream.END)
        else:
            t = _run(p, p.query_range, expr, stream.END - PANEL_RANGE, stream.END, panel_step(q))
        if isinstance(t, str):
            m.error = t
        else:
            m.add(t)


def measure(b: stream.Bench, data: Path, work: Path, suites: dict[str, list[Rule]],
            boards: dict[str, list[PanelQuery]], repeats: int, log,
            panel_rounds: int | None = None,
            memory_suites: tuple[str, ...] = ("obsgen", "naive")) -> dict:
    rules: dict = {}
    pans: dict = {}
    with prom.Prometheus(data, work / "prometheus.log") as p:
        # warm-up: every query once, discarded (page cache, Go heap)
        scratch: dict = {}
        for rs in suites.values():
            time_rules(p, rs, EVAL_TIMES[-1], scratch)
        for rnd in range(repeats):
            names = list(suites) if rnd % 2 == 0 else list(reversed(suites))
            for at in EVAL_TIMES:
                for s in names:
                    time_rules(p, suites[s], at, rules.setdefault(s, {}))
            if rnd >= (repeats if panel_rounds is None else panel_rounds):
                continue
            for s in (list(boards) if rnd % 2 == 0 else list(reversed(boards))):
                time_panels(p, boards[s], b.job_id, pans.setdefault(s, {}))
        # the baseline's before-only series (raw before_*, records *_before) are not the
        # job's: a TSDB kept from a run with another baseline holds other ones
        other = f'__name__!~"{stream.BEFORE}.+|.+_before"'
        counts = {
            "all": p.value(f'count({{__name__=~".+", {other}}})', stream.END),
            "recorded": p.value(f'count({{__name__=~"[a-z_]+:.+", {other}}})', stream.END),
        }
        all_peak = p.peak_rss()
    memory = {}
    for s in memory_suites:
        with prom.Prometheus(data, work / "prometheus.log") as p:
            idle = p.rss()
            for at in EVAL_TIMES:
                time_rules(p, suites[s], at, {})
            rules_peak = p.peak_rss()
            memory[s] = {"idle_rss": idle, "rules_peak_rss": rules_peak}
    # the process that ran every suite, repeatedly, and every panel
    if "obsgen" in memory:
        memory["obsgen"]["panels_peak_rss"] = all_peak
    return {"rules": rules, "panels": pans, "memory": memory, "counts": counts}


def group_times(measures_by_suite: dict[str, dict], suites: dict[str, list[Rule]]) -> dict[str, dict]:
    """Per group of each suite (its Measures by (group, rule, time), as time_rules fills
    them): the median over (evaluation time, repeat) of the sum of its rules' times, in
    ms; samples read, the most held at once, each rule's median and the queries' errors."""
    groups: dict[str, dict] = {}
    for s, rs in suites.items():
        measures = measures_by_suite[s]
        for g in dict.fromkeys(r.group for r in rs):
            members = [r for r in rs if r.group == g]
            totals, samples, peak, errors, per_rule = [], [], 0, [], {}
            for at in EVAL_TIMES:
                ms = [measures[(g, r.name, at)] for r in members]
                errors += [f"{r.name}: {m.error}" for r, m in zip(members, ms) if m.error]
                n = min(len(m.times) for m in ms)
                totals += [sum(m.times[i] for m in ms) for i in range(n)]
                samples.append(sum(m.samples for m in ms))
                peak = max([peak] + [m.peak for m in ms])
            for r in members:
                per_rule[r.name] = statistics.median(
                    [t for at in EVAL_TIMES for t in measures[(g, r.name, at)].times] or [float("nan")])
            groups[g] = {"suite": s, "ms": 1000 * statistics.median(totals) if totals else None,
                         "interval": members[0].interval,
                         "samples": statistics.median(samples), "peak_samples": peak,
                         "rules": {k: 1000 * v for k, v in per_rule.items()},
                         "errors": sorted(set(errors))}
    return groups


def summarize(b: stream.Bench, raw: dict, suites: dict[str, list[Rule]],
              boards: dict[str, list[PanelQuery]], built: dict) -> dict:
    """Per group: median over (evaluation time, repeat) of the sum of its rules' times."""
    groups = group_times(raw["rules"], suites)
    panels_out: dict[str, dict] = {}
    for s, qs in boards.items():
        for q in qs:
            m = raw["panels"][s][(q.dashboard, q.panel, q.ref)]
            e = panels_out.setdefault(s, {}).setdefault(
                f"{q.dashboard} / {q.panel}",
                {"ms": 0.0, "samples": 0, "series": 0, "queries": 0, "errors": []})
            e["ms"] += 1000 * m.median if m.times else 0.0
            e["samples"] += m.samples
            e["series"] += m.series
            e["queries"] += 1
            if m.error:
                e["errors"].append(f"{q.ref}: {m.error}")
    return {"ranks": b.ranks, "shape": {"tp": b.tp, "pp": b.pp, "dp": b.ranks // (b.tp * b.pp)},
            "series_per_rank": b.series(), "emitters": stream.emitters(b), "built": built,
            "groups": groups,
            "panels": panels_out, "memory": raw["memory"], "counts": raw["counts"]}


# one size ------------------------------------------------------------------------------------
def run_size(n: int, work: Path, repeats: int, shard_ranks: int, keep: bool,
             compact: bool = True, panel_rounds: int | None = None,
             reuse: bool = False, buckets: bool = True) -> dict:
    cfg = default_config()
    suites = {"obsgen": obsgen_rules(cfg), "naive": naive_rules()}
    boards = {"obsgen": panels(cfg)}
    suites[RECORDS], boards[RECORDS] = records_suites(boards["obsgen"])
    if before_rules(suites["obsgen"]):
        suites["before"] = before_rules(suites["obsgen"])
    if before_panels():
        boards["before"] = before_panels()
    exprs = [r.expr for rs in suites.values() for r in rs]
    exprs += [panel_expr(q, "x") for qs in boards.values() for q in qs]
    read = read_families(exprs)
    b = stream.Bench(n, buckets=buckets)
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"tsdb-{n}"
    built_path = work / f"built-{n}.json"
    reused = reuse and data.exists() and built_path.exists()
    if not reused:
        if data.exists():
            shutil.rmtree(data)
        data.mkdir()
        built_path.unlink(missing_ok=True)
    built: dict = json.loads(built_path.read_text()) if reused else {}
    t0 = time.monotonic()
    with open(work / f"build-{n}.log", "a" if reused else "w") as log:
        try:
            if reused:
                # built by a --keep run of the same recording rules (built-N.json says when)
                _say(f"{n} ranks: reusing {data} (built {built.get('built_at', '?')})")
                built["reused"] = True
            else:
                _say(f"{n} ranks: streaming series into blocks")
                built["raw"] = backfill_raw(b, data, work, read, shard_ranks, log)
                _say(f"{n} ranks: recorded series, level by level")
                built["recorded"] = backfill_recorded(b, data, work,
                                                      recording(list(suites.values())), log)
                if compact:
                    _say(f"{n} ranks: compacting")
                    built["compaction_seconds"] = prom.compact(data, work / "prometheus.log")
                else:
                    built["compaction_seconds"] = None
                built["tsdb_bytes"] = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
                built["built_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                built["total_seconds"] = time.monotonic() - t0
                built_path.write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")
            _say(f"{n} ranks: measuring ({repeats} repeats)")
            t1 = time.monotonic()
            raw = measure(b, data, work, suites, boards, repeats, log, panel_rounds)
            built["measure_seconds"] = time.monotonic() - t1
            built["rounds"] = {"rules": repeats, "panels": panel_rounds or repeats}
        finally:
            if not keep:
                shutil.rmtree(data, ignore_errors=True)
    return summarize(b, raw, suites, boards, built)


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# the report ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"{QUICK} ranks, 2 repeats")
    ap.add_argument("--ranks", type=int, nargs="+", help=f"sizes (default {SIZES})")
    ap.add_argument("--repeats", type=int, default=2,
                    help="timed rounds (after one warm-up round of the rules)")
    ap.add_argument("--panel-rounds", type=int, default=None,
                    help="timed rounds of the panels (default: --repeats); at 16,384 ranks "
                         "a round of every panel takes minutes")
    ap.add_argument("--shard-ranks", type=int, default=2048,
                    help="ranks per OpenMetrics shard (bounds disk and promtool memory)")
    ap.add_argument("--work", type=Path, default=None,
                    help="scratch directory (TSDBs, shard files; git-ignored); default "
                         "build/bench, build/bench-quick with --quick, so make e2e's quick run "
                         "cannot delete the shards of a full run under way")
    ap.add_argument("--results", type=Path, default=None,
                    help="JSON results (default: benchmarks/results.json, quick: under --work); "
                         "given, RESULTS.md and scale.png are written beside it")
    ap.add_argument("--report", action="store_true", help="only rewrite the report from --results")
    ap.add_argument("--keep", action="store_true", help="keep the TSDBs under --work")
    ap.add_argument("--drop-buckets", action="store_true",
                    help="a job whose histogram _bucket series are dropped at the scrape "
                         "(examples/prometheus/drop-unread-buckets.yaml); with --results "
                         "elsewhere, to compare with a run that keeps them")
    ap.add_argument("--reuse", action="store_true",
                    help="measure on a TSDB a --keep run left under --work (same recording "
                         "rules) instead of building it again")
    args = ap.parse_args(argv)
    if args.work is None:
        args.work = ROOT / "build" / ("bench-quick" if args.quick else "bench")
    from . import report

    sizes = (QUICK,) if args.quick else tuple(args.ranks or SIZES)
    repeats = args.repeats
    results_path = args.results or (args.work / "quick.json" if args.quick else HERE / "results.json")
    # the committed report sits beside the committed results; --results elsewhere (an
    # experiment) gets its report beside it, and benchmarks/RESULTS.md is left alone
    report_dir = results_path.parent if args.results else HERE
    if args.report:
        report.write(json.loads(results_path.read_text()), report_dir)
        return 0
    t0 = time.monotonic()
    args.work.mkdir(parents=True, exist_ok=True)
    results = {"sizes": {}, "machine": report.machine(), "rules_sha": rules_sha(),
               "config": config_changes()}
    if results_path.exists() and not args.quick:
        results = json.loads(results_path.read_text())
        results["machine"], results["rules_sha"] = report.machine(), rules_sha()
        results["config"] = config_changes()
    for n in sizes:
        # --quick skips the compaction (Prometheus waits a minute before it starts): it
        # measures on the backfilled blocks as they are, which is fine for a smoke test
        results["sizes"][str(n)] = run_size(n, args.work, repeats, args.shard_ranks, args.keep,
                                            compact=not args.quick,
                                            panel_rounds=args.panel_rounds,
                                            reuse=args.reuse, buckets=not args.drop_buckets)
        results_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    results["elapsed_seconds"] = time.monotonic() - t0
    results_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if args.quick:
        print(report.summary(results))
        bad = report.errors(results)
        print(f"quick benchmark: {time.monotonic() - t0:.0f} s", file=sys.stderr)
        return 1 if bad else 0
    # from the saved results, as --report reads them: the same file either way (JSON keeps
    # its keys sorted, where the run's dicts keep the order they were measured in)
    results = json.loads(results_path.read_text())
    report.write(results, report_dir)
    print(report.summary(results))
    return 1 if report.errors(results) else 0


if __name__ == "__main__":
    sys.exit(main())
