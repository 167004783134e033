"""Grafana alert rules for the per-session objectives (srv6pm.common.objectives), in Grafana's
alerting file provisioning format (``apiVersion: 1``, ``groups``; each rule's ``data`` holds its
query and the server-side expressions, data source ``__expr__``, as Grafana's own export writes
them). The dashboards package ships the fleet-wide file; the controller serves one for the
objectives it holds (``GET /v1/thresholds/grafana-alert-rules``). Two groups:

- **controller**: the controller's verdict, ``srv6pm_threshold_violated{session}`` from its
  ``/metrics``, read through Prometheus;
- **InfluxDB**: each objective's test (its query and ``exceeds``, as the controller evaluates
  them) run by Grafana on the InfluxDB the collector fills, so they alert without the controller.

``default_alert_rules(objective)`` gives the fleet-wide rules (one set of maxima for every
session, labelled per session by the query's GROUP BY); ``alert_rules(objectives)`` gives one
rule per session and objective with that session's own maxima. Both are pure: they return the
file's content as plain dicts; ``to_yaml`` writes it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from srv6pm.common.objectives import (
    COMPARISON,
    KINDS,
    MAXIMUM_FIELD,
    QUERIES,
    TIME_FILTER,
    Kind,
    Objective,
    check,
)

# What Grafana is provisioned with (dashboards/provisioning, the Helm chart): the rules query
# these data sources and link to the session dashboard's panels.
INFLUXDB_UID = "srv6pm-influxdb"
PROMETHEUS_UID = "srv6pm-prometheus"
EXPRESSION_UID = "__expr__"  # Grafana's server-side expressions (reduce, math, threshold)
SESSION_DASHBOARD_UID = "srv6pm-session"
# The session dashboard's panel each test links to: (title, id). The dashboards package builds
# the dashboard, and its tests check these against it.
SESSION_PANELS: dict[Kind, tuple[str, int]] = {
    "loss": ("Loss ratio per block", 2),
    "delay": ("Two-way delay percentiles", 6),
    "unmeasured": ("Invalid loss blocks", 11),
}
FOLDER = "srv6pm"
CONTROLLER_GROUP = "srv6pm objectives (controller)"
INFLUXDB_GROUP = "srv6pm objectives (InfluxDB)"
VIOLATED_METRIC = "srv6pm_threshold_violated"

# Each rule's data: A the query, B one number per series, C the condition.
QUERY, REDUCED, CONDITION = "A", "B", "C"

# Grafana rule uids: at most 40 characters of [A-Za-z0-9_-].
_UID_MAX = 40
_UID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

HEADER = (
    "# Grafana alert rules for the srv6pm per-session objectives (alerting file provisioning).\n"
    "# Generated from srv6pm/dashboards/alerts.py: edit the Python, not this file.\n"
)


@dataclass(frozen=True)
class AlertSettings:
    """Where the rules live and what they query."""

    influxdb_uid: str = INFLUXDB_UID
    prometheus_uid: str = PROMETHEUS_UID
    folder: str = FOLDER
    org_id: int = 1
    interval: str = "30s"
    # No pending period by default: the objective already spans window_blocks blocks, as the
    # controller evaluates it; a pending period would add a second, hidden window.
    pending: str = "0s"
    # The node managers' default block period (period_s), and how long a block takes from its
    # start to InfluxDB (the block itself, the node's wait for late packets, Kafka, the
    # collector). They bound how far back the InfluxDB rules look: a session that stopped
    # reporting leaves them.
    block_period_s: float = 10.0
    settle_s: float = 60.0
    # Prefix of the dashboard links in annotations; empty: relative to Grafana.
    grafana_url: str = ""


def default_alert_rules(
    objective: Objective, settings: AlertSettings | None = None
) -> dict[str, Any]:
    """Every session held to ``objective``: one alert instance per session (and direction, for
    loss)."""
    settings = settings or AlertSettings()
    check(objective, "the default objective")
    return _file(
        settings,
        [
            rule
            for kind in KINDS
            if (rule := _influx_rule(kind, None, objective, settings)) is not None
        ],
    )


def alert_rules(
    objectives: Mapping[str, Objective], settings: AlertSettings | None = None
) -> dict[str, Any]:
    """Rules for these sessions' objectives (session name -> objective), each with its maxima.

    A maximum left at ``None`` gets no rule. The controller's rule is one for all sessions: the
    metric it reads already carries every session's verdict.
    """
    settings = settings or AlertSettings()
    for name, objective in objectives.items():
        check(objective, f"session {name!r}")
    return _file(
        settings,
        [
            rule
            for name in sorted(objectives)
            for kind in KINDS
            if (rule := _influx_rule(kind, name, objectives[name], settings)) is not None
        ],
    )


class _Dumper(yaml.SafeDumper):
    # A dict used twice (a data source) is written out twice, never as a YAML anchor and alias.
    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(document: dict[str, Any], header: str = HEADER) -> str:
    """A provisioning file: keys in the order built, long queries kept on one line."""
    body = yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=4096,
    )
    return header + body


def lookback_s(window_blocks: int, settings: AlertSettings | None = None) -> int:
    """Seconds of data an InfluxDB rule reads: its window plus the time blocks take to arrive."""
    settings = settings or AlertSettings()
    return math.ceil(window_blocks * settings.block_period_s + settings.settle_s)


# ---- rules --------------------------------------------------------------------------------------

_SESSION = "{{ $labels.session }}"
_POLICY = "{{ $labels.policy }}"
_DIRECTION = "{{ $labels.direction }}"


def _percent(ratio: float) -> str:
    return f"{ratio * 100:g}%"


@dataclass(frozen=True)
class _Text:
    title: str
    summary: str
    description: str


def _text(kind: Kind, maximum: float, window: int) -> _Text:
    last = f"the last {window} blocks"
    if kind == "loss":
        limit = _percent(maximum)
        return _Text(
            f"loss ratio above {limit} over {last}",
            f"Session {_SESSION} lost {{{{ humanizePercentage $values.B.Value }}}} of its "
            f"packets in a block ({_DIRECTION}), above its {limit} objective",
            f"Highest loss ratio of the {_DIRECTION} direction over the session's last {window} "
            f"blocks (InfluxDB measurement loss, policy {_POLICY}); objective loss_ratio_max "
            f"{maximum:g}.",
        )
    if kind == "delay":
        limit = f"{maximum:g} ms"
        return _Text(
            f"two-way delay p99 above {limit} over {last}",
            f'Session {_SESSION}: two-way delay p99 of {{{{ printf "%.3f" $values.B.Value }}}} '
            f"ms in a block, above its {limit} objective",
            f"Highest per-block two-way delay p99 over the session's last {window} blocks "
            f"(InfluxDB measurement delay, policy {_POLICY}); objective delay_p99_max_ms "
            f"{maximum:g}.",
        )
    limit = str(maximum)
    return _Text(
        f"more than {limit} of {last} not measured",
        f"Session {_SESSION}: {{{{ $values.B.Value }}}} of its last {window} blocks not "
        f"measured, more than {limit}",
        f"Blocks of the session's last {window} that a direction could not measure (valid = "
        f"false in the InfluxDB measurement loss, policy {_POLICY}); the reasons are listed in "
        f"the session dashboard. Objective invalid_blocks_max {limit}.",
    )


def _influx_rule(
    kind: Kind, session: str | None, objective: Objective, settings: AlertSettings
) -> dict[str, Any] | None:
    maximum = objective.maximum(kind)
    if maximum is None:
        return None
    window = objective.window_blocks
    text = _text(kind, maximum, window)
    title = f"srv6pm {text.title}" if session is None else f"srv6pm {session}: {text.title}"
    source = _datasource("influxdb", settings.influxdb_uid)
    model = {
        "refId": QUERY,
        "query": QUERIES[kind](window, session, TIME_FILTER),
        "rawQuery": True,  # else Grafana rebuilds the query from its (empty) visual editor
        "datasource": source,
        "resultFormat": "time_series",
    }
    _, panel_id = SESSION_PANELS[kind]
    return _rule(
        _uid(kind, session),
        title,
        _query(settings.influxdb_uid, lookback_s(window, settings), model),
        maximum,
        settings,
        labels={"objective": MAXIMUM_FIELD[kind]},
        annotations={
            "summary": text.summary,
            "description": text.description,
            "dashboard_url": _dashboard_url(settings),
        },
        # Grafana links the rule to this panel and marks its state changes on it.
        link={"dashboardUid": SESSION_DASHBOARD_UID, "panelId": panel_id},
    )


def _violated_rule(settings: AlertSettings) -> dict[str, Any]:
    model = {
        # The threshold stage does the "> 0", so that a session back to 0 keeps its series and
        # resolves at the next evaluation instead of going missing.
        "expr": f"max by (session) ({VIOLATED_METRIC})",
        "refId": QUERY,
        "instant": True,
        "range": False,
        "datasource": _datasource("prometheus", settings.prometheus_uid),
    }
    return _rule(
        "srv6pm-objective-violated",
        "srv6pm objective violated",
        _query(settings.prometheus_uid, 600, model),
        0,
        settings,
        labels={"objective": "controller"},
        annotations={
            "summary": f"Session {_SESSION} violates its objective",
            "description": (
                f"The controller found session {_SESSION} breaking its objective "
                f"({VIOLATED_METRIC} = 1). GET /v1/sessions/{_SESSION}/threshold says which "
                "maximum was broken, by how much and in which block."
            ),
            "dashboard_url": _dashboard_url(settings),
        },
    )


def _datasource(kind: str, uid: str) -> dict[str, str]:
    return {"type": kind, "uid": uid}


def _query(uid: str, lookback: int, model: dict[str, Any]) -> dict[str, Any]:
    return {
        "refId": QUERY,
        "relativeTimeRange": {"from": lookback, "to": 0},
        "datasourceUid": uid,
        "model": model,
    }


def _rule(
    uid: str,
    title: str,
    query: dict[str, Any],
    threshold: float,
    settings: AlertSettings,
    *,
    labels: dict[str, str],
    annotations: dict[str, str],
    link: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One rule: ``query`` (refId A), reduced to its highest value per series (B), firing where
    that ``exceeds`` ``threshold`` (C)."""
    expression = _datasource(EXPRESSION_UID, EXPRESSION_UID)
    reduce = {
        "expression": QUERY,
        "reducer": "max",
        "refId": REDUCED,
        "type": "reduce",
        "datasource": expression,
        "settings": {"mode": "dropNN"},
    }
    above = {
        "conditions": [{"evaluator": {"params": [float(threshold)], "type": COMPARISON}}],
        "expression": REDUCED,
        "refId": CONDITION,
        "type": "threshold",
        "datasource": expression,
    }
    data = [
        query,
        {"refId": REDUCED, "datasourceUid": EXPRESSION_UID, "model": reduce},
        {"refId": CONDITION, "datasourceUid": EXPRESSION_UID, "model": above},
    ]
    # Keys in the order of Grafana's export; group, folder and organisation are the group's.
    return {
        "uid": uid,
        "title": _literal(title),
        "condition": CONDITION,
        "data": data,
        **(link or {}),
        # No series: no session has data (or none broke the "valid = false" count), not a fault.
        "noDataState": "OK",
        "execErrState": "Error",
        "for": settings.pending,
        "annotations": annotations,
        "labels": {key: _literal(value) for key, value in labels.items()},
        "isPaused": False,
    }


