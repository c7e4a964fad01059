"""Boundary sensitivity: do the rules and the fixtures give the same answers whether a
window holds the sample at its left edge, and whether the samples fall on the evaluation
times?

Prometheus 3 made range selectors and subqueries left-open: at an evaluation time that
coincides with a sample, ``x[5m]`` holds one sample fewer than on 2.x, and ``[30m:5m]``
six points instead of seven. promtool evaluates a fixture at exact multiples of its
interval, with every input sample on one, so a fixture can pass on 2.42 and fail on 3.x,
or pass only because of where the samples happen to fall. Production groups evaluate at
an offset of their own from the scrapes. Two variants of every test, which must give the
same outcome:

- ``left-open``: every range and subquery window of the rules one millisecond shorter,
  which on promtool 2.42 is exactly 3.x's left-open window at those times;
- ``shifted``: every input sample half an interval later (the test's interval halved, a
  missing sample before each), so no sample lies on an evaluation time or a window's
  edge. The evaluations then see each sample up to one interval later, so a check that
  an alert fires is made one interval later.

``obsgen test --boundaries`` runs both, and both at once, on every test. The user's own
test files, whose annotations print values read at their own times, are shifted as an
outcome (``shifted_outcome``): every check one interval later, alerts compared by their
labels, values within ``TOLERANCE``.
"""
from __future__ import annotations

import re

from ..config import duration, seconds
from ..contract import M
from .series import series_name

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
WINDOW = re.compile(r"\[\s*([0-9][0-9smhdwy]*)\s*(:[^\]]*)?\]")
EPSILON = 0.001  # seconds: the finest step of a Prometheus duration

VARIANTS = {  # name -> (windows left-open, inputs shifted)
    "left-open windows": (True, False),
    "inputs half an interval late": (False, True),
    "both": (True, True),
}


def _shorter(m: re.Match) -> str:
    return f"[{duration(seconds(m.group(1)) - EPSILON)}{m.group(2) or ''}]"


def left_open(expr: str) -> str:
    """``expr`` with every range and subquery window one millisecond shorter (string
    literals, such as a regex's character class, left alone)."""
    out, last = [], 0
    for m in STRING.finditer(expr):
        out += [WINDOW.sub(_shorter, expr[last:m.start()]), m.group(0)]
        last = m.end()
    return "".join(out) + WINDOW.sub(_shorter, expr[last:])


def left_open_rules(docs: list[dict]) -> list[dict]:
    """Rule file documents with every rule's windows left-open."""
    return [{**d, "groups": [{**g, "rules": [{**r, "expr": left_open(str(r["expr"]))}
                                             for r in g["rules"]]}
                             for g in d.get("groups") or []]} for d in docs]


NUMBER = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|NaN|inf|nan)"
SERIES = re.compile(rf"^(?P<a>{NUMBER})(?:(?P<op>[-+])(?P<b>{NUMBER}))?x(?P<n>[0-9]+)$")


def expand(values: str) -> list[str]:
    """promtool's expanding notation, one entry per interval: ``a+bxn`` (n+1 values),
    ``axn`` (a, n+1 times), ``_xn`` (n missing), ``_``, ``stale`` and numbers."""
    out: list[str] = []
    for tok in str(values).split():
        if tok.startswith("_x"):
            out += ["_"] * int(tok[2:])
            continue
        m = SERIES.match(tok)
        if not m:
            out.append(tok)
            continue
        a, n = float(m.group("a")), int(m.group("n"))
        b = float(m.group("b") or 0) * (-1 if m.group("op") == "-" else 1)
        out += [_number(a + i * b) if b else m.group("a") for i in range(n + 1)]
    return out


def _number(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 2 ** 53 else repr(x)


def shifted(test: dict, interval: float) -> dict:
    """``test`` with every input sample ``interval``/2 later."""
    series = [{**s, "values": " ".join(v for x in expand(s["values"]) for v in ("_", x))}
              for s in test.get("input_series") or []]
    return {**test, "interval": duration(interval / 2), "input_series": series}



# A test of the user's own, shifted ------------------------------------------------------
# Relative: how far a value check may move when its inputs are shifted. The most any of
# obsgen's own value checks moves is 5.6% (an increase over 5m extrapolated from a first
# sample half an interval later); a count that loses its edge sample moves 1/n, 33% at 3.
TOLERANCE = 0.12
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _labels(text: str) -> tuple:
    """The labels of an ``exp_samples`` entry (``name{a="b"}`` or ``{a="b"}``) as a
    ``series_name`` key without the metric name (a bool comparison drops it)."""
    return (("__name__", ""), *((k, v) for k, v in LABEL.findall(text) if k != "__name__"))


def _literal(key: tuple, value: float) -> str:
    """A one-sample vector of ``value`` with the labels of ``key``."""
    out = f"vector({_number(value)})"
    for k, v in sorted(key[1:]):
        out = f'label_replace({out}, "{k}", "{v}", "", "")'
    return out


def _same_series(check: dict) -> list[dict]:
    """A value check as: the same series, and each finite value within ``TOLERANCE``."""
    expr, when = check["expr"], check["eval_time"]
    samples = [(_labels(s.get("labels", "")), s.get("value")) for s in check.get("exp_samples") or []]
    out = [{"expr": f"0 * (({expr}) == bool ({expr})) + 1", "eval_time": when,
            "exp_samples": [{"labels": series_name(ls), "value": 1} for ls, _ in samples]}]
    finite = [(ls, float(v)) for ls, v in samples
              if v is not None and abs(float(v)) != float("inf") and float(v) == float(v)]
    if finite:
        want = " or ".join(_literal(ls, v) for ls, v in finite)
        close = f"abs(({expr}) - ({want})) <= bool (abs({want}) * {TOLERANCE} + 1e-9)"
        out.append({"expr": close, "eval_time": when,
                    "exp_samples": [{"labels": series_name(ls), "value": 1} for ls, _ in finite]})
    return out


def _firing(check: dict) -> dict:
    """An alert check as the labels of the alerts firing (their annotations print values
    read at the shifted times)."""
    name = check["alertname"]
    exp = [{"labels": series_name(tuple({**(a.get("exp_labels") or {}), "__name__": M.ALERTS.key,
                                         "alertname": name, "alertstate": "firing"}.items())),
            "value": 1} for a in check.get("exp_alerts") or []]
    return {"expr": M.ALERTS.key + f'{{alertname="{name}", alertstate="firing"}}',
            "eval_time": check["eval_time"], "exp_samples": exp}


def shifted_outcome(test: dict, interval: float) -> dict:
    """``test`` with its inputs half an interval late (``shifted``) and every check one
    interval later, as the same outcome: the alerts firing with the same labels, each
    value check the same series with values within ``TOLERANCE`` (the shift moves each
    window's first and last sample, and with them extrapolation and ``time()``)."""
    later = lambda c: {**c, "eval_time": duration(seconds(str(c["eval_time"])) + interval)}
    checks = [_firing(later(c)) for c in test.get("alert_rule_test") or []]
    for c in test.get("promql_expr_test") or []:
        checks += _same_series(later(c))
    out = {k: v for k, v in shifted(test, interval).items() if k != "alert_rule_test"}
    return {**out, "promql_expr_test": checks} if checks else out
