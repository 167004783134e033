"""`srv6pm thresholds`: a session's objective (loss, delay, unmeasured blocks) and its state;
`thresholds session|policy` the node's delay threshold crossings (commands/threshold_events.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.text import Text

from ..client import path
from ..common import state
from ..render import STATE_STYLE, fields, table, when
from . import threshold_events

app = typer.Typer(
    help="Objectives per session and whether they hold; delay threshold crossings.",
    no_args_is_help=True,
)
app.command("session")(threshold_events.session)
app.command("policy")(threshold_events.policy)

Session = Annotated[str, typer.Argument(help="The session's name.", show_default=False)]


def _opt(help_text: str, metavar: str) -> Any:
    return typer.Option(help=help_text, metavar=metavar, show_default=False)


def _state(t: dict[str, Any]) -> Text:
    return Text(t["state"], style=STATE_STYLE.get(t["state"], "bold red"))


def _ms(value: float | None) -> str | None:
    return None if value is None else f"{value:g} ms"


def render_threshold(t: dict[str, Any]) -> Iterator[RenderableType]:
    yield fields(
        f"threshold of session {t['session']}",
        [
            ("loss ratio max", t["loss_ratio_max"]),
            ("delay p99 max", _ms(t["delay_p99_max_ms"])),
            ("invalid blocks max", t["invalid_blocks_max"]),
            ("window", f"{t['window_blocks']} blocks"),
            ("state", _state(t)),
            ("since", when(t["since"])),
            ("detail", t["detail"]),
        ],
    )


def render_list(body: list[dict[str, Any]]) -> Iterator[RenderableType]:
    yield table(
        None,
        ["session", "loss ratio max", "p99 max", "invalid max", "window", "state", "since"],
        (
            [
                t["session"],
                t["loss_ratio_max"],
                _ms(t["delay_p99_max_ms"]),
                t["invalid_blocks_max"],
                t["window_blocks"],
                _state(t),
                when(t["since"]),
            ]
            for t in body
        ),
    )
    violated = [t for t in body if t["state"] == "violated"]
    for t in violated:
        yield Text(f"{t['session']}: {t['detail']}", style="red")
    if not body:
        yield Text("no thresholds")


@app.command("set")
def set_threshold(
    ctx: typer.Context,
    session: Session,
    loss_ratio_max: Annotated[
        float | None, _opt("Most loss ratio a block may have, either direction (0..1).", "X")
    ] = None,
    delay_p99_max_ms: Annotated[
        float | None, _opt("Most two-way delay p99 of a block, in ms.", "MS")
    ] = None,
    invalid_blocks_max: Annotated[
        int | None, _opt("Most blocks of the window that could not be measured.", "N")
    ] = None,
    window_blocks: Annotated[
        int, typer.Option(metavar="N", help="The blocks the rules look back over.")
    ] = 6,
) -> None:
    """Set a session's objective (it replaces the whole objective: rules not given are off)."""
    st = state(ctx)
    body = {
        "loss_ratio_max": loss_ratio_max,
        "delay_p99_max_ms": delay_p99_max_ms,
        "invalid_blocks_max": invalid_blocks_max,
        "window_blocks": window_blocks,
    }
    st.out.show(st.api.put(path("v1", "sessions", session, "threshold"), body), render_threshold)


@app.command()
def show(ctx: typer.Context, session: Session) -> None:
    """Show a session's objective and its state."""
    st = state(ctx)
    st.out.show(st.api.get(path("v1", "sessions", session, "threshold")), render_threshold)


@app.command("list")
def list_thresholds(ctx: typer.Context) -> None:
    """List every objective and its state."""
    st = state(ctx)
    st.out.show(st.api.get("/v1/thresholds"), render_list)


@app.command()
def delete(ctx: typer.Context, session: Session) -> None:
    """Delete a session's objective."""
    st = state(ctx)
    st.api.delete(path("v1", "sessions", session, "threshold"))
    st.out.done(f"threshold of session {session} deleted")
