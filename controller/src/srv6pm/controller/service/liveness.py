"""Liveness of the segment lists a session or a policy probes, read back from InfluxDB: the
current state of each (its last change, however old) and the changes in a time range.

The collector writes one `liveness` point per change (docs/RESULTS.md): `state` 1 up, 0 down,
`previous` (none for a session's first state), `consecutive` replies received or missed.
"""

# S608: InfluxQL; every string goes through srv6pm.common.influxql.string_literal (Scope.where),
# numbers are ints.
# ruff: noqa: S608

from __future__ import annotations

from typing import Any

from ..adapters.influx import InfluxResults
from .paging import page_by_time
from .results import Scope, Window

STATES = {1: "up", 0: "down"}
FIELDS = "state, previous, consecutive"
SERIES = "GROUP BY session, segment_list, src_node, dst_node"


def _change(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "at_ns": row["time"],
        "session": row["session"],
        "segment_list": row["segment_list"],
        "src_node": row["src_node"],
        "dst_node": row["dst_node"],
        "state": STATES.get(row["state"], "unknown"),
        "previous": STATES.get(row["previous"]) if row["previous"] is not None else None,
        "consecutive": row["consecutive"],
    }


class LivenessService:
    def __init__(self, influx: InfluxResults) -> None:
        self._influx = influx

    def current(self, scope: Scope) -> list[dict[str, Any]]:
        """Per session and segment list: its state and since when (its last change)."""
        rows = self._influx.rows(
            f"SELECT {FIELDS} FROM liveness WHERE {scope.where()} {SERIES} "
            "ORDER BY time DESC LIMIT 1"
        )
        found = [_change(row) for row in rows]
        return sorted(found, key=lambda c: (c["session"], c["segment_list"]))

    def changes(self, scope: Scope, window: Window) -> tuple[list[dict[str, Any]], int | None]:
        """The changes in [start, end), oldest first, a page of at most `window.limit` that
        never splits one time (paging.page_by_time), and where the next page starts."""
        # LIMIT applies per series: each series' first `limit` + 1 hold the first of all
        rows = self._influx.rows(
            f"SELECT {FIELDS} FROM liveness WHERE {scope.where()} "
            f"AND time >= {window.start_ns} AND time < {window.end_ns} {SERIES} "
            f"ORDER BY time ASC LIMIT {window.limit + 1}"
        )
        found = sorted(
            (_change(row) for row in rows),
            key=lambda c: (c["at_ns"], c["session"], c["segment_list"]),
        )
        return page_by_time(found, window.limit)
