"""`srv6pm sids`: local SIDs instantiated on nodes (/v1/local-sids), what policies go through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from ..client import path
from ..common import Limit, Offset, UsageProblem, Wait, WaitTimeout, state
from ..render import fields, page_note, table
from ..render import state as status_text
from .changes import changed, deleted

app = typer.Typer(
    help="Local SIDs on nodes (what a policy's SID list goes through).", no_args_is_help=True
)
KIND = "local-sid"
BEHAVIOURS = "End, End.X, End.T, End.DT4, End.DT6, End.DT46, End.DX4 or End.DX6"

Sid = Annotated[str, typer.Argument(metavar="SID", help="The SID (an IPv6 address).")]


def _opt(help_text: str, metavar: str | None = None) -> Any:
    return typer.Option(help=help_text, metavar=metavar, show_default=False)


NexthopHelp = "End.X and End.DX6: an IPv6 nexthop; End.DX4: an IPv4 one."
LookupHelp = "End.T, End.DT*: the routing table to look the inner packet up in."
DeviceHelp = "Device of the seg6local route ('' for none)."
TableHelp = "The routing table the SID's own route goes in (0: main)."


def render_sid(sid: dict[str, Any]) -> Iterator[RenderableType]:
    yield fields(
        f"local SID {sid['sid']}",
        [
            ("node", sid["node"]),
            ("behaviour", sid["behaviour"]),
            ("nexthop", sid["nexthop"]),
            ("lookup table", sid["lookup_table"] or None),
            ("device", sid["device"]),
            ("table", sid["table"] or None),
            ("status", status_text(sid["status"])),
            ("revision", sid["status"]["revision"]),
        ],
    )


def render_list(body: dict[str, Any]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["sid", "node", "behaviour", "nexthop", "lookup table", "device", "table", "status"],
        (
            [
                s["sid"],
                s["node"],
                s["behaviour"],
                s["nexthop"],
                s["lookup_table"] or None,
                s["device"],
                s["table"] or None,
                status_text(s["status"]),
            ]
            for s in body["items"]
        ),
    )
    yield page_note(body, "local SIDs")


@app.command("list")
def list_sids(
    ctx: typer.Context,
    node: Annotated[str | None, _opt("Only the SIDs of this node.", "NODE")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> None:
    """List local SIDs."""
    st = state(ctx)
    body = st.api.get("/v1/local-sids", node=node, limit=limit, offset=offset)
    st.out.show(body, render_list)


@app.command()
def show(ctx: typer.Context, sid: Sid) -> None:
    """Show a local SID."""
    st = state(ctx)
    st.out.show(st.api.get(path("v1", "local-sids", sid)), render_sid)


@app.command()
def add(
    ctx: typer.Context,
    sid: Sid,
    node: Annotated[str, _opt("The node that holds the SID.", "NODE")],
    behaviour: Annotated[str, _opt(f"RFC 8986 behaviour: {BEHAVIOURS}.", "BEHAVIOUR")],
    nexthop: Annotated[str | None, _opt(NexthopHelp, "ADDRESS")] = None,
    lookup_table: Annotated[int, _opt(LookupHelp, "N")] = 0,
    device: Annotated[str, _opt(DeviceHelp, "DEV")] = "",
    table_: Annotated[int, typer.Option("--table", help=TableHelp, metavar="N")] = 0,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Add a local SID to a node."""
    st = state(ctx)
    body: dict[str, Any] = {
        "sid": sid,
        "node": node,
        "behaviour": behaviour,
        "lookup_table": lookup_table,
        "device": device,
        "table": table_,
    }
    if nexthop:
        body["nexthop"] = nexthop
    created = st.api.post("/v1/local-sids", body)
    where = path("v1", "local-sids", created["sid"])
    changed(st, created, where, f"local SID {sid}", wait, wait_timeout, render_sid)


@app.command()
def update(
    ctx: typer.Context,
    sid: Sid,
    behaviour: Annotated[str | None, _opt(f"{BEHAVIOURS}.", "BEHAVIOUR")] = None,
    nexthop: Annotated[str | None, _opt(NexthopHelp + " '' removes it.", "ADDRESS")] = None,
    lookup_table: Annotated[int | None, _opt(LookupHelp, "N")] = None,
    device: Annotated[str | None, _opt(DeviceHelp, "DEV")] = None,
    table_: Annotated[int | None, typer.Option("--table", help=TableHelp, metavar="N")] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Change a local SID (only the options given change)."""
    st = state(ctx)
    given = {
        "behaviour": behaviour,
        "lookup_table": lookup_table,
        "device": device,
        "table": table_,
    }
    body: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if nexthop is not None:
        body["nexthop"] = nexthop or None
    if not body:
        raise UsageProblem("nothing to change: give at least one option")
    where = path("v1", "local-sids", sid)
    updated = st.api.patch(where, body)
    changed(st, updated, where, f"local SID {sid}", wait, wait_timeout, render_sid)


@app.command()
def delete(
    ctx: typer.Context, sid: Sid, wait: Wait = False, wait_timeout: WaitTimeout = 120.0
) -> None:
    """Delete a local SID (refused while a policy goes through it)."""
    deleted(state(ctx), path("v1", "local-sids", sid), KIND, sid, wait, wait_timeout)
