"""`srv6pm results`: a session's loss and delay per block (one row per segment list it probes,
with the delay histogram), per-hop counts of one block, a live view and plots
(/v1/sessions/{name}/loss|delay|hops, as InfluxDB holds them)."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from itertools import count as counting
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..client import Api, ApiError, Unreachable, path
from ..common import CommandError, state
from ..render import cell, table

app = typer.Typer(
    help="Loss and delay per block, per-hop counts, live view, plots.", no_args_is_help=True
)

DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
PAGE = 1000  # blocks per request when a command reads a whole window
NS = 10**9

Session = Annotated[str, typer.Argument(help="The session's name.", show_default=False)]
WHEN_HELP = "{}: a duration back from now (30s, 15m, 1h, 2d) or a time (ISO 8601, UTC if no zone)."
Since = Annotated[str, typer.Option(metavar="WHEN", help=WHEN_HELP.format("From"))]
Until = Annotated[
    str | None,
    typer.Option(metavar="WHEN", help=WHEN_HELP.format("Until (default: now)"), show_default=False),
]
PageLimit = Annotated[int, typer.Option(min=1, max=10_000, help="Blocks per page.")]
AfterBlock = Annotated[
    int, typer.Option(min=-1, metavar="K", help="Only blocks after block K (the next page).")
]
SegmentList = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="Only this segment list ('': a policy's only one; default: every one).",
        show_default=False,
    ),
]


def instant_ns(spec: str, now_ns: int, option: str) -> int:
    """ns since the epoch of `spec`: a duration before `now_ns`, or an ISO 8601 time."""
    match = DURATION.fullmatch(spec.strip())
    if match:
        return max(0, now_ns - int(float(match[1]) * UNIT_S[match[2]] * NS))
    try:
        parsed = datetime.fromisoformat(spec)
    except ValueError:
        raise typer.BadParameter(
            f"{spec!r} is neither a duration (30s, 15m, 1h, 2d, 1w) nor an ISO 8601 time",
            param_hint=option,
        ) from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp()) * NS + parsed.microsecond * 1000


def window(since: str, until: str | None) -> tuple[int, int]:
    now = time.time_ns()
    end = instant_ns(until, now, "--until") if until else now
    start = instant_ns(since, now, "--since")
    if start >= end:
        raise typer.BadParameter(
            f"--since {since} is not before --until {until}", param_hint="--since"
        )
    return start, end


def since_of(ns: int, at_item: bool = False) -> str:
    """A --since for a page that starts at `ns` (an ISO time keeps µs). A start just after the
    last item shown (`at_item` false) is rounded up, so it never repeats that item; a start at
    the next item's own time is rounded down, so it never skips it (it may repeat one of the
    same microsecond)."""
    us = ns // 1000 if at_item else -(-ns // 1000)
    at = datetime.fromtimestamp(us // 10**6, UTC).replace(microsecond=us % 10**6)
    return at.isoformat()


def filters(segment_list: str | None) -> dict[str, str]:
    """Query parameters of the optional segment list filter."""
    return {} if segment_list is None else {"segment_list": segment_list}


def all_blocks(api: Api, session: str, what: str, start: int, end: int) -> list[dict[str, Any]]:
    """Every block of the window, page after page."""
    items: list[dict[str, Any]] = []
    after = -1
    while True:
        page = api.get(
            path("v1", "sessions", session, what),
            start=start,
            end=end,
            limit=PAGE,
            after_block=after,
        )
        items += page["items"]
        if page["next_after_block"] is None or not page["items"]:
            return items
        after = page["next_after_block"]


# ---- cells ---------------------------------------------------------------------------------------


MS = "%Y-%m-%d %H:%M:%S.%f"  # trimmed to ms by _time


def _time(start_ns: int, fmt: str = "%Y-%m-%d %H:%M:%S") -> Text:
    text = datetime.fromtimestamp(start_ns / NS, UTC).strftime(fmt)
    return Text(text[:-3] if fmt == MS else text)


def _lost(value: int | None) -> Text:
    if value is None:
        return cell(None)
    return Text(str(value), style="bold red" if value else "")


def _ratio(value: float | None) -> Text:
    if value is None:
        return cell(None)
    return Text(f"{value:.3%}", style="bold red" if value else "")


def _us(ns: int | None) -> Text:
    return cell(None) if ns is None else Text(f"{ns / 1000:.1f}")


def _reasons(item: dict[str, Any], directions: dict[str, str]) -> Text:
    """Why directions of a block could not be measured ('fwd: ...'), or had no record."""
    found = []
    for key, short in directions.items():
        d = item.get(key)
        if d is None:
            found.append(f"{short}: no record")
        elif not d.get("valid") or d.get("reason"):  # a valid one may qualify (a partial sum)
            found.append(f"{short}: {d.get('reason') or 'invalid'}")
    return Text("; ".join(found), style="yellow") if found else cell(None)


def _loss_cells(d: dict[str, Any] | None) -> list[Text]:
    if d is None or not d.get("valid"):
        return [cell(None)] * 4
    return [cell(d["tx"]), cell(d["rx"]), _lost(d["lost"]), _ratio(d["loss_ratio"])]


LOSS_DIRECTIONS = {"forward": "fwd", "reverse": "rev"}


def named_segment_lists(items: list[dict[str, Any]]) -> bool:
    """Whether a table needs a segment list column: not for a policy's only one ("")."""
    return any(item.get("segment_list") for item in items)


