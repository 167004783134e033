"""`srv6pm sessions`: monitoring sessions (/v1/sessions): a policy (every segment list of it, or
one), its return policy, STAMP between their ends and loss per block both ways."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from ..client import path
from ..common import Limit, Offset, UsageProblem, Wait, WaitTimeout, state
from ..render import fields, page_note, table
from ..render import state as status_text
from . import measuring as m
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


SEGMENT_LIST_HELP = "Measure only this segment list of the policy (default: every one)."
RETURN_LIST_HELP = "The return policy's segment list replies take (default: its first)."
PROFILE_HELP = "A measurement profile (srv6pm profiles); the options below override it."
LIVENESS_HELP = "Liveness of each probed segment list (down after missed replies)."
EDGE_HELP = "A delay histogram bin edge in microseconds (repeat, ascending, at most 10)."
CLEAR_HELP = (
    "A setting the session takes from its profile again (repeat): delay_interval_ms, "
    "liveness, histogram_edges_us, burst_size, computation_interval_ms, thresholds, loss."
)


def _opt(help_text: str, metavar: str | None = None) -> Any:
    return typer.Option(help=help_text, metavar=metavar, show_default=False)


def settings(
    liveness: bool | None,
    down_after: int | None,
    up_after: int | None,
    timeout_ms: int | None,
    edges: list[int] | None,
) -> dict[str, Any]:
    """The measurement options given, as the API's fields (liveness as a whole object)."""
    out: dict[str, Any] = {}
    tuning = {"down_after": down_after, "up_after": up_after, "timeout_ms": timeout_ms}
    given = {k: v for k, v in tuning.items() if v is not None}
    if liveness is not None or given:
        out["liveness"] = {"enabled": True if liveness is None else liveness, **given}
    if edges:
        out["histogram_edges_us"] = edges
    return out


def liveness_text(live: dict[str, Any]) -> str | None:
    if not live["enabled"]:
        return None
    timeout = f"{live['timeout_ms']} ms" if live["timeout_ms"] else "the probe interval"
    return f"down after {live['down_after']} missed, up after {live['up_after']}, timeout {timeout}"


def _probed(s: dict[str, Any]) -> str:
    return "\n".join(
        f"{p['segment_list']}: ssid {p['ssid']}, sender {p['sender']}, "
        + " -> ".join(p["path"]["forward"])
        for p in s["segment_lists"]
    )