def _file(settings: AlertSettings, influx_rules: list[dict[str, Any]]) -> dict[str, Any]:
    groups = [_group(CONTROLLER_GROUP, [_violated_rule(settings)], settings)]
    if influx_rules:
        groups.append(_group(INFLUXDB_GROUP, influx_rules, settings))
    return {"apiVersion": 1, "groups": groups}


def _group(name: str, rules: list[dict[str, Any]], settings: AlertSettings) -> dict[str, Any]:
    return {
        "orgId": settings.org_id,
        "name": name,
        "folder": settings.folder,
        "interval": settings.interval,
        "rules": rules,
    }


def _uid(kind: Kind, session: str | None) -> str:
    """A stable rule uid: readable, unique per (kind, session), within Grafana's limits."""
    if session is None:
        return f"srv6pm-{kind}"
    # Session names may hold "." or be long: keep a readable prefix, make it unique by a hash.
    digest = hashlib.sha256(session.encode()).hexdigest()[:8]
    room = _UID_MAX - len(f"srv6pm-{kind}--{digest}")
    return f"srv6pm-{kind}-{_UID_UNSAFE.sub('_', session)[:room]}-{digest}"


def _literal(text: str) -> str:
    # Grafana expands environment variables ($NAME) in provisioned titles and labels; "$$" is
    # a literal "$". Annotations and query models are read raw.
    return text.replace("$", "$$")


def _dashboard_url(settings: AlertSettings) -> str:
    base = settings.grafana_url.rstrip("/")
    return f"{base}/d/{SESSION_DASHBOARD_UID}?var-session={{{{ $labels.session | urlquery }}}}"
