"""Building blocks for PromQL: selectors, grouping clauses and literals, with the config's
renames and extra selector applied in one place.

Families write expressions as f-strings over a ``Ctx``::

    f"sum {c.by(L.job_id, L.rank)} (rate({c.m(M.train_step_seconds, '_count')}[{c.w('rate')}]))"

so no metric or label name is spelled outside the contract, and the extra selector's
labels (e.g. ``cluster``) are kept by every aggregation: recorded series of two clusters
evaluated by one ruler never collide.
"""
from __future__ import annotations

import math
import re

from . import contract
from .config import Config


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(value: str) -> str:
    """A double-quoted string literal that means exactly ``value`` in PromQL, MetricsQL and
    Go templates (all read Go's escapes).

    Quote, backslash and every non-printable character are escaped; the latter as
    ``\\uXXXX``, so no raw NEL or line separator reaches a YAML file, where a YAML 1.1
    parser such as promtool's would read it as a line break inside the expression."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif not ch.isprintable():
            cp = ord(ch)
            out.append(f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def template_literal(value: str) -> str:
    """A label or annotation value that Prometheus and vmalert, which expand Go templates
    in alert labels and annotations, print exactly as given. Values without ``{{`` are
    plain text already; others become one template action printing a string literal."""
    if "{{" not in value:
        return value
    return "{{ " + quote(value) + " }}"


# RE2 (Prometheus, MetricsQL) lacks these Python regex features.
_NOT_RE2 = re.compile(r"\(\?[=!]|\(\?<[=!]|\(\?>|\(\?P=|\\[1-9]|[*+?}]\+")


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a regex both engines accept, or None."""
    if _NOT_RE2.search(pattern):
        return "uses lookaround, backreferences or possessive quantifiers, which RE2 lacks"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"is not a valid regular expression ({exc})"
    return None


def number(x: float) -> str:
    """A PromQL number literal for ``x`` without float noise (10, 1.1, 0.01)."""
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


class Ctx:
    """What a family needs from the config to write its expressions."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        sel = cfg["selector"]
        self.carry = tuple(sel)  # labels of the extra selector, kept by every aggregation
        self._matchers = tuple(self._matcher(k, v) for k, v in sel.items())

    @staticmethod
    def _matcher(label: str, value) -> str:
        op, val = ("=", value) if isinstance(value, str) else next(iter(value.items()))
        return f"{label}{op}{quote(val)}"

    def _selector(self, name: str, extra: tuple[str, ...] = ()) -> str:
        matchers = self._matchers + extra
        return f"{name}{{{', '.join(matchers)}}}" if matchers else name

    # names -------------------------------------------------------------------------
    def l(self, label: contract.Label) -> str:
        """Configured name of a contract label."""
        return self.cfg.label(label.key)

    def mname(self, metric: contract.Metric) -> str:
        return self.cfg.metric(metric.key)

    def rname(self, rec: contract.Recorded) -> str:
        """Name of a recorded series, its windows filled in."""
        return rec.name.format(**self.cfg["windows"])

    # selectors ---------------------------------------------------------------------
    def m(self, metric: contract.Metric, suffix: str = "",
          match: dict[contract.Label, str] | None = None, extra: tuple[str, ...] = ()) -> str:
        """Selector of a contract metric (``suffix`` e.g. ``_sum`` for histograms);
        ``match`` adds equality matchers on contract labels, ``extra`` matchers already
        written out (e.g. a dashboard's template variables)."""
        eq = tuple(f"{self.l(k)}={quote(v)}" for k, v in (match or {}).items())
        return self._selector(self.mname(metric) + suffix, eq + extra)

    def rate(self, metric: contract.Metric, suffix: str, window: str, fn: str = "rate",
             match: dict[contract.Label, str] | None = None) -> str:
        """``rate(<selector>[window])`` (or increase; ``match`` as in ``m``); a histogram's
        ``_sum`` published in another unit (a preset's scale, e.g. milliseconds) is brought
        to the contract's."""
        window, factor = self.observed(metric, suffix, window)
        expr = f"{fn}({self.m(metric, suffix, match=match)}[{window}])"
        return expr if factor == 1.0 else f"({expr} * {number(factor)})"

    def observed(self, metric: contract.Metric, suffix: str, window: str) -> tuple[str, float]:
        """The window to read a histogram's ``_sum`` or ``_count`` over and the factor to
        bring its increase to the contract's: the preset's unit scale (sums), and for a
        source that records one observation (the interval's mean) per n steps, as
        Megatron does once per --log-interval, n per observation and a window of at least
        n progress windows, which holds two observations at the step time the progress
        window allows (2 steps per window)."""
        from .config import duration, seconds
        factor = self.cfg.scale(metric.key) if suffix == "_sum" else 1.0
        n = self.cfg.steps_per_observation(metric.key) if suffix in ("_sum", "_count") else 1
        if n > 1:  # a Grafana variable ($__rate_interval) gives way to the rate window
            factor *= n
            base = self.w("rate") if window.startswith("$") else window
            window = duration(max(seconds(base), n * seconds(self.w("progress"))))
        return window, factor

    def stepped(self, window: str) -> str:
        """The step histogram's window as the rules read it (observed): ``window``, or at
        least n progress windows under a preset's cadence. A rate that a ratio sets against
        the histogram's is read over it too: a rate over a window longer than its series'
        life (after a job's start, after every restart) is understated, and both sides of
        a ratio read over one window are understated alike."""
        return self.observed(contract.M.train_step_seconds, "_count", window)[0]

    def outlasting(self, window: str) -> str:
        """``window`` lengthened by what a preset's cadence adds to the progress window: a
        memory of what the job had, kept that long after the ranks are seen to stop."""
        from .config import duration, seconds
        extra = seconds(self.stepped(self.w("progress"))) - seconds(self.w("progress"))
        return window if not extra else duration(seconds(window) + extra)

    def r(self, rec: contract.Recorded, extra: tuple[str, ...] = ()) -> str:
        """Selector of a recorded series (``extra``: matchers already written out)."""
        return self._selector(self.rname(rec), extra)

    # clauses -----------------------------------------------------------------------
    def labels(self, *labels: contract.Label) -> str:
        names = list(self.carry) + [self.l(k) for k in labels]
        return ", ".join(dict.fromkeys(names))

    def join(self, on: tuple[contract.Label, ...], include: tuple[contract.Label, ...] = ()) -> str:
        """``on (...) group_left (...)``: a many-to-one join that copies ``include`` from the
        one side. A label already matched on (the extra selector's, or a renamed one that
        coincides with it) is not copied again, which PromQL would refuse."""
        matched = self.labels(*on)
        names = [n for n in dict.fromkeys(self.l(k) for k in include) if n not in matched.split(", ")]
        return f"on ({matched}) group_left ({', '.join(names)})"

    def by(self, *labels: contract.Label) -> str:
        return f"by ({self.labels(*labels)})"

    def on(self, *labels: contract.Label) -> str:
        return f"on ({self.labels(*labels)})"

    def current_node(self, selector: str) -> str:
        """1 per rank, labelled with the node of the rank's newest series of ``selector``.
        Rules group by rank, not node: a restarted rank may land on another node, and
        grouping by node would split it into an old and a new series. Join it with
        ``join((job_id, rank), (node,))`` to name the node a rank runs on now."""
        L = contract.L
        newest = f"topk {self.by(L.job_id, L.rank)} (1, timestamp({selector}))"
        return f"(max {self.by(L.job_id, L.rank, L.node)} ({newest}) * 0 + 1)"

    # values ------------------------------------------------------------------------
    def w(self, key: str) -> str:
        return self.cfg["windows"][key]

    def t(self, key: str) -> str:
        return number(self.cfg["thresholds"][key])

    def tl(self, label: contract.Label) -> str:
        """Alert template reference to a label's value."""
        return "{{ $labels.%s }}" % self.l(label)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def identifiers(expr: str) -> set[str]:
    """Names in an expression, string literals removed (metric, recorded-series, label and
    function names alike; callers intersect with the names they look for)."""
    return set(_IDENT.findall(_STRING.sub(" ", expr)))
