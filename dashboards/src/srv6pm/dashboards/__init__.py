"""srv6pm Grafana dashboards, written with Grafana's foundation SDK over InfluxDB (InfluxQL).

``generate()`` gives each dashboard's JSON model by uid; ``panel_queries`` / ``variable_queries``
/ ``annotation_queries`` give the InfluxQL they send, ready to run against InfluxDB;
``schema.SCHEMA`` is the data they may use. ``default_alert_rules()`` /
``alert_rules(objectives)`` give the alert rules for the per-session objectives, in Grafana's
file provisioning format (srv6pm.common.alert_rules).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grafana_foundation_sdk.builders.dashboard import Dashboard
from srv6pm.common.alert_rules import AlertSettings, alert_rules, to_yaml
from srv6pm.common.objectives import Objective
from srv6pm.dashboards import fleet, flows, influxql, session
from srv6pm.dashboards.alerts import DEFAULT_OBJECTIVE, default_alert_rules
from srv6pm.dashboards.queries import (
    MissingVariable,
    annotation_queries,
    panel_queries,
    substitute,
    variable_queries,
)
from srv6pm.dashboards.render import to_dict, to_json

influxql.register()

# uid -> builder; the uid is also the generated file's name.
DASHBOARDS: dict[str, Callable[[], Dashboard]] = {
    fleet.UID: fleet.build,
    session.UID: session.build,
    flows.UID: flows.build,
}


def generate() -> dict[str, dict[str, Any]]:
    """Every dashboard's JSON model, by uid."""
    return {uid: to_dict(build()) for uid, build in DASHBOARDS.items()}


__all__ = [
    "DASHBOARDS",
    "DEFAULT_OBJECTIVE",
    "AlertSettings",
    "MissingVariable",
    "Objective",
    "alert_rules",
    "annotation_queries",
    "default_alert_rules",
    "generate",
    "panel_queries",
    "substitute",
    "to_json",
    "to_yaml",
    "variable_queries",
]
