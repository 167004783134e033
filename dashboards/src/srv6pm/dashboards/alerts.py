"""The alert rules this package ships (generated/alert-rules.yaml): every session held to one
fleet-wide objective, ``DEFAULT_OBJECTIVE`` unless the generator is given another.

The rules themselves (each objective's InfluxQL query and comparison, the provisioning file's
shape) are srv6pm.common.alert_rules and srv6pm.common.objectives: the controller evaluates the
same tests and serves the same rules per session. What is left here is what only the dashboards
know: that the panels the rules link to are on the session dashboard, with those titles and ids.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from srv6pm.common import alert_rules
from srv6pm.common.alert_rules import SESSION_DASHBOARD_UID, SESSION_PANELS, AlertSettings
from srv6pm.common.objectives import Objective
from srv6pm.dashboards import session as session_dashboard
from srv6pm.dashboards.render import to_dict

DEFAULT_OBJECTIVE = Objective(
    loss_ratio_max=0.01, delay_p99_max_ms=50.0, invalid_blocks_max=1, window_blocks=6
)


class StalePanelLink(RuntimeError):
    """An alert rule links to a session dashboard panel that is not there any more."""


def default_alert_rules(
    objective: Objective | None = None, settings: AlertSettings | None = None
) -> dict[str, Any]:
    """The shipped file: every session held to ``objective`` (default ``DEFAULT_OBJECTIVE``),
    one alert instance per session (and direction, for loss)."""
    problems = panel_link_problems()
    if problems:
        raise StalePanelLink("; ".join(problems))
    return alert_rules.default_alert_rules(objective or DEFAULT_OBJECTIVE, settings)


def panel_link_problems() -> list[str]:
    """How the rules' panel links (srv6pm.common.alert_rules.SESSION_PANELS) differ from the
    session dashboard this package builds; empty when they agree."""
    if session_dashboard.UID != SESSION_DASHBOARD_UID:
        return [f"the session dashboard is {session_dashboard.UID}, not {SESSION_DASHBOARD_UID}"]
    ids = _session_panel_ids()
    return [
        f"{kind} rule: panel {title!r} is {ids.get(title)}, not {panel_id}"
        for kind, (title, panel_id) in SESSION_PANELS.items()
        if ids.get(title) != panel_id
    ]


@cache
def _session_panel_ids() -> dict[str, int]:
    dashboard = to_dict(session_dashboard.build())
    panels = list(dashboard["panels"])
    panels += [inner for panel in dashboard["panels"] for inner in panel.get("panels", [])]
    return {panel["title"]: panel["id"] for panel in panels}
