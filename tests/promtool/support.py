"""Build promtool test files from case tables.

A case is a synthetic job (obsgen.synth) plus checks. Its input series are the job's
scrapes, every series the family reads, with scrape labels, all default histogram
buckets, noise, restarts and staleness markers, encoded in promtool's series notation.

promtool compares alert annotations exactly, so a check gives the alert's labels and
the value the description prints; the expected annotations are then rendered from the
rule's own templates by ``render_template`` (the subset of Go templates obsgen uses).
The value a check names comes from the scenario (20% slower, 6 ranks missing), never
from running the rules, so a wrong expression fails the test.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import yaml

from obsgen import synth
from obsgen.render import header
from obsgen.scenarios.series import SCRAPE, encode, input_series, series_name  # noqa: F401
from obsgen.scenarios.series import exact as _exact, fmt as _fmt, minutes as _minutes  # noqa: F401


# Checks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fired:
    """One alert expected to be firing: its expression labels and its printed value, and
    the ranks its description lists from a query (``listed``). A value of None is one that
    depends on whether a window holds its left edge's sample (Prometheus 3 drops it): the
    check is then on the ALERTS series, labels only."""
    labels: dict[str, str]
    value: float | str | None
    listed: tuple[int, ...] = ()


@dataclass(frozen=True)
class At:
    """At ``minute``, ``alert`` fires exactly ``alerts`` (none when empty)."""
    minute: float
    alert: str
    alerts: tuple[Fired, ...] = ()


@dataclass(frozen=True)
class Never:
    """``alert`` fires at no evaluation between ``start`` and ``end`` minutes (checked
    every ``every`` minutes; None means the whole case)."""
    alert: str
    start: float = 0
    end: float | None = None
    every: float = 2.5


@dataclass(frozen=True)
class Value:
    """``expr`` evaluates to ``samples`` ({labels selector: value}) at ``minute``."""
    minute: float
    expr: str
    samples: dict[str, float] = field(default_factory=dict)


@dataclass
class Case:
    jobs: list[synth.Job]
    minutes: float
    checks: list
    # Scrapes land half a scrape interval after the rules' evaluation times (each sample
    # of scrape time t at t + 15 s), as a real server's scrapes and rule evaluations run
    # on phases of their own: no sample sits on a window's left edge, which Prometheus 2
    # holds and 3 leaves out, so both count the same samples.
    offset: bool = False


# Go template subset ---------------------------------------------------------------------
def go_float(v: float) -> str:
    """fmt's %v of a float64 (shortest repr, exponent from 1e21 or below 1e-4)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    r = repr(v)
    if "e" in r:
        mant, exp = r.split("e")
        return f"{mant}e{int(exp):+03d}"
    return r


def humanize(v: float) -> str:
    if v == 0 or math.isnan(v) or math.isinf(v):
        return "%.4g" % v
    prefix = ""
    if abs(v) >= 1:
        for p in "kMGTPEZY":
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
    else:
        for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
            if abs(v) >= 1:
                break
            prefix, v = p, v * 1000
    return "%.4g%s" % (v, prefix)


def humanize_duration(v: float) -> str:
    sign = "-" if v < 0 else ""
    v = abs(v)
    if v >= 1:
        d = int(v)
        s, m, h, days = d % 60, d // 60 % 60, d // 3600 % 24, d // 86400
        if days:
            return f"{sign}{days}d {h}h {m}m {s}s"
        if h:
            return f"{sign}{h}h {m}m {s}s"
        if m:
            return f"{sign}{m}m {s}s"
        return f"{sign}{'%.4g' % v}s"
    if v == 0:
        return "0s"
    return f"{sign}{'%.4g' % (v * 1000)}ms"


_ACTION = re.compile(r"\{\{\s*(.*?)\s*\}\}")


_QUERY = re.compile(r"\{\{ range query `[^`]*` \| sortByLabel \"\w+\" \}\}.*?\{\{ end \}\}\{\{ end \}\}")


def render_template(text: str, labels: dict[str, str], value: float | str,
                    listed: tuple[int, ...] = ()) -> str:
    """Render the Go-template subset used in obsgen annotations. A ``range query`` block
    (the series an alert lists, sorted by a label as text) prints ``listed``."""
    text = _QUERY.sub(lambda m: "".join(f" {r}" for r in sorted(map(str, listed))), text)
    out, stack, pos = [], [], 0  # stack of (label value or None) for `with`
    emitting = lambda: all(v for v in stack)
    for m in _ACTION.finditer(text):
        if emitting():
            out.append(text[pos:m.start()])
        pos = m.end()
        action = m.group(1)
        if action.startswith("with $labels."):
            stack.append(labels.get(action.split(".", 1)[1], ""))
        elif action == "end":
            stack.pop()
        elif not emitting():
            continue
        elif action == ".":
            out.append(stack[-1])
        elif action.startswith("$labels."):
            out.append(labels.get(action.split(".", 1)[1], ""))
        elif isinstance(value, str):
            out.append(value)  # the check gave the printed text itself
        elif action == "$value":
            out.append(go_float(value))
        elif action == "$value | humanize":
            out.append(humanize(value))
        elif action == "$value | humanizePercentage":
            out.append("%.4g%%" % (value * 100))
        elif action == "$value | humanizeDuration":
            out.append(humanize_duration(value))
        elif (pm := re.fullmatch(r'printf "(%[^"]*)" \$value', action)):
            out.append(pm.group(1) % value)
        else:
            raise ValueError(f"template action not supported by the fixture renderer: {action}")
    out.append(text[pos:])
    return "".join(out)


