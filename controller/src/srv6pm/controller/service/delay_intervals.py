"""Delay per computation interval of a session or a policy, read back from InfluxDB's
`delay_interval` points (docs/RESULTS.md): the same statistics and histogram as a block's, over
the probes of each interval (a session's `computation_interval_ms`), a page at a time by time.
"""

# S608: InfluxQL; every string goes through srv6pm.common.influxql.string_literal (Scope.where),
# numbers are ints.
# ruff: noqa: S608

from __future__ import annotations

from typing import Any

from ..adapters.influx import InfluxResults
from .results import BINS, DELAY_FIELDS, Scope, Window, direction_fields

FIELDS = (*DELAY_FIELDS, "interval_ns", BINS)


class DelayIntervalService:
    def __init__(self, influx: InfluxResults) -> None:
        self._influx = influx

    def intervals(self, scope: Scope, window: Window) -> list[dict[str, Any]]:
        """One item per interval, segment list and session, oldest first: its start, length,
        block and each direction's statistics; the page holds every item of its first
        `window.limit` interval starts."""
        # LIMIT applies per series (one point per interval each): the first `limit` starts of
        # the union are complete in every series
        rows = self._influx.rows(
            f"SELECT {', '.join(FIELDS)} FROM delay_interval WHERE {scope.where()} "
            f"AND time >= {window.start_ns} AND time < {window.end_ns} "
            f"GROUP BY direction, segment_list, session ORDER BY time ASC LIMIT {window.limit}"
        )
        starts = sorted({row["time"] for row in rows})[: window.limit]
        items: dict[tuple[int, str, str], dict[str, Any]] = {}
        for row in rows:
            if row["time"] > starts[-1]:
                continue
            key = (row["time"], row["segment_list"], row["session"])
            item = items.setdefault(
                key,
                {
                    "start_ns": row["time"],
                    "interval_ns": row["interval_ns"],
                    "block": row["block"],
                    "segment_list": row["segment_list"],
                    "session": row["session"],
                },
            )
            stats = direction_fields(row, FIELDS)
            stats.pop("interval_ns")
            item[row["direction"]] = stats
        return [items[k] for k in sorted(items)]
