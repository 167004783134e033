"""`srv6pm policies`: SR policies (/v1/policies): a head-end steers a prefix into a SID list, or
hashes flows over several weighted segment lists."""

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
    help="SR policies: a head-end steers a prefix into a SID list.", no_args_is_help=True
)
KIND = "policy"

Name = Annotated[str, typer.Argument(help="The policy's name.", show_default=False)]
SEGMENT_HELP = "A SID of the list, in travel order (repeat: --segment A --segment B)."
ENCAP_HELP = "encap (H.Encaps), encap-red, inline (H.Insert) or l2encap (needs --device)."
DEVICE_HELP = "The device of the route (l2encap)."
TABLE_HELP = "The routing table the steering route goes in (0: main)."
LIST_HELP = (
    "A weighted segment list instead of --segment, NAME[:WEIGHT]=SID,SID,... (repeat for "
    "several; flows are hashed over them), e.g. --segment-list fast:3=fc00:0:2::e,fc00:0:3::d6."
)
PROTECTION_HELP = "Stop hashing flows onto a segment list while its liveness is down."


def segment_lists(specs: list[str]) -> list[dict[str, Any]]:
    """--segment-list NAME[:WEIGHT]=SID,SID,... as the API's segment_lists."""
    out = []
    for spec in specs:
        head, sep, sids = spec.partition("=")
        name, _, weight = head.partition(":")
        if not sep or not name or not sids:
            raise UsageProblem(f"--segment-list {spec!r}: expected NAME[:WEIGHT]=SID,SID,...")
        if weight and not weight.isdigit():
            raise UsageProblem(f"--segment-list {spec!r}: the weight must be a number")
        body: dict[str, Any] = {"name": name, "segments": sids.split(",")}
        if weight:
            body["weight"] = int(weight)
        out.append(body)
    return out


def _lists_text(p: dict[str, Any]) -> str:
    if len(p["segment_lists"]) == 1:
        return " -> ".join(p["segments"])
    return "\n".join(
        f"{sl['name']} (weight {sl['weight']}, flow mon id {sl['flow_mon_id']}): "
        + " -> ".join(sl["segments"])
        for sl in p["segment_lists"]
    )


def _opt(help_text: str, metavar: str | None = None, *names: str) -> Any:
    return typer.Option(*names, help=help_text, metavar=metavar, show_default=False)


def render_policy(p: dict[str, Any]) -> Iterator[RenderableType]:
    yield fields(
        f"policy {p['name']}",
        [
            ("head node", p["head_node"]),
            ("tail node", p["tail_node"]),
            ("prefix", p["prefix"]),
            ("segments" if len(p["segment_lists"]) == 1 else "segment lists", _lists_text(p)),
            *(
                (f"path {sl['name']}", " -> ".join(sl["path"]))
                for sl in p["segment_lists"]
                if len(p["segment_lists"]) > 1
            ),
            ("path", " -> ".join(p["path"]) if len(p["segment_lists"]) == 1 else None),
            ("encap mode", p["encap_mode"]),
            ("device", p["device"]),
            ("table", p["table"] or None),
            ("protection", p["protection"] or None),
            ("flow mon id", p["flow_mon_id"]),
            ("status", status_text(p["status"])),
            ("revision", p["status"]["revision"]),
        ],
    )


def render_list(body: dict[str, Any]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["name", "head", "tail", "prefix", "segments", "path", "encap", "flow mon id", "status"],
        (
            [
                p["name"],
                p["head_node"],
                p["tail_node"],
                p["prefix"],
                "\n".join(p["segments"]) or "\n".join(sl["name"] for sl in p["segment_lists"]),
                "\n".join(" -> ".join(sl["path"]) for sl in p["segment_lists"]),
                p["encap_mode"],
                p["flow_mon_id"] or ", ".join(str(sl["flow_mon_id"]) for sl in p["segment_lists"]),
                status_text(p["status"]),
            ]
            for p in body["items"]
        ),
    )
    yield page_note(body, "policies")


