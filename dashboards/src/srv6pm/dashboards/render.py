"""From dashboard builders to the JSON files Grafana loads, reproducible to the byte (alert rules:
srv6pm.common.alert_rules.to_yaml)."""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders.dashboard import Dashboard
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model


def _number_panels(built: model.Dashboard) -> None:
    # Grafana needs ids unique within a dashboard (it numbers new panels itself); fixed ids keep
    # the generated files stable and panel links (viewPanel=N) valid across regenerations.
    next_id = 1
    for panel in built.panels or []:
        panel.id_val = next_id
        next_id += 1
        if isinstance(panel, model.RowPanel):
            for inner in panel.panels:
                inner.id_val = next_id
                next_id += 1


# The SDK writes interval-variable settings on every variable; Grafana's dashboard schema
# (VariableModel in @grafana/schema 11.6) has them only on interval variables.
_INTERVAL_ONLY = ("auto", "auto_min", "auto_count")


def to_dict(builder: Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model as plain dicts and lists."""
    built = builder.build()
    _number_panels(built)
    result: dict[str, Any] = json.loads(json.dumps(built, cls=JSONEncoder))
    for variable in result.get("templating", {}).get("list", []):
        if variable.get("type") != "interval":
            for key in _INTERVAL_ONLY:
                variable.pop(key, None)
    return result


def to_json(dashboard: dict[str, Any]) -> str:
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"
