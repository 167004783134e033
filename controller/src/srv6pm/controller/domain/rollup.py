"""A policy's loss over its segment lists: each segment list is a path of its own (its own
flow, counters and STAMP session), so the policy's packets in a block are the sum of its segment
lists' packets in that block (RFC 9341 counts add up over disjoint flows)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def loss_total(
    items: Iterable[Mapping[str, Any]], direction: str, known: set[tuple[str, str]]
) -> dict[str, Any]:
    """The sum of one block's valid `direction` counts over its segment list items (each with
    `segment_list`, `session` and per direction tx, rx, lost, valid). `known` are the (segment
    list, session) pairs measured around this block: those without a valid count here are named
    in `not_measured`, since a total without them is a lower bound."""
    counted = [
        (item["segment_list"], item["session"], item[direction])
        for item in items
        if (item.get(direction) or {}).get("valid")
    ]
    tx = sum(d["tx"] for _, _, d in counted)
    rx = sum(d["rx"] for _, _, d in counted)
    lost = sum(d["lost"] for _, _, d in counted)
    missing = known - {(sl, session) for sl, session, _ in counted}
    return {
        "tx": tx if counted else None,
        "rx": rx if counted else None,
        "lost": lost if counted else None,
        "loss_ratio": lost / tx if tx else None,
        "segment_lists": len(counted),
        "not_measured": sorted({sl for sl, _ in missing}),
    }
