"""Loss, delay and per-hop counts of a session or a policy, read back from InfluxDB.

Blocks come a page at a time (both directions of a block together, one item per segment list),
or summed per interval; a policy's blocks roll its segment lists up (loss: their sum per block);
localisation gives, for one block, what every node of each direction's path counted and the loss
on each segment between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from srv6pm.common.influxql import escape_regex, string_literal

from ..adapters.influx import InfluxResults
from ..domain.errors import Invalid, NotFound
from ..domain.localisation import HopCount, SegmentLoss, segments
from ..domain.model import Fleet
from ..domain.paths import path
from ..domain.rollup import loss_total

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
# The delay histogram: one field per bin, named by its upper edge in ns (docs/RESULTS.md)
BIN_PREFIX = "hist_lt_"
BINS = f"/^{BIN_PREFIX}/"


@dataclass(frozen=True)
class Scope:
    """Whose results: a session's or a policy's (`tag`), all segment lists or one of them ("":
    a policy's only one, whose points have no segment_list tag)."""

    tag: str
    name: str
    segment_list: str | None = None

    def where(self) -> str:
        out = f'"{self.tag}" = {string_literal(self.name)}'
        if self.tag == "session":
            # A session probing several segment lists has a sender per segment list, named
            # "<session>/<segment list>" on its node (session names have no "/")
            senders = f"/^{escape_regex(self.name)}\\/[^\\/]+$/"
            out = f'({out} OR "session" =~ {senders})'
        if self.segment_list is not None:
            out += f' AND "segment_list" = {string_literal(self.segment_list)}'
        return out


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

    def _where(self, scope: Scope, window: Window) -> str:
        return (
            f"{scope.where()} AND time >= {window.start_ns} "
            f"AND time < {window.end_ns} AND block > {window.after_block}"
        )

    def blocks(self, measurement: str, scope: Scope, window: Window) -> list[dict[str, Any]]:
        """One item per block, segment list and session: its start and each direction's
        fields, oldest first; the page holds every item of its first `window.limit` blocks."""
        fields = LOSS_FIELDS if measurement == "loss" else (*DELAY_FIELDS, BINS)
        # LIMIT applies per series (one point per block each): the first `limit` blocks of the
        # union are complete in every series
        rows = self._influx.rows(
            f"SELECT {', '.join(fields)} FROM {measurement} "
            f"WHERE {self._where(scope, window)} GROUP BY direction, segment_list, session "
            f"ORDER BY time ASC LIMIT {window.limit}"
        )
        pages = sorted({row["block"] for row in rows})[: window.limit]
        items: dict[tuple[int, str, str], dict[str, Any]] = {}
        for row in rows:
            if pages and row["block"] > pages[-1]:
                continue
            key = (row["block"], row["segment_list"], row["session"])
            item = items.setdefault(
                key,
                {
                    "block": row["block"],
                    "start_ns": row["time"],
                    "segment_list": row["segment_list"],
                    "session": row["session"],
                },
            )
            item[row["direction"]] = direction_fields(row, fields)
        return [items[k] for k in sorted(items)]

    def policy_blocks(self, measurement: str, scope: Scope, window: Window) -> list[dict[str, Any]]:
        """A policy's blocks: per block, its segment lists' items; loss adds their total."""
        by_block: dict[int, dict[str, Any]] = {}
        for item in self.blocks(measurement, scope, window):
            block = by_block.setdefault(
                item["block"],
                {"block": item["block"], "start_ns": item["start_ns"], "segment_lists": []},
            )
            block["segment_lists"].append(item)
        if measurement == "loss":
            measured = {
                (i["segment_list"], i["session"])
                for b in by_block.values()
                for i in b["segment_lists"]
            }
            for block in by_block.values():
                block["total"] = {
                    d: loss_total(block["segment_lists"], d, measured)
                    for d in ("forward", "reverse")
                }
        return [by_block[b] for b in sorted(by_block)]

    def loss_per_interval(
        self, scope: Scope, window: Window, interval: str
    ) -> list[dict[str, Any]]:
        """Sums per interval and direction (over every segment list in scope): blocks, valid
        blocks, tx, rx, lost, loss ratio."""
        if interval not in INTERVALS:
            raise Invalid(f"interval must be one of {', '.join(INTERVALS)}")
        rows = self._influx.rows(
            "SELECT count(valid) AS blocks, count(tx) AS valid_blocks, sum(tx) AS tx, "
            f"sum(rx) AS rx, sum(lost) AS lost FROM loss WHERE {self._where(scope, window)} "
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


def direction_fields(row: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """One direction's fields of a row; the delay histogram's bins as edges and counts."""
    out = {k: row[k] for k in fields if k not in ("block", BINS)}
    if BINS in fields:
        out["histogram"] = histogram(row)
    return out


def histogram(row: dict[str, Any]) -> dict[str, list[int]] | None:
    """`{"edges_ns", "counts"}` from a row's `hist_lt_<edge>` columns; None without bins. A
    row holds only its own session's bins: other edges' columns are null in it."""
    bins = {
        k.removeprefix(BIN_PREFIX): v
        for k, v in row.items()
        if k.startswith(BIN_PREFIX) and v is not None
    }
    if not bins:
        return None
    edges = sorted(int(e) for e in bins if e != "inf")
    return {
        "edges_ns": edges,
        "counts": [bins[str(e)] for e in edges] + [bins.get("inf", 0)],
    }
