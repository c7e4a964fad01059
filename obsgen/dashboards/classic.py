"""Classic dashboard JSON (what every Grafana since 8 loads from file provisioning), built
with grafana-foundation-sdk's builders: one dashboard per view, joined by a links bar.

The same panel builders give the v2 renderer its panel options, so a panel looks the same
in both formats.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import quote as urlquote, unquote

import warnings

with warnings.catch_warnings():
    # The SDK marks the classic model deprecated in favour of v2; classic JSON is what file
    # provisioning of every Grafana in use reads, so it is the default on purpose.
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.builders import (bargauge, common as cb, dashboard as db,
                                                 heatmap, prometheus, stat, table, timeseries)
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import (common as cm, dashboard as dm, heatmap as hm,
                                               prometheus as pm)

from . import model
from .model import BARGAUGE, HEATMAP, STAT, TABLE, TIMESERIES, Panel, View
from .query import ALL, DATASOURCE, Var

GRID_WIDTH = 24  # Grafana's grid has 24 columns
DS_REF = {"type": "prometheus", "uid": "${%s}" % DATASOURCE}
_BUILDERS = {TIMESERIES: timeseries.Panel, STAT: stat.Panel, TABLE: table.Panel,
             HEATMAP: heatmap.Panel, BARGAUGE: bargauge.Panel}


@dataclass(frozen=True)
class Meta:
    """What a dashboard needs besides its view: identity, time, links and variables."""
    uid: str
    title: str
    description: str  # starts with the generated-file notice
    tag: str
    time_range: str
    refresh: str
    variables: tuple[Var, ...]
    trace_link: dict | None  # {"title", "url"} of the panel link to the job's traces
    tabs_bar: bool = True  # the dashboard-links bar joining the dashboards with ``tag``


def to_dict(obj) -> dict:
    """An SDK model as plain JSON data."""
    return json.loads(JSONEncoder(sort_keys=False).encode(obj))


def datasource() -> dm.DataSourceRef:
    return dm.DataSourceRef(type_val=DS_REF["type"], uid=DS_REF["uid"])


# panels ------------------------------------------------------------------------------
def _thresholds(p: Panel) -> db.ThresholdsConfig:
    steps = p.steps or (model.Step(None, "green"),)
    return (db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=s.value, color=s.color) for s in steps]))


def _style_overrides(b, p: Panel) -> None:
    """Per-series colour and dash, matched with byNames: its options are an object, as
    Grafana's dashboard schema wants (byName's plain string is not)."""
    for s in p.styles:
        props = [dm.DynamicConfigValue(id_val="color",
                                       value={"mode": "fixed", "fixedColor": s.color})]
        if s.dashed:
            props.append(dm.DynamicConfigValue(id_val="custom.lineStyle",
                                               value={"fill": "dash", "dash": [10, 10]}))
        matcher = dm.MatcherConfig(id_val="byNames", options={
            "mode": "include", "names": [s.name], "prefix": "", "readOnly": True})
        b.with_override(matcher, props)


def _timeseries(b: timeseries.Panel, p: Panel) -> None:
    b.legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.LIST)
             .placement(cm.LegendPlacement.BOTTOM).calcs([]))
    b.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI)
              .sort(cm.SortOrder.DESCENDING))
    b.line_width(1).fill_opacity(40 if p.stack else 0).show_points(cm.VisibilityMode.NEVER)
    b.span_nulls(False)
    if p.stack:
        b.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    if p.log_scale:
        b.scale_distribution(cb.ScaleDistributionConfig().type(cm.ScaleDistribution.LOG).log(10))
    if p.draw_steps:
        b.thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
    _style_overrides(b, p)


def _stat(b: stat.Panel, p: Panel) -> None:
    b.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    b.graph_mode(cm.BigValueGraphMode.NONE).color_mode(cm.BigValueColorMode.VALUE)
    b.text_mode(cm.BigValueTextMode.VALUE_AND_NAME if len(p.queries) > 1
                else cm.BigValueTextMode.VALUE)
    b.justify_mode(cm.BigValueJustifyMode.AUTO).orientation(cm.VizOrientation.AUTO)


def _bargauge(b: bargauge.Panel, p: Panel) -> None:
    b.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    b.orientation(cm.VizOrientation.HORIZONTAL).display_mode(cm.BarGaugeDisplayMode.BASIC)
    b.show_unfilled(True)


def _table(b: table.Panel, p: Panel) -> None:
    b.cell_height(cm.TableCellHeight.SM).show_header(True)
    if p.sort_by:
        b.sort_by([cb.TableSortByFieldState().display_name(p.sort_by).desc(p.sort_desc)])
    if p.columns:
        names = [c for c, _ in p.columns]
        b.with_transformation(dm.DataTransformerConfig(
            id_val="filterFieldsByName", options={"include": {"names": names}}))
        b.with_transformation(dm.DataTransformerConfig(
            id_val="organize", options={
                "excludeByName": {}, "includeByName": {},
                "indexByName": {c: i for i, c in enumerate(names)},
                "renameByName": {c: h for c, h in p.columns if h != c}}))
    if p.links:  # on every cell of a row: ${__data.fields.<column>} is that row's value
        b.data_links([db.DashboardLink(title).url(url).target_blank(True)
                      for title, url in p.links])


def _heatmap(b: heatmap.Panel, p: Panel) -> None:
    # Each series (a rank, an expert) is one row; the rows are names, not bucket bounds.
    b.calculate(False)
    b.rows_frame(heatmap.RowsHeatmapOptions().layout(cm.HeatmapCellLayout.UNKNOWN))
    b.y_axis(heatmap.YAxisConfig().unit("none").axis_placement(cm.AxisPlacement.LEFT))
    b.cell_values(heatmap.CellValues().unit(p.unit))
    color = (heatmap.HeatmapColorOptions().mode(hm.HeatmapColorMode.SCHEME).scheme("RdYlGn")
             .reverse(True).fill("dark-orange").scale(hm.HeatmapColorScale.LINEAR).steps(64)
             .exponent(0.5))
    if p.min is not None:
        color.min(round(p.min, 9))
    if p.max is not None:
        color.max(round(p.max, 9))
    b.color(color)
    b.show_legend().tooltip(heatmap.HeatmapTooltip().mode(cm.TooltipDisplayMode.SINGLE)
                            .y_histogram(False))
    b.cell_gap(1)


_STYLE = {TIMESERIES: _timeseries, STAT: _stat, TABLE: _table, HEATMAP: _heatmap,
          BARGAUGE: _bargauge}


def target(q: model.Query, ref: str) -> prometheus.Dataquery:
    t = prometheus.Dataquery().expr(q.expr).ref_id(ref).datasource(datasource())
    if q.legend:
        t.legend_format(q.legend)
    if q.table:
        t.format(pm.PromQueryFormat.TABLE)
    if q.instant:
        t.instant()
    else:
        t.range()
    return t


def panel_builder(p: Panel, pid: int, grid: dm.GridPos, trace_link: dict | None):
    """The SDK builder of one panel: options, field config, targets and links."""
    if p.kind not in _BUILDERS:
        raise ValueError(f"panel {p.title!r}: unknown kind {p.kind!r}")
    b = (_BUILDERS[p.kind]().id(pid).title(p.title).description(p.description)
         .datasource(datasource()).grid_pos(grid).unit(p.unit).thresholds(_thresholds(p)))
    if p.min is not None and p.kind != HEATMAP:
        b.min(p.min)
    if p.max is not None and p.kind != HEATMAP:
        b.max(p.max)
    if p.decimals is not None:
        b.decimals(p.decimals)
    if p.no_value:
        b.no_value(p.no_value)
    if p.mappings:
        b.mappings([dm.ValueMap(options={value: dm.ValueMappingResult(text=text, color=color,
                                                                       index=i)
                                         for i, (value, text, color) in enumerate(p.mappings)})])
    if p.interval:
        b.interval(p.interval)
    for i, q in enumerate(p.queries):
        b.with_target(target(q, chr(ord("A") + i)))
    if trace_link:
        link = (db.DashboardLink(trace_link["title"]).type(dm.DashboardLinkType.LINK)
                .url(trace_link["url"]).target_blank(True).icon("external link")
                .tooltip(trace_link["title"]).tags([]).as_dropdown(False)
                .include_vars(False).keep_time(False))
        link._internal.placement = None  # a panel link: in the panel's header
        b.links([link])
    _STYLE[p.kind](b, p)
    return b


def layout(view: View):
    """(row title, row y, [(panel, GridPos)]) per row: panels left to right, wrapping at
    the grid's width, each row headed by a row panel."""
    y = 0
    out = []
    for row in view.rows:
        row_y = y
        y += 1
        x, line_h, placed = 0, 0, []
        for p in row.panels:
            if x + p.width > GRID_WIDTH:
                x, y, line_h = 0, y + line_h, 0
            placed.append((p, dm.GridPos(h=p.height, w=p.width, x=x, y=y)))
            x += p.width
            line_h = max(line_h, p.height)
        y += line_h
        out.append((row.title, row_y, placed))
    return out


