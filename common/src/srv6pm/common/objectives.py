"""Per-session objectives, and the one implementation of their tests that the controller
evaluates and the Grafana alert rules carry (srv6pm.common.alert_rules).

A session breaks its objective when, over its last ``window_blocks`` blocks, a block lost more
than ``loss_ratio_max`` in either direction, a block's two-way delay p99 exceeded
``delay_p99_max_ms``, or more than ``invalid_blocks_max`` blocks were not measured. Each test is
one InfluxQL query over the measurements the collector writes (docs/RESULTS.md): it takes each
series' last ``window_blocks`` points (a subquery ``ORDER BY time DESC LIMIT n``, per session,
policy and direction) and gives one number per series, which breaks the objective when it
``exceeds`` the maximum (strictly greater: Grafana's ``gt``).

Grafana runs the queries within its ``$timeFilter`` (an alert rule reads a span of time, so a
session that stopped reporting leaves it); the controller runs them without one, on the last
blocks InfluxDB holds whatever their age (``time_filter=None``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from srv6pm.common.influxql import escape_string

Kind = Literal["loss", "delay", "unmeasured"]
KINDS: tuple[Kind, ...] = ("loss", "delay", "unmeasured")
TIME_FILTER = "$timeFilter"  # Grafana's macro for the rule's time range
COMPARISON = "gt"  # Grafana's threshold evaluator doing what ``exceeds`` does


@dataclass(frozen=True)
class Objective:
    """A session's maxima; ``None`` leaves that test out."""

    loss_ratio_max: float | None = None
    delay_p99_max_ms: float | None = None
    invalid_blocks_max: int | None = None
    window_blocks: int = 6

    def maximum(self, kind: Kind) -> float | None:
        return {
            "loss": self.loss_ratio_max,
            "delay": self.delay_p99_max_ms,
            "unmeasured": self.invalid_blocks_max,
        }[kind]


# The objective's field holding each test's maximum (the alert rules' "objective" label).
MAXIMUM_FIELD: dict[Kind, str] = {
    "loss": "loss_ratio_max",
    "delay": "delay_p99_max_ms",
    "unmeasured": "invalid_blocks_max",
}


class InvalidObjective(ValueError):
    """An objective no test can express (a negative maximum, an empty window, ...)."""


def check(objective: Objective, what: str) -> None:
    """Raise InvalidObjective, naming ``what`` (a session), if the objective cannot be tested."""
    if objective.window_blocks < 1:
        raise InvalidObjective(f"{what}: window_blocks must be at least 1")
    for kind in KINDS:
        value = objective.maximum(kind)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise InvalidObjective(
                f"{what}: {MAXIMUM_FIELD[kind]} must be a finite number >= 0, not {value}"
            )


def exceeds(value: float, maximum: float) -> bool:
    """Does a test's number break its maximum? Equal is within it."""
    return value > maximum


# ---- queries ------------------------------------------------------------------------------------


def _where(session: str | None, time_filter: str | None, extra: str = "") -> str:
    parts = [time_filter] if time_filter else []
    if session is not None:
        parts.append(f"\"session\" = '{escape_string(session)}'")
    if extra:
        parts.append(extra)
    return f" WHERE {' AND '.join(parts)}" if parts else ""


def _last_blocks(fields: str, measurement: str, where: str, window_blocks: int) -> str:
    # Per series (session, policy, direction): its last window_blocks points, valid or not.
    # InfluxDB wants the outer query in the same order.
    # S608: fields and measurement are constants, the session went through escape_string.
    return (
        f'(SELECT {fields} FROM "{measurement}"{where} '  # noqa: S608
        f'GROUP BY "session", "policy", "direction" ORDER BY time DESC LIMIT {int(window_blocks)})'
    )


