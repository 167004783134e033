"""`srv6pm liveness`: whether each segment list a session (or a policy) probes is up or down
now, since when, and its changes in a time range (/v1/sessions|policies/{name}/liveness)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.text import Text

from ..client import path
from ..common import state
from ..render import cell, table
from .results import NS, SegmentList, Since, Until, filters, since_of, window

app = typer.Typer(
    help="Liveness of the probed segment lists: up or down now, and the changes.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(show_default=False)]
Limit = Annotated[int, typer.Option(min=1, max=10_000, help="Changes per page.")]
STATE_STYLE = {"up": "green", "down": "bold red"}


def _state(value: str | None) -> Text:
    if value is None:
        return cell(None)
    return Text(value, style=STATE_STYLE.get(value, "yellow"))


def _at(ns: int) -> Text:
    return Text(datetime.fromtimestamp(ns / NS, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3])


def _render(body: dict[str, Any], title: str) -> Iterator[RenderableType]:
    current = body["current"]
    if not current:
        yield Text(f"{title}: no liveness state (no session probes it with liveness on)")
    else:
        yield table(
            f"{title} now",
            ["session", "segment list", "state", "since (UTC)", "in a row"],
            (
                [c["session"], c["segment_list"], _state(c["state"]), _at(c["at_ns"]),
                 c["consecutive"]]
                for c in current
            ),
        )  # fmt: skip
    changes = body["changes"]
    yield table(
        "changes",
        ["time (UTC)", "session", "segment list", "from", "to", "in a row"],
        (
            [_at(c["at_ns"]), c["session"], c["segment_list"], _state(c["previous"]),
             _state(c["state"]), c["consecutive"]]
            for c in changes
        ),
    )  # fmt: skip
    if body["next_start"] is not None:
        more = since_of(body["next_start"], at_item=True)
        yield Text(f"{len(changes)} changes; more: --since {more}", style="yellow")
    else:
        yield Text(f"{len(changes)} changes", style="dim")


def _show(
    ctx: typer.Context,
    kind: str,
    name: str,
    since: str,
    until: str | None,
    limit: int,
    segment_list: str | None,
) -> None:
    st = state(ctx)
    start, end = window(since, until)
    body = st.api.get(
        path("v1", kind, name, "liveness"),
        start=start,
        end=end,
        limit=limit,
        **filters(segment_list),
    )
    noun = "session" if kind == "sessions" else "policy"
    st.out.show(body, lambda b: _render(b, f"liveness of {noun} {name}"))


@app.command()
def session(
    ctx: typer.Context,
    name: Name,
    since: Since = "1d",
    until: Until = None,
    limit: Limit = 1000,
    segment_list: SegmentList = None,
) -> None:
    """A session's segment list: up or down now (its last change, however old), and the
    changes in the window, oldest first."""
    _show(ctx, "sessions", name, since, until, limit, segment_list)


@app.command()
def policy(
    ctx: typer.Context,
    name: Name,
    since: Since = "1d",
    until: Until = None,
    limit: Limit = 1000,
    segment_list: SegmentList = None,
) -> None:
    """Each segment list of a policy: up or down now, and the changes in the window."""
    _show(ctx, "policies", name, since, until, limit, segment_list)
