"""Delay threshold crossings of a session or a policy, read back from InfluxDB: each watched
metric's last report (the reference its node compares against now) and the events in a time
range.

The collector writes one `threshold` point per event (docs/RESULTS.md), the metric as a tag:
`value_ns`, `reference_ns` (0 for the metric's first report), `first`, `accelerated`.
"""

# S608: InfluxQL; every string goes through srv6pm.common.influxql.string_literal (Scope.where,
# the metric), numbers are ints.
# ruff: noqa: S608

from __future__ import annotations

from typing import Any

from srv6pm.common.influxql import string_literal

from ..adapters.influx import InfluxResults
from .paging import page_by_time
from .results import Scope, Window

FIELDS = "value_ns, reference_ns, first, accelerated"
SERIES = "GROUP BY session, segment_list, metric, src_node, dst_node"


def _event(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "at_ns": row["time"],
        "session": row["session"],
        "segment_list": row["segment_list"],
        "src_node": row["src_node"],
        "dst_node": row["dst_node"],
        "metric": row["metric"],
        "value_ns": row["value_ns"],
        "reference_ns": None if row["first"] else row["reference_ns"],
        "first": bool(row["first"]),
        "accelerated": bool(row["accelerated"]),
    }


def _order(event: dict[str, Any]) -> tuple[int, str, str, str]:
    return (event["at_ns"], event["session"], event["segment_list"], event["metric"])


class ThresholdEventService:
    def __init__(self, influx: InfluxResults) -> None:
        self._influx = influx

    @staticmethod
    def _where(scope: Scope, metric: str | None) -> str:
        out = scope.where()
        return f'{out} AND "metric" = {string_literal(metric)}' if metric else out

    def latest(self, scope: Scope, metric: str | None = None) -> list[dict[str, Any]]:
        """Per session, segment list and metric: its last event, however old."""
        rows = self._influx.rows(
            f"SELECT {FIELDS} FROM threshold WHERE {self._where(scope, metric)} {SERIES} "
            "ORDER BY time DESC LIMIT 1"
        )
        found = [_event(row) for row in rows]
        return sorted(found, key=lambda e: (e["session"], e["segment_list"], e["metric"]))

    def events(
        self, scope: Scope, window: Window, metric: str | None = None
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The events in [start, end), oldest first, a page of at most `window.limit` that never
        splits one time (paging.page_by_time), and where the next page starts."""
        # LIMIT applies per series: each series' first `limit` + 1 hold the first of all
        rows = self._influx.rows(
            f"SELECT {FIELDS} FROM threshold WHERE {self._where(scope, metric)} "
            f"AND time >= {window.start_ns} AND time < {window.end_ns} {SERIES} "
            f"ORDER BY time ASC LIMIT {window.limit + 1}"
        )
        return page_by_time(sorted((_event(row) for row in rows), key=_order), window.limit)
