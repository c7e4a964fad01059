"""What a dashboard view declares: rows of panels, each with its queries, unit and the
one line that says what healthy looks like. Views are data; ``classic`` and ``v2`` turn
them into Grafana JSON with grafana-foundation-sdk, so a view never touches JSON."""
from __future__ import annotations

from dataclasses import dataclass, field

# Panel kinds, as Grafana's panel plugin ids.
TIMESERIES, STAT, TABLE, HEATMAP, BARGAUGE = "timeseries", "stat", "table", "heatmap", "bargauge"
KINDS = (TIMESERIES, STAT, TABLE, HEATMAP, BARGAUGE)

# Variables a view may ask for besides the ones every dashboard has (datasource, the
# extra selector's labels and job_id).
RANK, STAGE = "rank", "stage"

# Min interval of the panels that read every rank's, GPU's or host's raw series of the
# cluster (Panel.interval): half the steps of the 30 s scrape, half the time to draw.
SLOW = "1m"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""  # legendFormat, e.g. "rank {{rank}}"
    instant: bool = False  # one value at the end of the range (stat, table)
    table: bool = False  # format=table: one row per series, labels as columns


@dataclass(frozen=True)
class Step:
    """A threshold: from ``value`` upwards (None: the base) the colour is ``color``."""
    value: float | None
    color: str


@dataclass(frozen=True)
class Style:
    """How one series of a time series panel is drawn (matched by its display name, the
    query's legend): a dashed line for a threshold series, for example."""
    name: str
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class Panel:
    kind: str
    title: str
    description: str  # one line: what healthy looks like
    unit: str  # a Grafana unit id (grafana_foundation_sdk.models.units)
    queries: tuple[Query, ...]
    width: int = 12
    height: int = 8
    steps: tuple[Step, ...] = ()  # colour thresholds; drawn as lines when draw_steps
    draw_steps: bool = False  # time series: draw the threshold steps as dashed lines
    styles: tuple[Style, ...] = ()
    log_scale: bool = False
    min: float | None = None
    max: float | None = None
    stack: bool = False
    no_value: str = ""  # text shown when a query returns nothing, e.g. "not set"
    mappings: tuple[tuple[str, str, str], ...] = ()  # (value, text shown, colour): a stat's words
    decimals: int | None = None
    columns: tuple[tuple[str, str], ...] = ()  # table: (label or Value, header), in order
    sort_by: str = ""  # table: header of the column to sort by
    # table: (title, URL) data links on every cell; ${__data.fields.<column>} is the row's value
    links: tuple[tuple[str, str], ...] = ()
    sort_desc: bool = True
    # Grafana's min interval (query options): the smallest step the panel is queried at.
    # A range query pays per step for every series it reads, so a panel over every host's
    # or rank's raw series at thousands of ranks is queried at 1m instead of the scrape's 30 s.
    interval: str = ""


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class View:
    """One tab: a classic dashboard of its own, or a tab of the v2 dashboard."""
    key: str  # file name and uid suffix: dashboards/<key>.json, uid <prefix>-<key>
    title: str  # tab title
    question: str  # the question the view answers, shown as the dashboard description
    source: str  # module that defines it, named in the generated header
    rows: tuple[Row, ...]
    variables: tuple[str, ...] = field(default=())  # RANK and/or STAGE

    def panels(self):
        for row in self.rows:
            yield from row.panels
