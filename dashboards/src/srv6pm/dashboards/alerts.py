"""Grafana alert rules for the per-session objectives (controller/service/thresholds.py).

A session breaks its objective when, over its last ``window_blocks`` blocks, a block lost more
than ``loss_ratio_max`` in either direction, a block's two-way delay p99 exceeded
``delay_p99_max_ms``, or more than ``invalid_blocks_max`` blocks were not measured. The rules come
in two groups, written in Grafana's alerting file provisioning format (``apiVersion: 1``,
``groups``; each rule's ``data`` holds its query and the server-side expressions, data source
``__expr__``, as Grafana's own export writes them):

- **controller**: the controller's verdict, ``srv6pm_threshold_violated{session}`` from its
  ``/metrics``, read through Prometheus;
- **InfluxDB**: the same three tests evaluated by Grafana on the InfluxDB the collector fills, so
  they alert without the controller. Each takes a series' last ``window_blocks`` points (an
  InfluxQL subquery ``ORDER BY time DESC LIMIT n``, per series), as ThresholdService reads them.

``default_alert_rules(thresholds)`` gives the fleet-wide rules (one set of maxima for every
session, labelled per session by the query's GROUP BY); ``alert_rules(objectives)`` gives one
rule per session and objective with that session's own maxima, for a controller to serve for the
thresholds it holds. Both are pure: they return the file's content as plain dicts.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Protocol

from grafana_foundation_sdk.builders import alerting as alerting_builders
from grafana_foundation_sdk.builders import expr as expr_builders
from grafana_foundation_sdk.builders import prometheus as prometheus_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import alerting
from grafana_foundation_sdk.models.dashboard import DataSourceRef
from srv6pm.dashboards import session as session_dashboard
from srv6pm.dashboards.influxql import DATASOURCE_TYPE, InfluxQL
from srv6pm.dashboards.panels import DATASOURCE_UID
from srv6pm.dashboards.queries import string_escape
from srv6pm.dashboards.render import to_dict

PROMETHEUS_UID = "srv6pm-prometheus"
EXPRESSION_UID = "__expr__"  # Grafana's server-side expressions (reduce, math, threshold)
FOLDER = "srv6pm"
CONTROLLER_GROUP = "srv6pm objectives (controller)"
INFLUXDB_GROUP = "srv6pm objectives (InfluxDB)"
VIOLATED_METRIC = "srv6pm_threshold_violated"

# Each rule's data: A the query, B one number per series, C the condition.
QUERY, REDUCED, CONDITION = "A", "B", "C"
_QUERY_KEYS = ("refId", "relativeTimeRange", "datasourceUid", "model")
_RULE_KEYS = ("noDataState", "execErrState", "for", "annotations", "labels", "isPaused")

# Grafana rule uids: at most 40 characters of [A-Za-z0-9_-].
_UID_MAX = 40
_UID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

Kind = Literal["loss", "delay", "unmeasured"]
KINDS: tuple[Kind, ...] = ("loss", "delay", "unmeasured")


class ObjectiveLike(Protocol):
    """What the rules read of an objective: the controller's ``Objective`` is one."""

    @property
    def loss_ratio_max(self) -> float | None: ...
    @property
    def delay_p99_max_ms(self) -> float | None: ...
    @property
    def invalid_blocks_max(self) -> int | None: ...
    @property
    def window_blocks(self) -> int: ...


@dataclass(frozen=True)
class Thresholds:
    """The fleet-wide objective of the shipped rules; ``None`` leaves that rule out."""

    loss_ratio_max: float | None = 0.01
    delay_p99_max_ms: float | None = 50.0
    invalid_blocks_max: int | None = 1
    window_blocks: int = 6


@dataclass(frozen=True)
class AlertSettings:
    """Where the rules live and what they query."""

    influxdb_uid: str = DATASOURCE_UID
    prometheus_uid: str = PROMETHEUS_UID
    folder: str = FOLDER
    org_id: int = 1
    interval: str = "30s"
    # No pending period by default: the objective already spans window_blocks blocks, as the
    # controller evaluates it; a pending period would add a second, hidden window.
    pending: str = "0s"
    # The collector's default block period, and how long a block takes from its start to
    # InfluxDB (the block itself, the node's wait for late packets, Kafka, the collector). They
    # bound how far back the InfluxDB rules look: a session that stopped reporting leaves them.
    block_period_s: float = 10.0
    settle_s: float = 60.0
    # Prefix of the dashboard links in annotations; empty: relative to Grafana.
    grafana_url: str = ""