def loss_table(items: list[dict[str, Any]], title: str | None = None) -> Table:
    """One row per block (and segment list, when the policy has several)."""
    named = named_segment_lists(items)
    columns = ["block", "start (UTC)", *(["segment list"] if named else [])]
    columns += [f"{s} {c}" for s in LOSS_DIRECTIONS.values() for c in ("tx", "rx", "lost", "ratio")]
    return table(
        title,
        [*columns, "reason"],
        (
            [
                item["block"],
                _time(item["start_ns"]),
                *([cell(item.get("segment_list"))] if named else []),
                *_loss_cells(item.get("forward")),
                *_loss_cells(item.get("reverse")),
                _reasons(item, LOSS_DIRECTIONS),
            ]
            for item in items
        ),
    )


def _delay_cells(d: dict[str, Any] | None) -> list[Text]:
    if d is None or not d.get("valid"):
        return [cell(None)] * 3
    return [_us(d["p50_ns"]), _us(d["p99_ns"]), _us(d["max_ns"])]


def _us_edge(ns: int) -> str:
    return f"{ns / 1000:g}"


def bins_legend(edges_ns: list[int]) -> str:
    """`<100, 100-500, ≥500 µs`: the bins of a histogram, in µs."""
    if not edges_ns:
        return ""
    edges = [_us_edge(e) for e in edges_ns]
    middle = [f"{a}-{b}" for a, b in pairwise(edges)]
    return ", ".join([f"<{edges[0]}", *middle, f"≥{edges[-1]}"]) + " µs"


def _bins(d: dict[str, Any] | None) -> Text:
    """A histogram's counts, bin by bin (`0 7 2 1`): the bins are in the table's caption."""
    histogram = (d or {}).get("histogram") if (d or {}).get("valid") else None
    if not histogram:
        return cell(None)
    return Text(" ".join(str(c) for c in histogram["counts"]))


def histogram_caption(items: list[dict[str, Any]]) -> str | None:
    """The two-way bins of the page (each distinct set of edges, usually one)."""
    edges = []
    for item in items:
        found = ((item.get("two_way") or {}).get("histogram") or {}).get("edges_ns")
        if found and found not in edges:
            edges.append(found)
    return "; ".join(f"2w bins: {bins_legend(e)}" for e in edges) or None


def delay_table(items: list[dict[str, Any]], title: str | None = None) -> Table:
    """Two-way delay always; one-way columns only when some block has them (synced clocks);
    the two-way histogram's counts when the session has bin edges (the bins in the caption).
    Items of computation intervals (with `interval_ns`) lead with their start and length."""
    one_way = [
        k for k in ("forward", "reverse") if any((i.get(k) or {}).get("valid") for i in items)
    ]
    short = {"two_way": "2w", "forward": "fwd", "reverse": "rev"}
    shown = ["two_way", *one_way]
    named = named_segment_lists(items)
    caption = histogram_caption(items)
    per_interval = any("interval_ns" in i for i in items)
    columns = ["start (UTC)", "ms", "block"] if per_interval else ["block", "start (UTC)"]
    columns += ["segment list"] if named else []
    columns += [f"{short[k]} {s} (µs)" for k in shown for s in ("p50", "p99", "max")]
    columns += [*(["2w bins"] if caption else []), "samples", "probes lost", "reason"]

    def row(item: dict[str, Any]) -> list[Any]:
        two_way = item.get("two_way") or {}
        cells: list[Any] = (
            [_time(item["start_ns"], MS), item["interval_ns"] / 10**6, item["block"]]
            if per_interval
            else [item["block"], _time(item["start_ns"])]
        )
        cells += [cell(item.get("segment_list"))] if named else []
        for k in shown:
            cells += _delay_cells(item.get(k))
        cells += [_bins(item.get("two_way"))] if caption else []
        cells += [two_way.get("samples"), _lost(two_way.get("probes_lost"))]
        return [*cells, _reasons(item, {"two_way": "2w"})]

    out = table(title, columns, (row(i) for i in items))
    out.caption = caption
    return out