# Test file ----------------------------------------------------------------------------
def _alerts_by_name(rule_docs: list[dict]) -> dict[str, dict]:
    return {r["alert"]: r for doc in rule_docs for g in doc["groups"] for r in g["rules"]
            if "alert" in r}


def build_file(family: str, rule_files: list[str], rule_docs: list[dict], reads: set[str],
               cases: dict[str, Case], source: str,
               group_eval_order: list[str], every: str | None = None) -> str:
    """The promtool test file of ``family``, its groups evaluated in ``group_eval_order`` at
    each time (promtool picks an order of its own per run otherwise), every ``every``
    (default: every scrape, 30 s)."""
    alerts = _alerts_by_name(rule_docs)
    tests = []
    for sentence, case in cases.items():
        alert_tests, expr_tests = [], []
        for check in case.checks:
            if isinstance(check, At) and any(f.value is None for f in check.alerts):
                rule = alerts[check.alert]
                firing = {"__name__": "ALERTS", "alertname": check.alert, "alertstate": "firing"}
                expr_tests.append({
                    "expr": series_name(tuple(firing.items())), "eval_time": _minutes(check.minute),
                    "exp_samples": [{"labels": series_name(tuple(
                        {**f.labels, **rule["labels"], **firing}.items())), "value": 1}
                        for f in check.alerts]})
            elif isinstance(check, At):
                rule = alerts[check.alert]
                exp = []
                for f in check.alerts:
                    labels = {**f.labels, **rule["labels"]}
                    exp.append({
                        "exp_labels": labels,
                        "exp_annotations": {k: render_template(v, labels, f.value, f.listed)
                                            for k, v in rule["annotations"].items()},
                    })
                alert_tests.append({"eval_time": _minutes(check.minute), "alertname": check.alert,
                                    "exp_alerts": exp})
            elif isinstance(check, Never):
                end = case.minutes if check.end is None else check.end
                m = check.start
                while m <= end + 1e-9:
                    alert_tests.append({"eval_time": _minutes(m), "alertname": check.alert,
                                        "exp_alerts": []})
                    m += check.every
            elif isinstance(check, Value):
                expr_tests.append({"expr": check.expr, "eval_time": _minutes(check.minute),
                                   "exp_samples": [{"labels": k, "value": v}
                                                   for k, v in check.samples.items()]})
        alert_tests.sort(key=lambda t: (t["alertname"], _seconds(t["eval_time"])))
        series = input_series(case.jobs, case.minutes, reads)
        if case.offset:
            series = [{**s, "values": half_interval_later(s["values"])} for s in series]
        test = {"name": sentence, "interval": f"{SCRAPE // 2 if case.offset else SCRAPE}s",
                "input_series": series}
        if alert_tests:
            test["alert_rule_test"] = alert_tests
        if expr_tests:
            test["promql_expr_test"] = expr_tests
        tests.append(test)
    doc = {"rule_files": rule_files, "evaluation_interval": every or f"{SCRAPE}s",
           "group_eval_order": list(group_eval_order), "tests": tests}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when available: 10x faster
    body = yaml.dump(doc, Dumper=dumper, sort_keys=False, width=1 << 20, allow_unicode=True)
    return header(source) + body


def half_interval_later(values: str) -> str:
    """promtool series values every SCRAPE s as values every SCRAPE / 2 s, each one half
    an interval later: ``a b`` -> ``_ a _ b`` (runs expanded)."""
    out = []
    for tok in values.split():
        m = re.fullmatch(r"(.+?)x(\d+)", tok)
        if m and not tok.startswith("_"):
            start, n = m.group(1), int(m.group(2))
            step = re.fullmatch(r"(-?[^+-]+)([+-])(.+)", start)
            base, delta = (float(step.group(1)), float(step.group(2) + step.group(3))) if step \
                else (float(start), 0.0)
            out.extend(f"_ {_fmt(base + k * delta)}" for k in range(n + 1))
        elif m or tok == "_":
            n = int(m.group(2)) if m else 1
            out.extend(["_ _"] * n)
        else:
            out.append(f"_ {tok}")
    return " ".join(out)


def _seconds(d: str) -> int:
    m = re.fullmatch(r"(\d+)m(?:(\d+)s)?", d)
    return int(m.group(1)) * 60 + int(m.group(2) or 0)


def sample(job: synth.Job, metric: str, minute: float, rank: int | None = None) -> float:
    """The value of ``metric`` in the job's scrape at ``minute``, as the fixture encodes it
    (for checks whose description prints an input value, e.g. a gradient norm)."""
    for scrape in job.run(until=minute * 60):
        if abs(scrape.time - minute * 60) > 1e-6:
            continue
        for key, value in scrape.samples.items():
            labels = dict(key)
            if labels["__name__"] == metric and (rank is None or labels["rank"] == str(rank)):
                return float(_fmt(value)) if isinstance(value, float) else value
    raise LookupError(f"{metric} has no sample at minute {minute}")
