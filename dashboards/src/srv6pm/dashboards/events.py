"""Delay per computation interval and delay threshold events (docs/RESULTS.md: the
`delay_interval` and `threshold` measurements), for a dashboard whose `where` selects its
sessions: the events as an annotation and a table, the intervals' delay as a time series."""

# S608: the queries are constant templates; Grafana, not this code, fills in the values.
# ruff: noqa: S608

from __future__ import annotations

from grafana_foundation_sdk.builders import table as table_builders
from grafana_foundation_sdk.builders import timeseries as timeseries_builders
from srv6pm.dashboards import panels as p
from srv6pm.dashboards.influxql import InfluxQLAnnotation

_TWO_WAY = "\"direction\" = 'two_way'"


def threshold_annotation(where: str) -> InfluxQLAnnotation:
    """Each crossing on every time series panel, tagged with its segment list and metric."""
    return p.annotation(
        "Threshold events",
        'SELECT "description", "segment_list", "metric" FROM "threshold" '
        f"WHERE $timeFilter AND {where}",
        text="description",
        tags="metric",
        color="orange",
    )


def threshold_table(
    where: str, *, links: dict[str, str] | None = None, width: int = 12
) -> table_builders.Panel:
    return p.table(
        "Threshold events",
        "Each delay threshold crossing the nodes reported, newest first: the metric, the value "
        "that crossed and the reference it moved from (none: the metric's first report), and "
        "whether one burst decided it before its interval ended (accelerated). Empty unless the "
        "session has thresholds.",
        [
            p.target(
                'SELECT "session", "segment_list", "metric", "value_ns", "reference_ns", '
                '"first", "accelerated" FROM "threshold" '
                f"WHERE $timeFilter AND {where} ORDER BY time DESC LIMIT 500",
                table=True,
            )
        ],
        units={"value_ns": p.NANOSECONDS, "reference_ns": p.NANOSECONDS},
        links=links,
        width=width,
    )


def interval_delay(where: str, *, width: int = 12) -> timeseries_builders.Panel:
    return p.timeseries(
        "Two-way delay per computation interval",
        "p50, p99 and max of each computation interval (finer than a block), per segment list. "
        "Empty unless the session has a computation interval.",
        p.NANOSECONDS,
        [
            p.target(
                'SELECT "p50_ns" AS "p50", "p99_ns" AS "p99", "max_ns" AS "max" '
                f'FROM "delay_interval" WHERE $timeFilter AND {where} AND {_TWO_WAY} '
                'AND "valid" = true GROUP BY "segment_list"',
                alias="$tag_segment_list $col",
            )
        ],
        width=width,
    )