def _next_page(body: dict[str, Any]) -> RenderableType:
    after = body["next_after_block"]
    if after is None:
        return Text(f"{len(body['items'])} blocks", style="dim")
    return Text(f"{len(body['items'])} blocks; more: --after-block {after}", style="yellow")


def _show_blocks(
    ctx: typer.Context,
    session: str,
    what: str,
    render: Callable[[list[dict[str, Any]], str], Table],
    since: str,
    until: str | None,
    limit: int,
    after_block: int,
    segment_list: str | None,
) -> None:
    """One page of a session's per-block results (`what`: loss or delay) as a table."""
    st = state(ctx)
    start, end = window(since, until)
    body = st.api.get(
        path("v1", "sessions", session, what),
        start=start,
        end=end,
        limit=limit,
        after_block=after_block,
        **filters(segment_list),
    )
    st.out.show(body, lambda b: [render(b["items"], f"{what} of {session}"), _next_page(b)])


# ---- commands ------------------------------------------------------------------------------------


@app.command()
def loss(
    ctx: typer.Context,
    session: Session,
    since: Since = "1h",
    until: Until = None,
    limit: PageLimit = 100,
    after_block: AfterBlock = -1,
    segment_list: SegmentList = None,
) -> None:
    """Loss per block (and segment list), both directions, oldest first (one page)."""
    _show_blocks(ctx, session, "loss", loss_table, since, until, limit, after_block, segment_list)


@app.command()
def delay(
    ctx: typer.Context,
    session: Session,
    since: Since = "1h",
    until: Until = None,
    limit: PageLimit = 100,
    after_block: AfterBlock = -1,
    segment_list: SegmentList = None,
    computation_intervals: Annotated[
        bool,
        typer.Option(
            "--computation-intervals",
            help="Per computation interval of the session instead of per block "
            "(--limit intervals a page; --after-block does not apply).",
        ),
    ] = False,
) -> None:
    """Delay per block (and segment list) in µs: two-way p50/p99/max, one-way too when the
    clocks are synced, and the replies per delay bin when the session has bin edges."""
    if computation_intervals:
        _show_intervals(ctx, session, since, until, limit, segment_list)
        return
    _show_blocks(ctx, session, "delay", delay_table, since, until, limit, after_block, segment_list)


def _show_intervals(
    ctx: typer.Context,
    session: str,
    since: str,
    until: str | None,
    limit: int,
    segment_list: str | None,
) -> None:
    """One page of a session's delay per computation interval."""
    st = state(ctx)
    start, end = window(since, until)
    body = st.api.get(
        path("v1", "sessions", session, "delay", "computation-intervals"),
        start=start,
        end=end,
        limit=limit,
        **filters(segment_list),
    )

    def render(b: dict[str, Any]) -> Iterator[RenderableType]:
        title = f"delay of {session} per computation interval"
        if not b["items"]:
            yield Text(f"{title}: none (no computation interval, or none in the window)")
            return
        yield delay_table(b["items"], title)
        n = len({i["start_ns"] for i in b["items"]})
        if b["next_start"] is None:
            yield Text(f"{n} intervals", style="dim")
        else:
            more = since_of(b["next_start"])
            yield Text(f"{n} intervals; more: --since {more}", style="yellow")

    st.out.show(body, render)


