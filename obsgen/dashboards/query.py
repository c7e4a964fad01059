"""PromQL for panels and the template variables every dashboard carries.

Panel queries are written like the rules' (``obsgen.promql.Ctx``: renamed metrics and
labels, the config's extra selector on every selector and in every ``by``), plus the
dashboard's template variables: every selector of a series that carries ``job_id`` is
filtered by ``$job_id``, per-rank and per-stage series by ``$rank`` / ``$stage`` where
the panel asks for it, and every selector by the extra selector's variables. Rates use
``$__rate_interval``; means come from ``_sum`` / ``_count`` and the recording rules.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..contract import L, M, Label, Metric, R, Recorded
from ..promql import number, Ctx, quote

RATE = "$__rate_interval"  # Grafana's rate window: at least 4 scrape intervals
RANGE = "$__range"  # the dashboard's time range

# Variable names (URL parameters var-<name>). They stay the same when the config renames
# the labels, so links and bookmarks survive a rename.
DATASOURCE, JOB, RANK_VAR, STAGE_VAR = "datasource", "job_id", "rank", "stage"
ALL = ".*"  # the value of "All" for multi-value variables; never a list of every rank


@dataclass(frozen=True)
class Var:
    """A template variable: ``datasource`` (Prometheus data sources) or ``query``
    (``label_values``)."""
    name: str
    label: str
    description: str
    kind: str = "query"
    query: str = ""
    multi: bool = False
    include_all: bool = False
    sort: int = 1  # 1 alphabetical, 3 numerical (ascending)


class Q:
    """Selectors, clauses and the common panel expressions for one config."""

    def __init__(self, c: Ctx):
        self.c = c
        self.job = c.l(L.job_id)
        self.rank = c.l(L.rank)
        self.stage = c.l(L.stage)

    # matchers ------------------------------------------------------------------------
    def _vars(self, labels: tuple[str, ...], rank: bool, stage: bool, name: str,
              job: bool = True) -> tuple[str, ...]:
        out = [f"{label}=~{quote('$' + label)}" for label in self.c.carry]
        if job and L.job_id.key in labels:
            out.append(f"{self.job}={quote('$' + JOB)}")
        for wanted, label, var in ((rank, L.rank, RANK_VAR), (stage, L.stage, STAGE_VAR)):
            if wanted:
                if label.key not in labels:
                    raise ValueError(f"{name} has no {label.key} label to filter by ${var}")
                out.append(f"{self.c.l(label)}=~{quote('$' + var)}")
        return tuple(out)

    def m(self, metric: Metric, suffix: str = "", *, rank: bool = False, stage: bool = False,
          match: dict[Label, str] | None = None, regex: dict[Label, str] | None = None) -> str:
        """Selector of a contract metric filtered by the dashboard's variables; ``match``
        adds equality and ``regex`` regular-expression matchers on contract labels."""
        for label in [*(match or {}), *(regex or {})]:
            if label.key not in metric.labels:
                raise ValueError(f"{metric.key} has no {label.key} label")
        extra = self._vars(metric.labels, rank, stage, metric.key) + tuple(
            f"{self.c.l(k)}=~{quote(v)}" for k, v in (regex or {}).items())
        return self.c.m(metric, suffix, match=match, extra=extra)

    def r(self, rec: Recorded, *, rank: bool = False, stage: bool = False,
          match: dict[Label, str] | None = None) -> str:
        """Selector of a recorded series filtered by the dashboard's variables; ``match``
        adds equality matchers on its labels."""
        for label in match or {}:
            if label.key not in rec.labels:
                raise ValueError(f"{rec.name} has no {label.key} label to match")
        eq = tuple(f"{self.c.l(k)}={quote(v)}" for k, v in (match or {}).items())
        return self.c.r(rec, extra=self._vars(rec.labels, rank, stage, rec.name) + eq)

    # clauses -------------------------------------------------------------------------
    def by(self, *labels: Label) -> str:
        return self.c.by(*labels)

    def on(self, *labels: Label) -> str:
        return self.c.on(*labels)

    def join(self, on: tuple[Label, ...], include: tuple[Label, ...] = ()) -> str:
        return self.c.join(on, include)

    def names(self, *labels: Label) -> str:
        """Configured label names, comma separated (for group_left / group_right)."""
        return ", ".join(self.c.l(label) for label in labels)

    # expressions ---------------------------------------------------------------------
    def rate(self, metric: Metric, suffix: str = "", **sel) -> str:
        """rate() over $__rate_interval; a ``_sum`` a preset publishes in another unit is
        scaled to the contract's, and a source that records once per n steps is read as
        the rules read it (promql.Ctx.observed)."""
        window, factor = self.c.observed(metric, suffix, RATE)
        expr = f"rate({self.m(metric, suffix, **sel)}[{window}])"
        return expr if factor == 1.0 else f"({expr} * {number(factor)})"

    def mean(self, metric: Metric, by: tuple[Label, ...], **sel) -> str:
        """Mean of a histogram per observation over the rate window: _sum / _count,
        never a quantile from the coarse default buckets."""
        return (f"sum {self.by(*by)} ({self.rate(metric, '_sum', **sel)})\n/\n"
                f"(sum {self.by(*by)} ({self.rate(metric, '_count', **sel)}) > 0)")

    def per_step(self, numerator: str, by: tuple[Label, ...], *, rank: bool = False) -> str:
        """``numerator`` (a rate, already summed ``by``) per training step of the same
        ranks: rate over the step counter's rate."""
        steps = f"sum {self.by(*by)} ({self.rate(M.train_step_seconds, '_count', rank=rank)})"
        return f"{numerator}\n/ {self.on(*by)}\n({steps} > 0)"

    def not_collected(self, *fields: Metric) -> str:
        """What a GPU panel says when its dcgm-exporter fields return nothing."""
        return ("not collected: add " + " and ".join(self.c.mname(f) for f in fields) +
                " to dcgm-exporter's counters CSV (examples/dcgm-exporter)")

    def gpus(self, expr: str, *, rank: bool = True) -> str:
        """``expr`` over dcgm-exporter series (per GPU, labelled UUID) for the job's GPUs
        only (selected ranks), labelled with the job_id, rank and node of the rank that
        runs on each GPU."""
        info = self.m(M.train_rank_gpu_info, rank=rank)
        return f"({expr}\n * {self.join((L.UUID,), (L.job_id, L.rank, L.node))}\n {info})"

    def spread(self, expr: str, by: tuple[Label, ...] = (L.job_id,)) -> tuple[tuple[str, str], ...]:
        """(legend, expr) of the slowest, median and fastest series of ``expr`` across
        ranks: how far apart the ranks are, in three lines at any scale."""
        return (("max", f"max {self.by(*by)} (\n{expr}\n)"),
                ("median", f"quantile {self.by(*by)} (0.5,\n{expr}\n)"),
                ("min", f"min {self.by(*by)} (\n{expr}\n)"))

    # variables -----------------------------------------------------------------------
    def variables(self, wanted: tuple[str, ...]) -> list[Var]:
        """Every dashboard's variables, then the view's (rank, stage) in that order."""
        out = [Var(DATASOURCE, "Data source", "Prometheus that holds the job's metrics and "
                   "obsgen's recording rules", kind="datasource", query="prometheus")]
        world = self.c.r(R.world_size)
        for label in self.c.carry:
            out.append(Var(label, label, f"{label} (the config's extra selector)",
                           query=f"label_values({world}, {label})", multi=True, include_all=True))
        jobs = self.c.r(R.world_size, extra=self._vars(R.world_size.labels, False, False, "",
                                                          job=False))
        out.append(Var(JOB, "job", "training job (one run, across restarts)",
                       query=f"label_values({jobs}, {self.job})"))
        if RANK_VAR in wanted:
            out.append(Var(RANK_VAR, "rank", "ranks to show; All for every rank",
                           query=f"label_values({self.m(M.train_world_size)}, {self.rank})",
                           multi=True, include_all=True, sort=3))
        if STAGE_VAR in wanted:
            out.append(Var(STAGE_VAR, "stage", "pipeline stages to show; All for every stage",
                           query=f"label_values({self.r(R.busy_mean)}, {self.stage})",
                           multi=True, include_all=True, sort=3))
        return out