class InvalidObjective(ValueError):
    """An objective no rule can express (a negative maximum, an empty window, ...)."""


def default_alert_rules(
    thresholds: ObjectiveLike | None = None, settings: AlertSettings | None = None
) -> dict[str, Any]:
    """The shipped file: every session held to ``thresholds`` (default ``Thresholds()``), one
    alert instance per session (and direction, for loss)."""
    thresholds = thresholds or Thresholds()
    settings = settings or AlertSettings()
    _check(thresholds, "the default thresholds")
    return _file(
        settings,
        [
            rule
            for kind in KINDS
            if (rule := _influx_rule(kind, None, thresholds, settings)) is not None
        ],
    )


def alert_rules(
    objectives: Mapping[str, ObjectiveLike], settings: AlertSettings | None = None
) -> dict[str, Any]:
    """Rules for these sessions' objectives (session name -> objective), each with its maxima.

    A maximum left at ``None`` gets no rule. The controller's rule is one for all sessions: the
    metric it reads already carries every session's verdict.
    """
    settings = settings or AlertSettings()
    for name, objective in objectives.items():
        _check(objective, f"session {name!r}")
    return _file(
        settings,
        [
            rule
            for name in sorted(objectives)
            for kind in KINDS
            if (rule := _influx_rule(kind, name, objectives[name], settings)) is not None
        ],
    )


# ---- queries ------------------------------------------------------------------------------------


def lookback_s(window_blocks: int, settings: AlertSettings | None = None) -> int:
    """Seconds of data an InfluxDB rule reads: its window plus the time blocks take to arrive."""
    settings = settings or AlertSettings()
    return math.ceil(window_blocks * settings.block_period_s + settings.settle_s)


def _last_blocks(fields: str, measurement: str, where: str, window_blocks: int) -> str:
    # Per series (session, policy, direction): its last window_blocks points, valid or not, as
    # ThresholdService._recent reads them. InfluxDB wants the outer query in the same order.
    # S608: fields and measurement are constants, the session went through string_escape.
    return (
        f'(SELECT {fields} FROM "{measurement}" WHERE {where} '  # noqa: S608
        f'GROUP BY "session", "policy", "direction" ORDER BY time DESC LIMIT {int(window_blocks)})'
    )


def _where(session: str | None, extra: str = "") -> str:
    parts = ["$timeFilter"]
    if session is not None:
        parts.append(f"\"session\" = '{string_escape(session)}'")
    if extra:
        parts.append(extra)
    return " AND ".join(parts)


def loss_query(window_blocks: int, session: str | None = None) -> str:
    """Highest loss ratio of each session and direction over its last blocks."""
    inner = _last_blocks('"loss_ratio", "valid"', "loss", _where(session), window_blocks)
    return (
        f'SELECT max("loss_ratio") AS "loss_ratio" FROM {inner} '  # noqa: S608
        'GROUP BY "session", "policy", "direction" ORDER BY time DESC'
    )


def delay_query(window_blocks: int, session: str | None = None) -> str:
    """Highest two-way delay p99 of each session over its last blocks, in ms."""
    where = _where(session, "\"direction\" = 'two_way'")
    inner = _last_blocks('"p99_ns", "valid"', "delay", where, window_blocks)
    return (
        f'SELECT max("p99_ns") / 1000000 AS "p99_ms" FROM {inner} '  # noqa: S608
        'GROUP BY "session", "policy" ORDER BY time DESC'
    )


def unmeasured_query(window_blocks: int, session: str | None = None) -> str:
    """Blocks of each session's last ones that either direction could not measure."""
    inner = _last_blocks('"block", "valid"', "loss", _where(session), window_blocks)
    # A block lost in both directions counts once, as in ThresholdService.
    return (
        f'SELECT count(distinct("block")) AS "blocks_not_measured" FROM {inner} '  # noqa: S608
        'WHERE "valid" = false GROUP BY "session", "policy" ORDER BY time DESC'
    )


# ---- rules --------------------------------------------------------------------------------------

_SESSION = "{{ $labels.session }}"
_POLICY = "{{ $labels.policy }}"
_DIRECTION = "{{ $labels.direction }}"


