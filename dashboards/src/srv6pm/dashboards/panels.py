"""Shared pieces of the srv6pm dashboards: data source, variables, panels, transformations."""

from __future__ import annotations

from collections.abc import Sequence

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import heatmap as heatmap_builders
from grafana_foundation_sdk.builders import stat as stat_builders
from grafana_foundation_sdk.builders import table as table_builders
from grafana_foundation_sdk.builders import timeseries as timeseries_builders
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    DataTransformerConfig,
    DynamicConfigValue,
    ValueMap,
    ValueMappingResult,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from srv6pm.common.alert_rules import INFLUXDB_UID
from srv6pm.dashboards.influxql import DATASOURCE_TYPE, InfluxQL, InfluxQLAnnotation

DATASOURCE_UID = INFLUXDB_UID  # provisioned once; the alert rules query it too
DATASOURCE = DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE_UID)
TAG = "srv6pm"
# Custom "All" value: Grafana inserts it unescaped, so /^$var$/ becomes /^.*$/ (every value),
# instead of a regex alternation of every value it has listed.
ALL_VALUE = ".*"

# Grafana units.
RATIO = "percentunit"
NANOSECONDS = "ns"
COUNT = "short"
BYTES = "decbytes"


def dashboard(uid: str, title: str, description: str) -> dashboard_builders.Dashboard:
    """A dashboard with the settings every srv6pm dashboard shares."""
    return (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([TAG])
        .time("now-1h", "now")
        .refresh("30s")
        .timezone(common.TimeZoneBrowser)
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .link(
            dashboard_builders.DashboardLink("srv6pm")
            .type(DashboardLinkType.DASHBOARDS)
            .tags([TAG])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )


def tag_values(measurement: str, key: str, where: str = "") -> str:
    """InfluxQL listing the values of one tag (what a query variable offers)."""
    query = f'SHOW TAG VALUES FROM "{measurement}" WITH KEY = "{key}"'
    return f"{query} WHERE {where}" if where else query


def variable(
    name: str,
    label: str,
    query: str,
    *,
    include_all: bool = False,
) -> dashboard_builders.QueryVariable:
    """A query variable on the srv6pm data source; with ``include_all``, multi-select + All."""
    builder = (
        dashboard_builders.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.NATURAL_ASC)
        .allow_custom_value(False)
    )
    if include_all:
        builder = (
            builder.multi(True)
            .include_all(True)
            .all_value(ALL_VALUE)
            .current(VariableOption(selected=True, text=["All"], value=["$__all"]))
        )
    return builder


def target(
    query: str, ref_id: str = "A", *, alias: str | None = None, table: bool = False
) -> InfluxQL:
    """One InfluxQL target on the srv6pm data source."""
    builder = InfluxQL(query).ref_id(ref_id).datasource(DATASOURCE)
    if alias is not None:
        builder = builder.alias(alias)
    return builder.table() if table else builder


def timeseries(
    title: str,
    description: str,
    unit: str,
    targets: Sequence[InfluxQL],
    *,
    bars: bool = False,
    width: int = 12,
    height: int = 8,
) -> timeseries_builders.Panel:
    """A time series panel; ``bars`` for per-block counts, where a line would suggest a rate."""
    panel = (
        timeseries_builders.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(targets))
        .unit(unit)
        .min(0)
        .span(width)
        .height(height)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["mean", "max", "lastNotNull"])
        )
        .tooltip(
            common_builders.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING)
        )
    )
    if bars:
        panel = panel.draw_style(common.GraphDrawStyle.BARS).fill_opacity(60)
    else:
        panel = panel.show_points(common.VisibilityMode.AUTO).fill_opacity(10)
    return panel


