"""`srv6pm nodes`: routers and their node managers (/v1/nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.text import Text

from ..client import path
from ..common import Limit, Offset, UsageProblem, Wait, WaitTimeout, state
from ..render import fields, page_note, table, when
from ..render import state as status_text
from .changes import changed, deleted

app = typer.Typer(help="Routers and their node managers.", no_args_is_help=True)
KIND = "node"

Name = Annotated[str, typer.Argument(help="The node's name (e.g. r1).", show_default=False)]


def _endpoint() -> Any:
    return typer.Option(metavar="HOST:PORT", help="The node manager's gRPC address.")


Endpoint = Annotated[str, _endpoint()]
ProbeAddress = Annotated[
    str | None,
    typer.Option(metavar="IPV6", help="STAMP source and reflector address of the node."),
]
CoreInterfaces = Annotated[
    list[str] | None,
    typer.Option(
        "--core-interface",
        metavar="IFACE",
        help="An interface facing the SRv6 domain (repeat; none: all but lo and boundary ones).",
    ),
]
BoundaryInterfaces = Annotated[
    list[str] | None,
    typer.Option(
        "--boundary-interface",
        metavar="IFACE",
        help="An interface facing outside the domain, where foreign marks are removed (repeat).",
    ),
]


def _reachable(node: dict[str, Any]) -> Text:
    if node["reachable"] is None:
        return Text("not contacted yet", style="dim")
    return Text("yes", style="green") if node["reachable"] else Text("no", style="bold red")


def render_node(node: dict[str, Any]) -> Iterator[RenderableType]:
    rows: list[tuple[str, Any]] = [
        ("endpoint", node["endpoint"]),
        ("probe address", node["probe_address"]),
        ("core interfaces", node["core_interfaces"] or "(all but lo and boundary)"),
        ("boundary interfaces", node["boundary_interfaces"]),
        ("reachable", _reachable(node)),
        ("last attempt", when(node["last_attempt"])),
        ("status", status_text(node["status"])),
        ("revision", node["status"]["revision"]),
    ]
    info = node["info"]
    if info:
        rows += [
            ("driver", f"{info['driver']} {info['version']}"),
            ("period", f"{info['period_s']:g} s"),
            ("interfaces", info["interfaces"]),
            ("behaviours", info["behaviours"]),
            ("encap modes", info["encap_modes"]),
            ("max flows", info["max_flows"]),
            ("max segments", info["max_segments"]),
        ]
        rows += [("warning", Text(w, style="yellow")) for w in info["warnings"]]
    yield fields(f"node {node['name']}", rows)


def render_list(body: dict[str, Any]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["name", "driver", "endpoint", "probe address", "core", "boundary", "reachable", "status"],
        (
            [
                n["name"],
                n["info"]["driver"] if n["info"] else Text("-", style="dim"),
                n["endpoint"],
                n["probe_address"],
                n["core_interfaces"],
                n["boundary_interfaces"],
                _reachable(n),
                status_text(n["status"]),
            ]
            for n in body["items"]
        ),
    )
    yield page_note(body, "nodes")


@app.command("list")
def list_nodes(ctx: typer.Context, limit: Limit = 100, offset: Offset = 0) -> None:
    """List nodes."""
    st = state(ctx)
    st.out.show(st.api.get("/v1/nodes", limit=limit, offset=offset), render_list)


@app.command()
def show(ctx: typer.Context, name: Name) -> None:
    """Show a node: its settings, what its node manager said of itself, its status."""
    st = state(ctx)
    st.out.show(st.api.get(path("v1", "nodes", name)), render_node)


@app.command()
def add(
    ctx: typer.Context,
    name: Name,
    endpoint: Endpoint,
    probe_address: ProbeAddress = None,
    core_interface: CoreInterfaces = None,
    boundary_interface: BoundaryInterfaces = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Add a node (a router with a node manager)."""
    st = state(ctx)
    body: dict[str, Any] = {"name": name, "endpoint": endpoint}
    if probe_address:
        body["probe_address"] = probe_address
    if core_interface:
        body["core_interfaces"] = core_interface
    if boundary_interface:
        body["boundary_interfaces"] = boundary_interface
    created = st.api.post("/v1/nodes", body)
    where = path("v1", "nodes", name)
    changed(st, created, where, f"{KIND} {name}", wait, wait_timeout, render_node)


@app.command()
def update(
    ctx: typer.Context,
    name: Name,
    endpoint: Annotated[str | None, _endpoint()] = None,
    probe_address: Annotated[
        str | None,
        typer.Option(metavar="IPV6", help="STAMP address of the node ('' removes it)."),
    ] = None,
    core_interface: CoreInterfaces = None,
    boundary_interface: BoundaryInterfaces = None,
    clear_core_interfaces: Annotated[
        bool, typer.Option(help="Count on every interface but lo and the boundary ones.")
    ] = False,
    clear_boundary_interfaces: Annotated[
        bool, typer.Option(help="No boundary interfaces.")
    ] = False,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Change a node: only the options given change; a list option replaces the whole list."""
    st = state(ctx)
    body: dict[str, Any] = {}
    if endpoint is not None:
        body["endpoint"] = endpoint
    if probe_address is not None:
        body["probe_address"] = probe_address or None
    if core_interface or clear_core_interfaces:
        body["core_interfaces"] = core_interface or []
    if boundary_interface or clear_boundary_interfaces:
        body["boundary_interfaces"] = boundary_interface or []
    if not body:
        raise UsageProblem("nothing to change: give at least one option")
    where = path("v1", "nodes", name)
    updated = st.api.patch(where, body)
    changed(st, updated, where, f"{KIND} {name}", wait, wait_timeout, render_node)


@app.command()
def delete(
    ctx: typer.Context, name: Name, wait: Wait = False, wait_timeout: WaitTimeout = 120.0
) -> None:
    """Delete a node (refused while local SIDs or policies use it)."""
    deleted(state(ctx), path("v1", "nodes", name), KIND, name, wait, wait_timeout)