@app.command()
def intervals(
    ctx: typer.Context,
    session: Session,
    interval: Annotated[
        str, typer.Option(metavar="1m|5m|15m|1h|6h|1d", help="The length of an interval.")
    ] = "1h",
    since: Since = "1d",
    until: Until = None,
    segment_list: SegmentList = None,
) -> None:
    """Loss summed per interval and direction (over every segment list, or one)."""
    st = state(ctx)
    start, end = window(since, until)
    body = st.api.get(
        path("v1", "sessions", session, "loss", "intervals"),
        interval=interval,
        start=start,
        end=end,
        **filters(segment_list),
    )

    def render(b: dict[str, Any]) -> Iterator[RenderableType]:
        yield table(
            f"loss of {session} per {b['interval']}",
            ["start (UTC)", "direction", "blocks", "measured", "tx", "rx", "lost", "ratio"],
            (
                [
                    _time(r["start_ns"]),
                    r["direction"],
                    r["blocks"],
                    r["valid_blocks"],
                    r["tx"],
                    r["rx"],
                    _lost(r["lost"]),
                    _ratio(r["loss_ratio"]),
                ]
                for r in b["items"]
            ),
        )

    st.out.show(body, render)


def path_line(direction: dict[str, Any]) -> Text:
    """`r1 [1000] --0--> r2 [1000] --5--> r3 [995]`, the segment with loss in red."""
    out = Text()
    for i, hop in enumerate(direction["counts"]):
        if i:
            lost = direction["segments"][i - 1]["lost"]
            style = "yellow" if lost is None else "bold red" if lost else "green"
            out.append(f" --{'?' if lost is None else lost}--> ", style=style)
        packets = hop["packets"]
        out.append(hop["node"], style="bold")
        out.append(f" [{'?' if packets is None else packets}]")
    return out


def hop_table(direction: dict[str, Any]) -> Table:
    """Each node's count, and between two nodes the segment's loss (red when packets died)."""
    rows: list[list[Any]] = []
    for i, hop in enumerate(direction["counts"]):
        if i:
            seg = direction["segments"][i - 1]
            name = Text(f"  {seg['src']} -> {seg['dst']}")
            if seg["lost"]:
                name.stylize("bold red")
            rows.append([name, None, _lost(seg["lost"]), None])
        rows.append([Text(hop["node"], style="bold"), hop["packets"], None, hop["reason"]])
    end_to_end = direction["end_to_end"]
    title = (
        f"{direction['direction']} (policy {direction['policy']}): "
        f"{'?' if end_to_end is None else end_to_end} lost end to end"
    )
    return table(title, ["node / segment", "packets", "lost", "reason"], rows)


@app.command()
def hops(
    ctx: typer.Context,
    session: Session,
    block: Annotated[int, typer.Option(min=0, metavar="K", help="The block.")],
) -> None:
    """For one block: what each node of both paths counted, and each segment's loss."""
    st = state(ctx)
    body = st.api.get(path("v1", "sessions", session, "hops"), block=block)

    def render(b: dict[str, Any]) -> Iterator[RenderableType]:
        yield Text(f"session {b['session']}, block {b['block']}", style="bold")
        for direction in b["directions"]:
            yield Text()
            yield path_line(direction)
            yield hop_table(direction)

    st.out.show(body, render)


# ---- watch ---------------------------------------------------------------------------------------


def latest(api: Api, session: str, since: str, blocks: int) -> dict[str, Any]:
    """The last `blocks` blocks of loss and of delay in the window (every segment list's)."""
    start, end = window(since, None)
    return {
        "session": session,
        "loss": last_blocks(all_blocks(api, session, "loss", start, end), blocks),
        "delay": last_blocks(all_blocks(api, session, "delay", start, end), blocks),
    }


def last_blocks(items: list[dict[str, Any]], blocks: int) -> list[dict[str, Any]]:
    """The items of the last `blocks` blocks (a block has one item per segment list)."""
    kept = set(sorted({i["block"] for i in items})[-blocks:])
    return [i for i in items if i["block"] in kept]