def _percent(ratio: float) -> str:
    return f"{ratio * 100:g}%"


@dataclass(frozen=True)
class _Spec:
    kind: Kind
    title: str
    query: str
    threshold: float
    summary: str
    description: str
    panel: str  # title of the session dashboard's panel the rule links to
    objective: str  # the objective's field, as a label


def _spec(kind: Kind, session: str | None, objective: ObjectiveLike) -> _Spec | None:
    window = objective.window_blocks
    last = f"the last {window} blocks"
    if kind == "loss":
        if objective.loss_ratio_max is None:
            return None
        limit = _percent(objective.loss_ratio_max)
        return _Spec(
            kind,
            f"loss ratio above {limit} over {last}",
            loss_query(window, session),
            objective.loss_ratio_max,
            f"Session {_SESSION} lost {{{{ humanizePercentage $values.B.Value }}}} of its "
            f"packets in a block ({_DIRECTION}), above its {limit} objective",
            f"Highest loss ratio of the {_DIRECTION} direction over the session's last {window} "
            f"blocks (InfluxDB measurement loss, policy {_POLICY}); objective loss_ratio_max "
            f"{objective.loss_ratio_max:g}.",
            "Loss ratio per block",
            "loss_ratio_max",
        )
    if kind == "delay":
        if objective.delay_p99_max_ms is None:
            return None
        limit = f"{objective.delay_p99_max_ms:g} ms"
        return _Spec(
            kind,
            f"two-way delay p99 above {limit} over {last}",
            delay_query(window, session),
            objective.delay_p99_max_ms,
            f'Session {_SESSION}: two-way delay p99 of {{{{ printf "%.3f" $values.B.Value }}}} '
            f"ms in a block, above its {limit} objective",
            f"Highest per-block two-way delay p99 over the session's last {window} blocks "
            f"(InfluxDB measurement delay, policy {_POLICY}); objective delay_p99_max_ms "
            f"{objective.delay_p99_max_ms:g}.",
            "Two-way delay percentiles",
            "delay_p99_max_ms",
        )
    if objective.invalid_blocks_max is None:
        return None
    limit = str(objective.invalid_blocks_max)
    return _Spec(
        kind,
        f"more than {limit} of {last} not measured",
        unmeasured_query(window, session),
        objective.invalid_blocks_max,
        f"Session {_SESSION}: {{{{ $values.B.Value }}}} of its last {window} blocks not "
        f"measured, more than {limit}",
        f"Blocks of the session's last {window} that a direction could not measure (valid = "
        f"false in the InfluxDB measurement loss, policy {_POLICY}); the reasons are listed in "
        f"the session dashboard. Objective invalid_blocks_max {limit}.",
        "Invalid loss blocks",
        "invalid_blocks_max",
    )


def _influx_rule(
    kind: Kind, session: str | None, objective: ObjectiveLike, settings: AlertSettings
) -> dict[str, Any] | None:
    spec = _spec(kind, session, objective)
    if spec is None:
        return None
    title = f"srv6pm {spec.title}" if session is None else f"srv6pm {session}: {spec.title}"
    query = (
        alerting_builders.Query(QUERY)
        .datasource_uid(settings.influxdb_uid)
        .relative_time_range(
            alerting.RelativeTimeRange(from_val=lookback_s(objective.window_blocks, settings), to=0)
        )
        .model(
            InfluxQL(spec.query)
            .ref_id(QUERY)
            .datasource(DataSourceRef(type_val=DATASOURCE_TYPE, uid=settings.influxdb_uid))
        )
    )
    return _rule(
        _uid(spec.kind, session),
        title,
        query,
        spec.threshold,
        settings,
        labels={"objective": spec.objective},
        annotations={
            "summary": spec.summary,
            "description": spec.description,
            "dashboard_url": _dashboard_url(settings),
        },
        panel=spec.panel,
    )


