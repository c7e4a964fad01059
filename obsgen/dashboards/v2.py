"""One Grafana 12 schema-v2 dashboard (``dashboard.grafana.app/v2``) with a real
TabsLayout: a tab per view, rows inside each tab, built with grafana-foundation-sdk's
dashboardv2 builders. Panel options and field config come from the same builders as the
classic dashboards, so both formats show the same panels.

Grafana loads it from file provisioning as a Kubernetes-style resource (apiVersion, kind,
metadata, spec) where dynamic dashboards are enabled; see docs/guides/dashboards.md.
"""
from __future__ import annotations

from grafana_foundation_sdk.builders import dashboardv2 as d2, prometheus
from grafana_foundation_sdk.models import dashboardv2 as m2

from . import classic
from .model import View
from .query import ALL, DATASOURCE, Var

API_VERSION = "dashboard.grafana.app/v2"


class _Built:
    """A ready model where the SDK wants a builder."""

    def __init__(self, obj):
        self.obj = obj

    def build(self):
        return self.obj


def _ds():
    return d2.Dashboardv2DataQueryKindDatasource().name("${%s}" % DATASOURCE)


def _query(t: dict) -> prometheus.QueryV2:
    q = prometheus.QueryV2().version("v0").datasource(_ds()).expr(t["expr"])
    if t.get("legendFormat"):
        q.legend_format(t["legendFormat"])
    if t.get("format"):
        q.format(t["format"])
    q.instant(bool(t.get("instant"))).range(bool(t.get("range")))
    return q


def _panel(p, pid: int, trace_link: dict | None) -> d2.Panel:
    """A v2 panel from the classic builder's panel: same options, field config, queries,
    transformations and links."""
    c = classic.to_dict(classic.panel_builder(p, pid, classic.dm.GridPos(), trace_link).build())
    options = d2.QueryOptionsSpec()
    if c.get("interval"):
        options.interval(c["interval"])
    data = d2.QueryGroup().query_options(options)
    for t in c.get("targets", []):
        data.target(d2.Target().query(_query(t)).ref_id(t["refId"]).hidden(False))
    for tr in c.get("transformations", []):
        data.transformation(d2.Transformation().group(tr["id"]).options(tr.get("options", {})))
    viz = (d2.VizConfigKind().group(c["type"]).version("")
           .spec(m2.VizConfigSpec(options=c.get("options", {}),
                                  field_config=m2.FieldConfigSource.from_json(c["fieldConfig"]))))
    links = [d2.DataLink().title(link["title"]).url(link["url"]).target_blank(True)
             for link in c.get("links", [])]
    return (d2.Panel().id(pid).title(p.title).description(p.description).links(links)
            .data(data).visualization(viz))


def _variable(v: Var):
    if v.kind == "datasource":
        return (d2.DatasourceVariable(v.name).plugin_id(v.query).label(v.label)
                .description(v.description).current(m2.VariableOption(text="", value=""))
                .multi(False).include_all(False).regex("").allow_custom_value(True))
    query = m2.DataQueryKind(
        group="prometheus", version="v0",
        datasource=m2.Dashboardv2DataQueryKindDatasource(name="${%s}" % DATASOURCE),
        spec={"qryType": 1, "query": v.query, "refId": "PrometheusVariableQueryEditor-VariableQuery"})
    b = (d2.QueryVariable(v.name).label(v.label).description(v.description).query(_Built(query))
         .definition(v.query).refresh(m2.VariableRefresh.ON_TIME_RANGE_CHANGED)
         .sort(m2.VariableSort(_SORT[v.sort])).multi(v.multi).include_all(v.include_all)
         .regex("").allow_custom_value(True).options([]))
    if v.include_all:
        b.all_value(ALL).current(m2.VariableOption(text=["All"], value=["$__all"]))
    else:
        b.current(m2.VariableOption(text="", value=""))
    return b


_SORT = {1: "alphabeticalAsc", 3: "numericalAsc"}


def dashboard(views: list[View], meta: classic.Meta, name: str) -> dict:
    """The resource document: apiVersion, kind, metadata and the dashboard as spec."""
    b = (d2.Dashboard(meta.title).description(meta.description).tags([meta.tag])
         .editable(True).preload(False).cursor_sync(m2.DashboardCursorSync.CROSSHAIR)
         .time_settings(d2.TimeSettings().from_val(f"now-{meta.time_range}").to("now")
                        .timezone("browser").auto_refresh(meta.refresh)
                        .hide_timepicker(False).fiscal_year_start_month(0))
         .links([]).annotations([]))
    for v in meta.variables:
        b.variable(_variable(v))
    tabs = d2.Tabs()
    pid = 1
    for view in views:
        rows = d2.Rows()
        for title, row_y, placed in classic.layout(view):
            grid = d2.Grid()
            for p, pos in placed:
                key = f"panel-{pid}"
                b.element(key, _panel(p, pid, meta.trace_link))
                grid.item(d2.grid_item(key).x(pos.x).y(pos.y - row_y - 1)
                          .width(pos.w).height(pos.h))
                pid += 1
            rows.row(d2.Row().title(title).collapse(False).layout(grid))
        tabs.tab(d2.tab(view.title).layout(rows))
    b.layout(tabs)
    spec = classic.order(classic.to_dict(b.build()))
    return {"apiVersion": API_VERSION, "kind": "Dashboard",
            "metadata": {"name": name}, "spec": spec}
