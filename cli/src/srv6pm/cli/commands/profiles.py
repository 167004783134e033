"""`srv6pm profiles`: measurement profiles (/v1/profiles): a probe interval, liveness, delay
histogram bins, bursts, computation intervals, delay thresholds and loss or delay only, that
sessions name instead of repeating them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from ..client import path
from ..common import Limit, Offset, UsageProblem, state
from ..render import fields, page_note, table
from . import measuring as m
from .changes import deleted
from .sessions import EDGE_HELP, INTERVAL_HELP, LIVENESS_HELP, liveness_text, settings

app = typer.Typer(
    help="Measurement profiles: probe interval, liveness, histogram bins, bursts, computation "
    "intervals, delay thresholds and loss or delay only, for sessions.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(help="The profile's name.", show_default=False)]


def _opt(help_text: str, metavar: str | None = None) -> Any:
    return typer.Option(help=help_text, metavar=metavar, show_default=False)


def render_profile(p: dict[str, Any]) -> Iterator[RenderableType]:
    yield fields(
        f"profile {p['name']}",
        [
            ("delay interval", f"{p['delay_interval_ms']} ms" if p["delay_interval_ms"] else None),
            ("liveness", liveness_text(p["liveness"]) or "off"),
            ("histogram edges", ", ".join(f"{e} us" for e in p["histogram_edges_us"]) or None),
            *m.rows(p),
            ("sessions", ", ".join(p["sessions"]) or None),
            ("revision", p["revision"]),
        ],
    )


def render_list(body: dict[str, Any]) -> Iterator[RenderableType]:
    yield table(
        None,
        [
            "name",
            "delay interval",
            "burst",
            "interval",
            "liveness",
            "histogram edges",
            "thresholds",
            "loss",
            "sessions",
        ],
        (
            [
                p["name"],
                p["delay_interval_ms"],
                p["burst_size"],
                p["computation_interval_ms"],
                liveness_text(p["liveness"]) or "off",
                ", ".join(str(e) for e in p["histogram_edges_us"]),
                m.thresholds_text(p["thresholds"]) or "off",
                p["loss"],
                ", ".join(p["sessions"]),
            ]
            for p in body["items"]
        ),
    )
    yield page_note(body, "profiles")


@app.command("list")
def list_profiles(ctx: typer.Context, limit: Limit = 100, offset: Offset = 0) -> None:
    """List measurement profiles."""
    st = state(ctx)
    st.out.show(st.api.get("/v1/profiles", limit=limit, offset=offset), render_list)


@app.command()
def show(ctx: typer.Context, name: Name) -> None:
    """Show a profile and the sessions that name it."""
    st = state(ctx)
    st.out.show(st.api.get(path("v1", "profiles", name)), render_profile)


Interval = Annotated[int | None, _opt(INTERVAL_HELP, "N")]
Live = Annotated[bool | None, _opt(LIVENESS_HELP)]
DownAfter = Annotated[int | None, _opt("Liveness: down after N missed replies (3).", "N")]
UpAfter = Annotated[int | None, _opt("Liveness: up after N replies (1).", "N")]
Timeout = Annotated[int | None, _opt("Liveness: reply timeout (0: the probe interval).", "MS")]
Edges = Annotated[list[int] | None, _opt(EDGE_HELP, "US")]


@app.command()
def add(
    ctx: typer.Context,
    name: Name,
    delay_interval_ms: Interval = None,
    liveness: Live = None,
    down_after: DownAfter = None,
    up_after: UpAfter = None,
    liveness_timeout_ms: Timeout = None,
    histogram_edge: Edges = None,
    burst_size: m.BurstSize = None,
    computation_interval_ms: m.ComputationInterval = None,
    loss: m.Loss = None,
    threshold_percent: m.ThresholdPercent = None,
    threshold_us: m.ThresholdUs = None,
    threshold_each_burst: m.ThresholdEachBurst = None,
    threshold_min_report_ms: m.ThresholdMinReport = None,
    threshold_metric: m.ThresholdMetric = None,
) -> None:
    """Add a measurement profile."""
    st = state(ctx)
    body: dict[str, Any] = {"name": name}
    if delay_interval_ms is not None:
        body["delay_interval_ms"] = delay_interval_ms
    body.update(settings(liveness, down_after, up_after, liveness_timeout_ms, histogram_edge))
    body.update(
        m.measuring(
            burst_size,
            computation_interval_ms,
            loss,
            threshold_percent,
            threshold_us,
            threshold_each_burst,
            threshold_min_report_ms,
            threshold_metric,
        )
    )
    st.out.show(st.api.post("/v1/profiles", body), render_profile)


@app.command()
def update(
    ctx: typer.Context,
    name: Name,
    delay_interval_ms: Interval = None,
    liveness: Live = None,
    down_after: DownAfter = None,
    up_after: UpAfter = None,
    liveness_timeout_ms: Timeout = None,
    histogram_edge: Edges = None,
    burst_size: m.BurstSize = None,
    computation_interval_ms: m.ComputationInterval = None,
    loss: m.Loss = None,
    threshold_percent: m.ThresholdPercent = None,
    threshold_us: m.ThresholdUs = None,
    threshold_each_burst: m.ThresholdEachBurst = None,
    threshold_min_report_ms: m.ThresholdMinReport = None,
    threshold_metric: m.ThresholdMetric = None,
) -> None:
    """Change a profile (only the options given change; liveness options, and threshold
    options, replace the profile's liveness, or thresholds, as a whole). Every session naming
    it measures so from then on."""
    st = state(ctx)
    body: dict[str, Any] = {}
    if delay_interval_ms is not None:
        body["delay_interval_ms"] = delay_interval_ms
    body.update(settings(liveness, down_after, up_after, liveness_timeout_ms, histogram_edge))
    body.update(
        m.measuring(
            burst_size,
            computation_interval_ms,
            loss,
            threshold_percent,
            threshold_us,
            threshold_each_burst,
            threshold_min_report_ms,
            threshold_metric,
        )
    )
    if not body:
        raise UsageProblem("nothing to change: give at least one option")
    st.out.show(st.api.patch(path("v1", "profiles", name), body), render_profile)


@app.command()
def delete(ctx: typer.Context, name: Name) -> None:
    """Delete a profile (refused while a session names it)."""
    deleted(state(ctx), path("v1", "profiles", name), "profile", name, False, 0.0)