@app.command("list")
def list_policies(
    ctx: typer.Context,
    head_node: Annotated[str | None, _opt("Only policies with this head-end.", "NODE")] = None,
    tail_node: Annotated[str | None, _opt("Only policies with this tail end.", "NODE")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> None:
    """List SR policies."""
    st = state(ctx)
    body = st.api.get(
        "/v1/policies", head_node=head_node, tail_node=tail_node, limit=limit, offset=offset
    )
    st.out.show(body, render_list)


@app.command()
def show(ctx: typer.Context, name: Name) -> None:
    """Show a policy, with the path of nodes that count its packets."""
    st = state(ctx)
    st.out.show(st.api.get(path("v1", "policies", name)), render_policy)


@app.command()
def add(
    ctx: typer.Context,
    name: Name,
    head: Annotated[str, _opt("The head-end node (encapsulates).", "NODE")],
    tail: Annotated[str, _opt("The tail-end node (holds the last SID).", "NODE")],
    prefix: Annotated[str, _opt("The IPv6 prefix steered into the policy.", "PREFIX")],
    segment: Annotated[list[str] | None, _opt(SEGMENT_HELP, "SID")] = None,
    segment_list: Annotated[list[str] | None, _opt(LIST_HELP, "SPEC")] = None,
    encap_mode: Annotated[str, _opt(ENCAP_HELP, "MODE")] = "encap",
    device: Annotated[str, _opt(DEVICE_HELP, "DEV")] = "",
    table_: Annotated[int, _opt(TABLE_HELP, "N", "--table")] = 0,
    protection: Annotated[bool, _opt(PROTECTION_HELP)] = False,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Add an SR policy: one SID list (--segment ...) or weighted segment lists
    (--segment-list ...)."""
    st = state(ctx)
    if bool(segment) == bool(segment_list):
        raise UsageProblem("give --segment (one SID list) or --segment-list, not both or none")
    body: dict[str, Any] = {
        "name": name,
        "head_node": head,
        "tail_node": tail,
        "prefix": prefix,
        "encap_mode": encap_mode,
        "device": device,
        "table": table_,
        "protection": protection,
    }
    if segment:
        body["segments"] = segment
    else:
        body["segment_lists"] = segment_lists(segment_list or [])
    created = st.api.post("/v1/policies", body)
    where = path("v1", "policies", name)
    changed(st, created, where, f"{KIND} {name}", wait, wait_timeout, render_policy)


@app.command()
def update(
    ctx: typer.Context,
    name: Name,
    segment: Annotated[list[str] | None, _opt(SEGMENT_HELP + " Replaces the list.", "SID")] = None,
    segment_list: Annotated[
        list[str] | None, _opt(LIST_HELP + " Replaces the lists.", "SPEC")
    ] = None,
    prefix: Annotated[str | None, _opt("The IPv6 prefix steered into the policy.", "P")] = None,
    encap_mode: Annotated[str | None, _opt(ENCAP_HELP, "MODE")] = None,
    device: Annotated[str | None, _opt(DEVICE_HELP, "DEV")] = None,
    table_: Annotated[int | None, _opt(TABLE_HELP, "N", "--table")] = None,
    protection: Annotated[bool | None, _opt(PROTECTION_HELP)] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Change a policy (only the options given change; head and tail are fixed). A segment
    list kept by name keeps its FlowMonID."""
    st = state(ctx)
    if segment and segment_list:
        raise UsageProblem("give --segment or --segment-list, not both")
    given = {
        "segments": segment or None,
        "segment_lists": segment_lists(segment_list) if segment_list else None,
        "prefix": prefix,
        "encap_mode": encap_mode,
        "device": device,
        "table": table_,
        "protection": protection,
    }
    body = {k: v for k, v in given.items() if v is not None}
    if not body:
        raise UsageProblem("nothing to change: give at least one option")
    where = path("v1", "policies", name)
    updated = st.api.patch(where, body)
    changed(st, updated, where, f"{KIND} {name}", wait, wait_timeout, render_policy)


@app.command()
def delete(
    ctx: typer.Context, name: Name, wait: Wait = False, wait_timeout: WaitTimeout = 120.0
) -> None:
    """Delete a policy (refused while a session measures it or returns over it)."""
    deleted(state(ctx), path("v1", "policies", name), KIND, name, wait, wait_timeout)