def _violated_rule(settings: AlertSettings) -> dict[str, Any]:
    prometheus = DataSourceRef(type_val="prometheus", uid=settings.prometheus_uid)
    query = (
        alerting_builders.Query(QUERY)
        .datasource_uid(settings.prometheus_uid)
        .relative_time_range(alerting.RelativeTimeRange(from_val=600, to=0))
        .model(
            prometheus_builders.Dataquery()
            # The threshold stage does the "> 0", so that a session back to 0 keeps its
            # series and resolves at the next evaluation instead of going missing.
            .expr(f"max by (session) ({VIOLATED_METRIC})")
            .instant()
            .ref_id(QUERY)
            .datasource(prometheus)
        )
    )
    return _rule(
        "srv6pm-objective-violated",
        "srv6pm objective violated",
        query,
        0,
        settings,
        labels={"objective": "controller"},
        annotations={
            "summary": f"Session {_SESSION} violates its objective",
            "description": (
                f"The controller found session {_SESSION} breaking its objective "
                f"({VIOLATED_METRIC} = 1). GET /v1/sessions/{_SESSION}/threshold says which "
                "block broke which maximum."
            ),
            "dashboard_url": _dashboard_url(settings),
        },
    )


def _rule(
    uid: str,
    title: str,
    query: alerting_builders.Query,
    threshold: float,
    settings: AlertSettings,
    *,
    labels: dict[str, str],
    annotations: dict[str, str],
    panel: str | None = None,
) -> dict[str, Any]:
    """One rule in the file format: ``query`` (refId A), reduced to its highest value per series
    (B), firing where that is above ``threshold`` (C). ``panel``: a session dashboard panel to
    link the rule to."""
    expression = DataSourceRef(type_val=EXPRESSION_UID, uid=EXPRESSION_UID)
    reduce = (
        expr_builders.TypeReduce()
        .ref_id(REDUCED)
        .expression(QUERY)
        .reducer("max")
        .settings(expr_builders.ExprTypeReduceSettings().mode("dropNN"))
        .datasource(expression)
    )
    above = (
        expr_builders.TypeThreshold()
        .ref_id(CONDITION)
        .expression(REDUCED)
        .conditions(
            [
                expr_builders.ExprTypeThresholdConditions().evaluator(
                    expr_builders.ExprTypeThresholdConditionsEvaluator()
                    .type("gt")
                    .params([float(threshold)])
                )
            ]
        )
        .datasource(expression)
    )
    built = (
        alerting_builders.Rule(_literal(title))
        .uid(uid)
        .condition(CONDITION)
        .queries(
            [
                query,
                alerting_builders.Query(REDUCED).datasource_uid(EXPRESSION_UID).model(reduce),
                alerting_builders.Query(CONDITION).datasource_uid(EXPRESSION_UID).model(above),
            ]
        )
        # No series: no session has data (or none broke the "valid = false" count), not a fault.
        .no_data_state("OK")
        .exec_err_state("Error")
        .for_val(settings.pending)
        .labels({key: _literal(value) for key, value in labels.items()})
        .annotations(annotations)
        .is_paused(False)
        .build()
    )
    encoded: dict[str, Any] = _encode(built)
    # The SDK models the HTTP provisioning API; the file format keeps the group, folder and
    # organisation on the group rather than on each rule. Keys in the order of Grafana's export.
    data = [{key: query[key] for key in _QUERY_KEYS if key in query} for query in encoded["data"]]
    rule = {key: encoded[key] for key in ("uid", "title", "condition")} | {"data": data}
    if panel is not None:
        # Grafana links the rule to this panel and marks its state changes on it.
        rule |= {"dashboardUid": session_dashboard.UID, "panelId": _session_panel_id(panel)}
    return rule | {key: encoded[key] for key in _RULE_KEYS}


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


# ---- helpers ------------------------------------------------------------------------------------


def _check(objective: ObjectiveLike, what: str) -> None:
    if objective.window_blocks < 1:
        raise InvalidObjective(f"{what}: window_blocks must be at least 1")
    for name in ("loss_ratio_max", "delay_p99_max_ms", "invalid_blocks_max"):
        value = getattr(objective, name)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise InvalidObjective(f"{what}: {name} must be a finite number >= 0, not {value}")


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
    return f"{base}/d/{session_dashboard.UID}?var-session={{{{ $labels.session | urlquery }}}}"


@cache
def _session_panel_ids() -> dict[str, int]:
    dashboard = to_dict(session_dashboard.build())
    panels = list(dashboard["panels"])
    panels += [inner for panel in dashboard["panels"] for inner in panel.get("panels", [])]
    return {panel["title"]: panel["id"] for panel in panels}


def _session_panel_id(title: str) -> int:
    return _session_panel_ids()[title]


def _encode(model: object) -> Any:
    return json.loads(json.dumps(model, cls=JSONEncoder))