def table(
    title: str,
    description: str,
    targets: Sequence[InfluxQL],
    *,
    transformations: Sequence[DataTransformerConfig] = (),
    units: dict[str, str] | None = None,
    links: dict[str, str] | None = None,
    states: Sequence[str] = (),
    width: int = 12,
    height: int = 8,
) -> table_builders.Panel:
    """A table panel; ``units``, ``links`` (URL per column name) and ``states`` (columns of
    liveness states, shown UP / DOWN) become field overrides."""
    panel = (
        table_builders.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(targets))
        .transformations(list(transformations))
        .span(width)
        .height(height)
        .filterable(True)
        .cell_options(common.TableAutoCellOptions())
    )
    for column, unit in (units or {}).items():
        panel = panel.override_by_name(column, [DynamicConfigValue(id_val="unit", value=unit)])
    for column in states:
        panel = panel.override_by_name(
            column, [DynamicConfigValue(id_val="mappings", value=[LIVENESS_STATES])]
        )
    for column, url in (links or {}).items():
        link = {"title": f"Open {column}", "url": url}
        panel = panel.override_by_name(column, [DynamicConfigValue(id_val="links", value=[link])])
    return panel


def heatmap(
    title: str,
    description: str,
    unit: str,
    targets: Sequence[InfluxQL],
    *,
    transformations: Sequence[DataTransformerConfig] = (),
    width: int = 12,
    height: int = 8,
) -> heatmap_builders.Panel:
    """A heatmap of pre-binned counts: one series per bin, named by its upper edge (Grafana's
    "le" rows layout, as for Prometheus histograms); `unit` is the edges' unit."""
    return (
        heatmap_builders.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(targets))
        .transformations(list(transformations))
        .span(width)
        .height(height)
        .calculate(False)
        .rows_frame(heatmap_builders.RowsHeatmapOptions().layout(common.HeatmapCellLayout.LE))
        .y_axis(heatmap_builders.YAxisConfig().unit(unit))
        .cell_values(heatmap_builders.CellValues().unit(COUNT))
    )


# Liveness points' `state`: 1 up, 0 down (docs/RESULTS.md)
LIVENESS_STATES = ValueMap(
    options={
        "1": ValueMappingResult(text="UP", color="green", index=0),
        "0": ValueMappingResult(text="DOWN", color="red", index=1),
    }
)


def stat(
    title: str,
    description: str,
    targets: Sequence[InfluxQL],
    *,
    width: int = 12,
    height: int = 8,
) -> stat_builders.Panel:
    """One value per series (its last), shown as the liveness state it maps to."""
    return (
        stat_builders.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(targets))
        .span(width)
        .height(height)
        .mappings([LIVENESS_STATES])
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )


def annotation(name: str, query: str, *, text: str, tags: str, color: str) -> InfluxQLAnnotation:
    """Events drawn on every time series panel from an InfluxQL query: `text` and `tags` are
    the result columns that become each event's text and tags."""
    return InfluxQLAnnotation(name, query, DATASOURCE, text_column=text, tags_column=tags).color(
        color
    )


def rename(pattern: str, replacement: str) -> DataTransformerConfig:
    """Rename fields whose name matches `pattern` (a JavaScript regex; `$1` is its group)."""
    return DataTransformerConfig(
        id_val="renameByRegex", options={"regex": pattern, "renamePattern": replacement}
    )


def row(title: str) -> dashboard_builders.Row:
    return dashboard_builders.Row(title)


def hide_time() -> DataTransformerConfig:
    """Aggregates over the whole range carry a meaningless time (epoch or range start)."""
    return DataTransformerConfig(id_val="organize", options={"excludeByName": {"Time": True}})


def sort_by(field: str, *, desc: bool = True) -> DataTransformerConfig:
    return DataTransformerConfig(
        id_val="sortBy", options={"fields": {}, "sort": [{"field": field, "desc": desc}]}
    )


def limit(rows: int) -> DataTransformerConfig:
    return DataTransformerConfig(id_val="limit", options={"limitField": rows})


def matrix(row_field: str, column_field: str, value_field: str) -> DataTransformerConfig:
    """Pivot rows of (row, column, value) into a grid, e.g. block x node -> packets."""
    return DataTransformerConfig(
        id_val="groupingToMatrix",
        options={
            "rowField": row_field,
            "columnField": column_field,
            "valueField": value_field,
            "emptyValue": "null",
        },
    )