def watch_table(view: dict[str, Any], blocks: int, caption: str) -> Table:
    """Loss and two-way delay of the last `blocks` blocks, one row per block and segment list."""

    def key(item: dict[str, Any]) -> tuple[int, str]:
        return item["block"], item.get("segment_list", "")

    delays = {key(d): d for d in view["delay"]}
    loss_by_block = {key(item): item for item in view["loss"]}
    named = named_segment_lists([*view["loss"], *view["delay"]])
    last = sorted({block for block, _ in set(loss_by_block) | set(delays)})[-blocks:]
    rows = []
    for block, segment_list in sorted(set(loss_by_block) | set(delays)):
        if block not in last:
            continue
        item = loss_by_block.get((block, segment_list), {"block": block})
        delay = delays.get((block, segment_list)) or {}
        two_way = delay.get("two_way") or {}
        start_ns = item.get("start_ns") or delay.get("start_ns", 0)
        fwd = item.get("forward") or {}
        rev = item.get("reverse") or {}
        valid = two_way.get("valid")
        rows.append(
            [
                block,
                _time(start_ns, "%H:%M:%S"),
                *([cell(segment_list)] if named else []),
                _lost(fwd.get("lost") if fwd.get("valid") else None),
                _ratio(fwd.get("loss_ratio") if fwd.get("valid") else None),
                _lost(rev.get("lost") if rev.get("valid") else None),
                _ratio(rev.get("loss_ratio") if rev.get("valid") else None),
                _us(two_way.get("p50_ns") if valid else None),
                _us(two_way.get("p99_ns") if valid else None),
                _reasons(item, LOSS_DIRECTIONS) if "start_ns" in item else Text("no loss record"),
            ]
        )
    out = table(
        f"session {view['session']}",
        [
            "block",
            "start",
            *(["segment list"] if named else []),
            "fwd lost",
            "fwd ratio",
            "rev lost",
            "rev ratio",
            "2w p50 (µs)",
            "2w p99 (µs)",
            "reason",
        ],
        rows,
    )
    out.caption = caption
    return out


@app.command()
def watch(
    ctx: typer.Context,
    session: Session,
    interval: Annotated[
        float, typer.Option(min=0.1, metavar="SECONDS", help="Seconds between refreshes.")
    ] = 2.0,
    blocks: Annotated[int, typer.Option(min=1, max=1000, help="Blocks shown.")] = 10,
    since: Since = "1h",
    count: Annotated[
        int | None,
        typer.Option(min=1, help="Refresh this many times, then exit (default: until Ctrl-C)."),
    ] = None,
) -> None:
    """A live table of the last blocks' loss and delay, refreshed until Ctrl-C (exit 0).
    With --output json, one JSON line per refresh."""
    st = state(ctx)
    refreshes = counting(1) if count is None else iter(range(1, count + 1))
    caption = f"every {interval:g} s; Ctrl-C to stop"
    try:
        view = latest(st.api, session, since, blocks)  # an error here ends the command
        with contextlib.ExitStack() as stack:
            live = None
            if not st.out.json:
                live = stack.enter_context(Live(console=st.out.console, auto_refresh=False))
            for n in refreshes:
                note = ""
                if n > 1:
                    time.sleep(interval)
                    try:
                        view = latest(st.api, session, since, blocks)
                    except (ApiError, Unreachable) as e:  # keep watching: said, retried
                        note = f"last refresh failed: {e}"
                if live is None:
                    if note:
                        st.out.warn(note)
                    else:
                        typer.echo(json.dumps(view))
                    continue
                stamp = datetime.now(UTC).strftime("%H:%M:%S")
                title = f"{stamp} UTC, {caption}" + (f"; {note}" if note else "")
                live.update(watch_table(view, blocks, title), refresh=True)
    except KeyboardInterrupt:
        return


# ---- plot ----------------------------------------------------------------------------------------


@app.command()
def plot(
    ctx: typer.Context,
    session: Session,
    out: Annotated[Path, typer.Option(metavar="FILE.png", help="The PNG to write.")],
    since: Since = "1h",
    until: Until = None,
    ratio: Annotated[
        bool, typer.Option(help="Plot the loss ratio (%) instead of lost packets.")
    ] = False,
) -> None:
    """A PNG: loss per block (both directions) above, two-way delay p50/p99 per block below."""
    # matplotlib takes ~0.35 s to import (twice the rest of the CLI): only this command pays
    from ..plot import plot as draw  # noqa: PLC0415

    st = state(ctx)
    start, end = window(since, until)
    losses = all_blocks(st.api, session, "loss", start, end)
    delays = all_blocks(st.api, session, "delay", start, end)
    if not losses and not delays:
        raise CommandError(f"session {session} has no results from {since} to {until or 'now'}")
    draw(out, session, losses, delays, ratio)
    blocks = {i["block"] for i in losses} | {i["block"] for i in delays}
    st.out.show(
        {"session": session, "file": str(out), "blocks": len(blocks)},
        lambda b: [Text(f"{b['file']}: {b['blocks']} blocks of session {session}")],
    )
