"""`srv6pm sessions`: monitoring sessions (/v1/sessions): a policy, its return policy, STAMP
between their ends and loss per block both ways."""

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
    help="Monitoring sessions: a policy and its return policy, measured with STAMP.",
    no_args_is_help=True,
)
KIND = "session"

Name = Annotated[str, typer.Argument(help="The session's name.", show_default=False)]
INTERVAL_HELP = "A delay probe every N ms (0: one probe per block)."
KEY_HELP = (
    "HMAC-SHA-256 key in hex for authenticated STAMP ('' = none; omitted: the controller's "
    "default key, if it has one); never shown back."
)


def _opt(help_text: str, metavar: str | None = None) -> Any:
    return typer.Option(help=help_text, metavar=metavar, show_default=False)


def render_session(s: dict[str, Any]) -> Iterator[RenderableType]:
    period = s["period_s"]
    yield fields(
        f"session {s['name']}",
        [
            ("policy", s["policy"]),
            ("return policy", s["return_policy"]),
            ("sender", s["sender_node"]),
            ("reflector", s["reflector_node"]),
            ("forward path", " -> ".join(s["path"]["forward"])),
            ("reverse path", " -> ".join(s["path"]["reverse"])),
            ("ssid", s["ssid"]),
            ("flow mon ids", ", ".join(f"{k} {v}" for k, v in s["flow_mon_ids"].items())),
            ("marking", s["marking_mode"]),
            ("period", f"{period:g} s" if period is not None else "not known yet"),
            ("delay interval", f"{s['delay_interval_ms']} ms" if s["delay_interval_ms"] else None),
            ("authenticated", s["authenticated"]),
            ("status", status_text(s["status"])),
            ("revision", s["status"]["revision"]),
        ],
    )


def render_list(body: dict[str, Any]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["name", "policy", "return policy", "sender", "reflector", "ssid", "auth", "status"],
        (
            [
                s["name"],
                s["policy"],
                s["return_policy"],
                s["sender_node"],
                s["reflector_node"],
                s["ssid"],
                s["authenticated"],
                status_text(s["status"]),
            ]
            for s in body["items"]
        ),
    )
    yield page_note(body, "sessions")


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    policy: Annotated[str | None, _opt("Only the session measuring this policy.", "P")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> None:
    """List monitoring sessions."""
    st = state(ctx)
    body = st.api.get("/v1/sessions", policy=policy, limit=limit, offset=offset)
    st.out.show(body, render_list)


@app.command()
def show(ctx: typer.Context, name: Name) -> None:
    """Show a session: its two paths, identifiers and status."""
    st = state(ctx)
    st.out.show(st.api.get(path("v1", "sessions", name)), render_session)


@app.command()
def add(
    ctx: typer.Context,
    name: Name,
    policy: Annotated[str, _opt("The measured policy (probes go this way).", "POLICY")],
    return_policy: Annotated[str, _opt("The way back (replies, and the reverse loss).", "POLICY")],
    delay_interval_ms: Annotated[int, _opt(INTERVAL_HELP, "N")] = 0,
    hmac_key: Annotated[str | None, _opt(KEY_HELP, "HEX")] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Add a monitoring session."""
    st = state(ctx)
    body: dict[str, Any] = {
        "name": name,
        "policy": policy,
        "return_policy": return_policy,
        "delay_interval_ms": delay_interval_ms,
    }
    if hmac_key is not None:
        body["hmac_key"] = hmac_key
    created = st.api.post("/v1/sessions", body)
    where = path("v1", "sessions", name)
    changed(st, created, where, f"{KIND} {name}", wait, wait_timeout, render_session)


@app.command()
def update(
    ctx: typer.Context,
    name: Name,
    policy: Annotated[str | None, _opt("The measured policy.", "POLICY")] = None,
    return_policy: Annotated[str | None, _opt("The way back.", "POLICY")] = None,
    delay_interval_ms: Annotated[int | None, _opt(INTERVAL_HELP, "N")] = None,
    hmac_key: Annotated[str | None, _opt(KEY_HELP, "HEX")] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Change a session (only the options given change)."""
    st = state(ctx)
    given = {
        "policy": policy,
        "return_policy": return_policy,
        "delay_interval_ms": delay_interval_ms,
        "hmac_key": hmac_key,
    }
    body = {k: v for k, v in given.items() if v is not None}
    if not body:
        raise UsageProblem("nothing to change: give at least one option")
    where = path("v1", "sessions", name)
    updated = st.api.patch(where, body)
    changed(st, updated, where, f"{KIND} {name}", wait, wait_timeout, render_session)


@app.command()
def delete(
    ctx: typer.Context, name: Name, wait: Wait = False, wait_timeout: WaitTimeout = 120.0
) -> None:
    """Delete a session (its threshold goes with it)."""
    deleted(state(ctx), path("v1", "sessions", name), KIND, name, wait, wait_timeout)