def loss_query(
    window_blocks: int, session: str | None = None, time_filter: str | None = TIME_FILTER
) -> str:
    """Highest loss ratio of each session and direction over its last blocks (``loss_ratio``)."""
    where = _where(session, time_filter)
    inner = _last_blocks('"loss_ratio", "valid"', "loss", where, window_blocks)
    return (
        f'SELECT max("loss_ratio") AS "loss_ratio" FROM {inner} '  # noqa: S608
        'GROUP BY "session", "policy", "direction" ORDER BY time DESC'
    )


def delay_query(
    window_blocks: int, session: str | None = None, time_filter: str | None = TIME_FILTER
) -> str:
    """Highest two-way delay p99 of each session over its last blocks, in ms (``p99_ms``)."""
    where = _where(session, time_filter, "\"direction\" = 'two_way'")
    inner = _last_blocks('"p99_ns", "valid"', "delay", where, window_blocks)
    return (
        f'SELECT max("p99_ns") / 1000000 AS "p99_ms" FROM {inner} '  # noqa: S608
        'GROUP BY "session", "policy" ORDER BY time DESC'
    )


def unmeasured_query(
    window_blocks: int, session: str | None = None, time_filter: str | None = TIME_FILTER
) -> str:
    """Blocks of each session's last ones that either direction could not measure
    (``blocks_not_measured``); a session with none has no series."""
    where = _where(session, time_filter)
    inner = _last_blocks('"block", "valid"', "loss", where, window_blocks)
    # A block lost in both directions counts once.
    return (
        f'SELECT count(distinct("block")) AS "blocks_not_measured" FROM {inner} '  # noqa: S608
        'WHERE "valid" = false GROUP BY "session", "policy" ORDER BY time DESC'
    )


QUERIES: dict[Kind, Callable[[int, str | None, str | None], str]] = {
    "loss": loss_query,
    "delay": delay_query,
    "unmeasured": unmeasured_query,
}
# The column holding each query's number.
COLUMNS: dict[Kind, str] = {
    "loss": "loss_ratio",
    "delay": "p99_ms",
    "unmeasured": "blocks_not_measured",
}


def queries(
    objective: Objective, session: str | None, time_filter: str | None = TIME_FILTER
) -> dict[Kind, str]:
    """The query of each test the objective sets a maximum for."""
    return {
        kind: QUERIES[kind](objective.window_blocks, session, time_filter)
        for kind in KINDS
        if objective.maximum(kind) is not None
    }


# ---- verdict ------------------------------------------------------------------------------------


def violations(
    objective: Objective, results: Mapping[Kind, Sequence[Mapping[str, Any]]]
) -> list[str]:
    """Why the queries' rows (each query's points, tags included, by kind) break the objective;
    empty: they do not. A row's ``time`` (ns, as read with ``epoch=ns``) names the worst block."""
    found = []
    for kind in KINDS:
        maximum = objective.maximum(kind)
        if maximum is None:
            continue
        for row in results.get(kind, ()):
            value = row.get(COLUMNS[kind])
            if value is not None and exceeds(value, maximum):
                found.append(_why(kind, row, value, maximum, objective.window_blocks))
    return found


def _why(kind: Kind, row: Mapping[str, Any], value: float, maximum: float, window: int) -> str:
    last = f"the last {window} blocks"
    at = _block_at(row.get("time"))
    if kind == "loss":
        direction = row.get("direction", "")
        return f"{direction} loss ratio {value:.4g} > {maximum:g}{at} (worst of {last})"
    if kind == "delay":
        return f"two-way p99 {value:.3f} ms > {maximum:g} ms{at} (worst of {last})"
    return f"{int(value)} blocks not measured > {maximum:g} (last {window})"


def _block_at(time_ns: object) -> str:
    # max() is a selector: InfluxDB gives the worst point's own time, the start of its block.
    if not isinstance(time_ns, int) or time_ns <= 0:
        return ""
    seconds, rest = divmod(time_ns, 10**9)
    when = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f".{rest:09d}".rstrip("0") if rest else ""
    return f" in the block at {when}{fraction}Z"