# variables ---------------------------------------------------------------------------
def variable(v: Var):
    if v.kind == "datasource":
        return (db.DatasourceVariable(v.name).label(v.label).description(v.description)
                .type(v.query).regex("").multi(False).include_all(False))
    b = (db.QueryVariable(v.name).label(v.label).description(v.description)
         .datasource(datasource()).query(v.query).definition(v.query)
         .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort(v.sort))
         .multi(v.multi).include_all(v.include_all).regex(""))
    if v.include_all:
        b.all_value(ALL).current(dm.VariableOption(text=["All"], value=["$__all"], selected=True))
    return b


# dashboard ---------------------------------------------------------------------------
def trace_link(cfg: dict, job_var: str) -> dict | None:
    """Panel link to the job's traces in Grafana Explore (Tempo: TraceQL on service.name
    and the run id attribute; Jaeger: a search by service and tag), or None."""
    uid = cfg["trace_datasource_uid"]
    if not uid:
        return None
    kind, service, attr = (cfg["trace_datasource_type"], cfg["trace_service_name"],
                           cfg["trace_run_id_attribute"])
    run = "${%s:percentencode}" % job_var
    if kind == "tempo":
        query = {"refId": "A", "datasource": {"type": "tempo", "uid": uid},
                 "queryType": "traceql", "limit": 20,
                 "query": f'{{resource.service.name="{service}" && .{attr}="{run}"}}'}
    else:
        query = {"refId": "A", "datasource": {"type": "jaeger", "uid": uid},
                 "queryType": "search", "service": service, "tags": f"{attr}={run}"}
    panes = {"traces": {"datasource": uid, "queries": [query],
                        "range": {"from": "${__from}", "to": "${__to}"}}}
    # Percent-encode the JSON, then give Grafana back its ${...} to interpolate.
    encoded = re.sub(r"%24%7B([\w%]+?)%7D", lambda m: "${%s}" % unquote(m.group(1)),
                     urlquote(json.dumps(panes, separators=(",", ":")), safe=""))
    return {"title": f"Traces of this job ({kind})",
            "url": f"/explore?schemaVersion=1&orgId=1&panes={encoded}"}


