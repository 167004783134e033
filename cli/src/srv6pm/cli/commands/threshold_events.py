"""`srv6pm thresholds session|policy NAME`: the delay threshold crossings of each segment list
a session (or a policy) probes: each metric's last report, and the events in a time range
(/v1/sessions|policies/{name}/threshold-events). The node decides them (a session's thresholds
with hysteresis); `thresholds set|show` are the controller's objectives."""

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

Name = Annotated[str, typer.Argument(show_default=False)]
Limit = Annotated[int, typer.Option(min=1, max=10_000, help="Events per page.")]
METRICS = ("two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter")
Metric = Annotated[
    str | None,
    typer.Option(metavar="|".join(METRICS), help="Only this metric.", show_default=False),
]


def _at(ns: int) -> Text:
    return Text(datetime.fromtimestamp(ns / NS, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3])


def _us(ns: int | None) -> str | None:
    return None if ns is None else f"{ns / 1e3:.1f}"


def _change(e: dict[str, Any]) -> Text:
    """How far the value moved from its reference, red when up (slower), green when down."""
    if e["reference_ns"] is None:
        return Text("first", style="dim")
    delta = e["value_ns"] - e["reference_ns"]
    ratio = f" ({delta / e['reference_ns']:+.0%})" if e["reference_ns"] else ""
    return Text(f"{delta / 1e3:+.1f}{ratio}", style="bold red" if delta > 0 else "green")


def _row(e: dict[str, Any]) -> list[Any]:
    return [
        _at(e["at_ns"]),
        e["session"],
        cell(e["segment_list"]),
        e["metric"],
        _us(e["value_ns"]),
        cell(_us(e["reference_ns"])),
        _change(e),
        "burst" if e["accelerated"] else "interval",
    ]


COLUMNS = ["time (UTC)", "session", "segment list", "metric", "µs", "from µs", "change", "on"]


def _render(body: dict[str, Any], title: str) -> Iterator[RenderableType]:
    latest = body["latest"]
    if not latest:
        yield Text(f"{title}: no threshold event (no session probes it with thresholds on)")
    else:
        yield table(f"{title}: last reported", COLUMNS, (_row(e) for e in latest))
    events = body["events"]
    yield table("events", COLUMNS, (_row(e) for e in events))
    if body["next_start"] is not None:
        more = since_of(body["next_start"], at_item=True)
        yield Text(f"{len(events)} events; more: --since {more}", style="yellow")
    else:
        yield Text(f"{len(events)} events", style="dim")


def _show(
    ctx: typer.Context,
    kind: str,
    name: str,
    since: str,
    until: str | None,
    limit: int,
    segment_list: str | None,
    metric: str | None,
) -> None:
    if metric is not None and metric not in METRICS:
        raise typer.BadParameter(
            f"{metric!r} is not one of {', '.join(METRICS)}", param_hint="--metric"
        )
    st = state(ctx)
    start, end = window(since, until)
    body = st.api.get(
        path("v1", kind, name, "threshold-events"),
        start=start,
        end=end,
        limit=limit,
        **filters(segment_list),
        **({} if metric is None else {"metric": metric}),
    )
    noun = "session" if kind == "sessions" else "policy"
    st.out.show(body, lambda b: _render(b, f"threshold events of {noun} {name}"))


def session(
    ctx: typer.Context,
    name: Name,
    since: Since = "1d",
    until: Until = None,
    limit: Limit = 1000,
    segment_list: SegmentList = None,
    metric: Metric = None,
) -> None:
    """A session's delay threshold crossings: each metric's last report (the value its node
    compares against now), and the events in the window, oldest first."""
    _show(ctx, "sessions", name, since, until, limit, segment_list, metric)


def policy(
    ctx: typer.Context,
    name: Name,
    since: Since = "1d",
    until: Until = None,
    limit: Limit = 1000,
    segment_list: SegmentList = None,
    metric: Metric = None,
) -> None:
    """Each segment list of a policy: its delay threshold crossings, the last per metric and
    the events in the window."""
    _show(ctx, "policies", name, since, until, limit, segment_list, metric)
