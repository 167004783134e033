"""`srv6pm results policy`: a policy's loss (or delay) per block over all its segment lists, one
row per segment list and, for loss, the policy's total (/v1/policies/{name}/loss|delay)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.text import Text

from ..client import path
from ..common import state
from .results import (
    AfterBlock,
    PageLimit,
    SegmentList,
    Since,
    Until,
    delay_table,
    filters,
    loss_table,
    window,
)

Policy = Annotated[str, typer.Argument(help="The policy's name.", show_default=False)]
TOTAL = "total"  # the segment list column of a block's total row


def loss_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Each block's segment lists, then its total (as a row of the same shape)."""
    rows: list[dict[str, Any]] = []
    for block in body["items"]:
        rows += block["segment_lists"]
        total = {"block": block["block"], "start_ns": block["start_ns"], "segment_list": TOTAL}
        for direction, sums in block["total"].items():
            missing = sums["not_measured"]
            total[direction] = {
                **sums,
                # a partial sum is shown, and the reason names what it lacks
                "valid": sums["segment_lists"] > 0,
                "reason": "without " + ", ".join(s or "''" for s in missing) if missing else "",
            }
        rows.append(total)
    return rows


def delay_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for block in body["items"] for item in block["segment_lists"]]


def policy(
    ctx: typer.Context,
    name: Policy,
    delay: Annotated[
        bool, typer.Option("--delay", help="Delay per segment list instead of loss.")
    ] = False,
    since: Since = "1h",
    until: Until = None,
    limit: PageLimit = 100,
    after_block: AfterBlock = -1,
    segment_list: SegmentList = None,
) -> None:
    """A policy's loss per block over all its segment lists: a row per segment list and the
    policy's total (tx and rx summed); with --delay, each segment list's delay."""
    st = state(ctx)
    start, end = window(since, until)
    what = "delay" if delay else "loss"
    body = st.api.get(
        path("v1", "policies", name, what),
        start=start,
        end=end,
        limit=limit,
        after_block=after_block,
        **filters(segment_list),
    )

    def render(b: dict[str, Any]) -> Iterator[RenderableType]:
        title = f"{what} of policy {name}"
        yield delay_table(delay_rows(b), title) if delay else loss_table(loss_rows(b), title)
        after = b["next_after_block"]
        blocks = len(b["items"])
        if after is None:
            yield Text(f"{blocks} blocks", style="dim")
        else:
            yield Text(f"{blocks} blocks; more: --after-block {after}", style="yellow")

    st.out.show(body, render)
