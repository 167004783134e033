"""Loss, delay and per-hop counts of a session, read back from InfluxDB.

Blocks come a page at a time (both directions of a block together), or summed per interval;
localisation gives, for one block, what every node of each direction's path counted and the loss
on each segment between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from srv6pm.common.influxql import string_literal

from ..adapters.influx import InfluxResults
from ..domain.errors import Invalid, NotFound
from ..domain.localisation import HopCount, SegmentLoss, segments
from ..domain.model import Fleet
from ..domain.paths import path

LOSS_FIELDS = ("block", "tx", "rx", "lost", "loss_ratio", "valid", "reason")
DELAY_FIELDS = (
    "block",
    "probes_sent",
    "probes_lost",
    "samples",
    "min_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "max_ns",
    "mean_ns",
    "jitter_ns",
    "valid",
    "reason",
)
INTERVALS = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600, "6h": 21600, "1d": 86400}


@dataclass(frozen=True)
class Window:
    """A time range [start, end) in ns since the epoch, and a page of blocks after a block."""

    start_ns: int
    end_ns: int
    limit: int
    after_block: int = -1


@dataclass(frozen=True)
class Direction:
    direction: str
    policy: str
    path: tuple[str, ...]
    counts: list[HopCount]
    segments: list[SegmentLoss]
    end_to_end: int | None


class ResultsService:
    def __init__(self, influx: InfluxResults) -> None:
        self._influx = influx

    def _where(self, session: str, window: Window) -> str:
        return (
            f'"session" = {string_literal(session)} AND time >= {window.start_ns} '
            f"AND time < {window.end_ns} AND block > {window.after_block}"
        )

    def blocks(self, measurement: str, session: str, window: Window) -> list[dict[str, Any]]:
        """One item per block: its start and each direction's fields, oldest first."""
        fields = LOSS_FIELDS if measurement == "loss" else DELAY_FIELDS
        rows = self._influx.rows(
            f"SELECT {', '.join(fields)} FROM {measurement} "
            f"WHERE {self._where(session, window)} GROUP BY direction "
            f"ORDER BY time ASC LIMIT {window.limit}"
        )
        by_block: dict[int, dict[str, Any]] = {}
        for row in rows:
            item = by_block.setdefault(
                row["block"], {"block": row["block"], "start_ns": row["time"]}
            )
            item[row["direction"]] = {k: row[k] for k in fields if k != "block"}
        return [by_block[b] for b in sorted(by_block)][: window.limit]

    def loss_per_interval(
        self, session: str, window: Window, interval: str
    ) -> list[dict[str, Any]]:
        """Sums per interval and direction: blocks, valid blocks, tx, rx, lost, loss ratio."""
        if interval not in INTERVALS:
            raise Invalid(f"interval must be one of {', '.join(INTERVALS)}")
        rows = self._influx.rows(
            "SELECT count(valid) AS blocks, count(tx) AS valid_blocks, sum(tx) AS tx, "
            f"sum(rx) AS rx, sum(lost) AS lost FROM loss WHERE {self._where(session, window)} "
            f"GROUP BY time({interval}), direction fill(none) LIMIT {window.limit}"
        )
        for row in rows:
            tx = row["tx"] or 0
            row["loss_ratio"] = (row["lost"] or 0) / tx if tx else None
            row["start_ns"] = row.pop("time")
        return sorted(rows, key=lambda r: (r["start_ns"], r["direction"]))

    def hops(self, session: str, block: int, fleet: Fleet) -> list[Direction]:
        """What every node of both paths counted in `block`, and the loss of each segment."""
        measured = fleet.sessions.get(session)
        if measured is None:
            raise NotFound(f"session {session} does not exist")
        policies = [fleet.policies[measured.policy], fleet.policies[measured.return_policy]]
        info = fleet.nodes[policies[0].head_node].info
        when = f"time = {block * info.period_ns}" if info else f"block = {block}"
        flows = " OR ".join(f'"flow" = {string_literal(p.name)}' for p in policies)
        rows = self._influx.rows(
            f"SELECT packets, valid, reason FROM flow WHERE ({flows}) AND {when} "
            "GROUP BY flow, node"
        )
        out = []
        for direction, policy in zip(("forward", "reverse"), policies, strict=True):
            nodes = path(policy, fleet)
            counts = {
                r["node"]: HopCount(
                    r["node"], r["packets"] if r["valid"] else None, r["reason"] or ""
                )
                for r in rows
                if r["flow"] == policy.name
            }
            ordered = [counts.get(n, HopCount(n, None, "no record")) for n in nodes]
            first, last = ordered[0].packets, ordered[-1].packets
            out.append(
                Direction(
                    direction,
                    policy.name,
                    nodes,
                    ordered,
                    segments(nodes, counts),
                    None if first is None or last is None else first - last,
                )
            )
        return out