def dashboard(view: View, meta: Meta) -> dict:
    b = (db.Dashboard(meta.title).uid(meta.uid).description(meta.description)
         .tags([meta.tag]).editable().time(f"now-{meta.time_range}", "now")
         .timezone("browser").refresh(meta.refresh)
         .tooltip(dm.DashboardCursorSync.CROSSHAIR))
    for v in meta.variables:
        b.with_variable(variable(v))
    if meta.tabs_bar:
        link = (db.DashboardLink("Training views").type(dm.DashboardLinkType.DASHBOARDS)
                .tags([meta.tag]).as_dropdown(False).keep_time(True).include_vars(True)
                .target_blank(False).icon("external link").tooltip(""))
        link._internal.placement = None  # in the links bar above the panels, not the menu
        b.link(link)
    pid = 1
    for title, row_y, placed in layout(view):
        b.with_row(db.Row(title).id(pid).collapsed(False)
                   .grid_pos(dm.GridPos(h=1, w=GRID_WIDTH, x=0, y=row_y)))
        pid += 1
        for p, grid in placed:
            b.with_panel(panel_builder(p, pid, grid, meta.trace_link))
            pid += 1
    return order(to_dict(b.build()))


_FIRST = ("description", "uid", "title", "tags")


def order(doc: dict) -> dict:
    """The generated-file notice (the description) first, so ``obsgen check`` finds it in
    the file's first bytes; the rest in the SDK's order."""
    return {**{k: doc[k] for k in _FIRST if k in doc},
            **{k: v for k, v in doc.items() if k not in _FIRST}}