def render_session(s: dict[str, Any]) -> Iterator[RenderableType]:
    period = s["period_s"]
    yield fields(
        f"session {s['name']}",
        [
            ("policy", s["policy"]),
            ("segment list", s["segment_list"]),
            ("return policy", f"{s['return_policy']} ({s['return_segment_list']})"),
            ("profile", s["profile"]),
            ("sender", s["sender_node"]),
            ("reflector", s["reflector_node"]),
            ("forward path", " -> ".join(s["path"]["forward"]) if s["path"] else None),
            ("reverse path", " -> ".join(s["segment_lists"][0]["path"]["reverse"])),
            ("ssid", s["ssid"]),
            ("segment lists", _probed(s) if s["ssid"] is None else None),
            (
                "flow mon ids",
                ", ".join(f"{k} {v}" for k, v in s["flow_mon_ids"].items())
                if s["flow_mon_ids"]
                else None,
            ),
            ("marking", s["marking_mode"]),
            ("period", f"{period:g} s" if period is not None else "not known yet"),
            ("delay interval", f"{s['delay_interval_ms']} ms" if s["delay_interval_ms"] else None),
            ("liveness", liveness_text(s["liveness"])),
            ("histogram edges", ", ".join(f"{e} us" for e in s["histogram_edges_us"]) or None),
            *m.rows(s),
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
                s["ssid"] or ", ".join(str(p["ssid"]) for p in s["segment_lists"]),
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
    segment_list: Annotated[str | None, _opt(SEGMENT_LIST_HELP, "NAME")] = None,
    return_segment_list: Annotated[str | None, _opt(RETURN_LIST_HELP, "NAME")] = None,
    profile: Annotated[str | None, _opt(PROFILE_HELP, "NAME")] = None,
    delay_interval_ms: Annotated[int | None, _opt(INTERVAL_HELP, "N")] = None,
    liveness: Annotated[bool | None, _opt(LIVENESS_HELP)] = None,
    down_after: Annotated[int | None, _opt("Liveness: down after N missed replies.", "N")] = None,
    up_after: Annotated[int | None, _opt("Liveness: up after N replies.", "N")] = None,
    liveness_timeout_ms: Annotated[int | None, _opt("Liveness: reply timeout.", "MS")] = None,
    histogram_edge: Annotated[list[int] | None, _opt(EDGE_HELP, "US")] = None,
    burst_size: m.BurstSize = None,
    computation_interval_ms: m.ComputationInterval = None,
    loss: m.Loss = None,
    threshold_percent: m.ThresholdPercent = None,
    threshold_us: m.ThresholdUs = None,
    threshold_each_burst: m.ThresholdEachBurst = None,
    threshold_min_report_ms: m.ThresholdMinReport = None,
    threshold_metric: m.ThresholdMetric = None,
    hmac_key: Annotated[str | None, _opt(KEY_HELP, "HEX")] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Add a monitoring session: a STAMP sender per segment list it measures."""
    st = state(ctx)
    given = {
        "segment_list": segment_list,
        "return_segment_list": return_segment_list,
        "profile": profile,
        "delay_interval_ms": delay_interval_ms,
    }
    body: dict[str, Any] = {
        "name": name,
        "policy": policy,
        "return_policy": return_policy,
        **{k: v for k, v in given.items() if v is not None},
        **settings(liveness, down_after, up_after, liveness_timeout_ms, histogram_edge),
        **m.measuring(
            burst_size,
            computation_interval_ms,
            loss,
            threshold_percent,
            threshold_us,
            threshold_each_burst,
            threshold_min_report_ms,
            threshold_metric,
        ),
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
    segment_list: Annotated[str | None, _opt(SEGMENT_LIST_HELP + " '': every one.", "N")] = None,
    return_segment_list: Annotated[str | None, _opt(RETURN_LIST_HELP, "NAME")] = None,
    profile: Annotated[str | None, _opt(PROFILE_HELP + " '': none.", "NAME")] = None,
    delay_interval_ms: Annotated[int | None, _opt(INTERVAL_HELP, "N")] = None,
    liveness: Annotated[bool | None, _opt(LIVENESS_HELP)] = None,
    down_after: Annotated[int | None, _opt("Liveness: down after N missed replies.", "N")] = None,
    up_after: Annotated[int | None, _opt("Liveness: up after N replies.", "N")] = None,
    liveness_timeout_ms: Annotated[int | None, _opt("Liveness: reply timeout.", "MS")] = None,
    histogram_edge: Annotated[list[int] | None, _opt(EDGE_HELP, "US")] = None,
    burst_size: m.BurstSize = None,
    computation_interval_ms: m.ComputationInterval = None,
    loss: m.Loss = None,
    threshold_percent: m.ThresholdPercent = None,
    threshold_us: m.ThresholdUs = None,
    threshold_each_burst: m.ThresholdEachBurst = None,
    threshold_min_report_ms: m.ThresholdMinReport = None,
    threshold_metric: m.ThresholdMetric = None,
    hmac_key: Annotated[str | None, _opt(KEY_HELP, "HEX")] = None,
    clear: Annotated[list[str] | None, _opt(CLEAR_HELP, "SETTING")] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 120.0,
) -> None:
    """Change a session (only the options given change)."""
    st = state(ctx)
    given = {
        "policy": policy,
        "return_policy": return_policy,
        "return_segment_list": return_segment_list,
        "delay_interval_ms": delay_interval_ms,
        "hmac_key": hmac_key,
    }
    body: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    for cleared, value in (("segment_list", segment_list), ("profile", profile)):
        if value is not None:
            body[cleared] = value or None  # '' goes back to every segment list / no profile
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
    both = sorted(set(body) & set(clear or ()))
    if both:
        raise UsageProblem(f"{', '.join(both)}: given and cleared at once")
    body.update(m.cleared(clear))
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
