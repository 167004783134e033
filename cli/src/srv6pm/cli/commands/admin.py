"""`srv6pm tokens` (API tokens, admin only) and `srv6pm audit` (who changed what, and when)."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.text import Text

from ..client import path
from ..common import Limit, Offset, state
from ..render import fields, page_note, table, when

tokens = typer.Typer(help="API tokens (admin scope needed).", no_args_is_help=True)


class Scope(StrEnum):
    READ = "read"
    ADMIN = "admin"


def render_created(t: dict[str, Any]) -> Iterator[RenderableType]:
    yield fields(f"token {t['name']}", [("scope", t["scope"]), ("token", t["token"])])
    yield Text("The token is shown once: keep it now (only its SHA-256 is stored).", "yellow")


def render_tokens(body: list[dict[str, Any]]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["name", "scope", "created"],
        ([t["name"], t["scope"], when(t["created_at"])] for t in body),
    )


@tokens.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The token's name.", show_default=False)],
    scope: Annotated[Scope, typer.Option(help="read: reads only; admin: changes too.")],
) -> None:
    """Create an API token (printed once)."""
    st = state(ctx)
    st.out.show(st.api.post("/v1/tokens", {"name": name, "scope": scope.value}), render_created)


@tokens.command("list")
def list_tokens(ctx: typer.Context) -> None:
    """List API tokens (names and scopes; the tokens themselves are not stored)."""
    st = state(ctx)
    st.out.show(st.api.get("/v1/tokens"), render_tokens)


@tokens.command()
def delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The token's name.", show_default=False)],
) -> None:
    """Delete an API token: it stops working at once."""
    st = state(ctx)
    st.api.delete(path("v1", "tokens", name))
    st.out.done(f"token {name} deleted")


def _short(value: Any) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def change(entry: dict[str, Any]) -> str:
    """What an audit entry changed: the fields that differ (update), or created / deleted."""
    before, after = entry["before"] or {}, entry["after"] or {}
    action = str(entry["action"])
    if action != "update":
        return action + "d" if action.endswith("e") else action
    diffs = [
        f"{k}: {_short(before.get(k))} -> {_short(after.get(k))}"
        for k in dict.fromkeys([*before, *after])
        if before.get(k) != after.get(k)
    ]
    return "; ".join(diffs) or "no change"


def render_audit(body: dict[str, Any]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["id", "at", "actor", "action", "kind", "name", "change"],
        (
            [e["id"], when(e["at"]), e["actor"], e["action"], e["kind"], e["name"], change(e)]
            for e in body["items"]
        ),
    )
    yield page_note(body, "changes")


def audit(
    ctx: typer.Context,
    kind: Annotated[
        str | None,
        typer.Option(
            metavar="KIND",
            help="Only changes of this kind: node, local-sid, policy, profile, session, "
            "threshold, token.",
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Only changes of this object.", show_default=False)
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> None:
    """The audit log, newest first: who changed what, and when (keys never shown)."""
    st = state(ctx)
    body = st.api.get("/v1/audit", kind=kind, name=name, limit=limit, offset=offset)
    st.out.show(body, render_audit)
