"""The InfluxQL a dashboard sends, with Grafana's macros and variables replaced as Grafana does.

So that the queries can be run against a real InfluxDB without Grafana: ``$timeFilter`` becomes
``time >= <from> and time <= <to>`` (Grafana's InfluxDB data source spells relative times as
``now() - 6h`` and absolute ones as epoch milliseconds), ``$__interval`` a duration literal, and
template variables their values. Grafana interpolates InfluxQL variables in its regex format, so
a value inside a ``/.../`` regex literal is regex-escaped (``/`` included, the literal's
delimiter); a value inside a ``'...'`` string literal gets that literal's escapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from srv6pm.common.influxql import escape_string
from srv6pm.dashboards.panels import DATASOURCE_UID

TimePoint = int | str | datetime

_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)\]\]")
_REGEX_LITERAL = re.compile(r"[=!]~\s*/(?:\\.|[^/\\])*/")
_STRING_LITERAL = re.compile(r"'(?:\\.|[^'\\])*'")
_REGEX_SPECIAL = re.compile(r"[\\^$.|?*+()\[\]{}/]")
_RELATIVE = re.compile(r"^now-(\d+)([dhms])$")
_DURATION = re.compile(r"^(\d+)(ns|u|µ|ms|s|m|h|d|w)$")
_UNIT_MS = {"ns": 1e-6, "u": 1e-3, "µ": 1e-3, "ms": 1, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}
_UNIT_MS["w"] = 7 * _UNIT_MS["d"]


class MissingVariable(KeyError):
    """A query uses a template variable that has no value and no All value."""


def influx_time(point: TimePoint) -> str:
    """A time-range end as Grafana's InfluxDB data source writes it into ``$timeFilter``."""
    if isinstance(point, datetime):
        return f"{int(point.timestamp() * 1000)}ms"
    if isinstance(point, int):
        return f"{point}ms"
    if point == "now":
        return "now()"
    relative = _RELATIVE.match(point)
    if relative:
        return f"now() - {relative.group(1)}{relative.group(2)}"
    raise ValueError(f"time {point!r}: use epoch ms, a datetime, 'now' or 'now-<N>[dhms]'")


def time_filter(time_from: TimePoint = 0, time_to: TimePoint = "now") -> str:
    return f"time >= {influx_time(time_from)} and time <= {influx_time(time_to)}"


def _regex_escape(value: str) -> str:
    return _REGEX_SPECIAL.sub(lambda m: "\\" + m.group(0), value)


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def substitute(
    query: str,
    variables: Mapping[str, str],
    *,
    all_values: Mapping[str, str] | None = None,
    time_from: TimePoint = 0,
    time_to: TimePoint = "now",
    interval: str = "10s",
) -> str:
    """``query`` as Grafana would send it to InfluxDB for these values and this time range.

    ``all_values`` holds the All value of variables that have one; it stands in for a variable
    missing from ``variables`` and, like Grafana's custom All value, is inserted unescaped.
    """
    duration = _DURATION.match(interval)
    if not duration:
        raise ValueError(f"interval {interval!r} is not an InfluxQL duration")
    interval_ms = max(1, int(int(duration.group(1)) * _UNIT_MS[duration.group(2)]))
    builtins = {
        "timeFilter": time_filter(time_from, time_to),
        "__timeFilter": time_filter(time_from, time_to),
        "__interval": interval,
        "interval": interval,
        "__interval_ms": str(interval_ms),
    }
    regexes = _spans(_REGEX_LITERAL, query)
    strings = _spans(_STRING_LITERAL, query)

    def inside(spans: list[tuple[int, int]], position: int) -> bool:
        return any(start < position < end for start, end in spans)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        form = match.group(3)
        if name in builtins:
            return builtins[name]
        if name in variables:
            value = variables[name]
        elif all_values and name in all_values:
            return all_values[name]
        else:
            raise MissingVariable(f"query uses ${name}, which has no value: {query}")
        if form == "raw":
            return value
        if form == "regex" or inside(regexes, match.start()):
            return _regex_escape(value)
        if inside(strings, match.start()):
            return escape_string(value)
        return value

    return _VARIABLE.sub(replace, query)


def _panels(dashboard: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        # Collapsed rows keep their panels inside the row.
        yield from panel.get("panels", [])


def _all_values(dashboard: Mapping[str, Any]) -> dict[str, str]:
    return {
        v["name"]: v["allValue"]
        for v in dashboard.get("templating", {}).get("list", [])
        if v.get("includeAll") and v.get("allValue")
    }


def _is_ours(target: Mapping[str, Any], panel: Mapping[str, Any]) -> bool:
    source = target.get("datasource") or panel.get("datasource") or {}
    return bool(source.get("uid") == DATASOURCE_UID and "query" in target)


def panel_queries(
    dashboard: Mapping[str, Any],
    variables: Mapping[str, str],
    *,
    time_from: TimePoint = 0,
    time_to: TimePoint = "now",
    interval: str = "10s",
) -> list[tuple[str, str]]:
    """(panel title, InfluxQL ready to run) for every srv6pm target of ``dashboard`` (its JSON).

    The default range, epoch to now, covers all data; variables not given take their All value
    where they have one, else ``MissingVariable`` is raised.
    """
    all_values = _all_values(dashboard)
    return [
        (
            panel.get("title", ""),
            substitute(
                target["query"],
                variables,
                all_values=all_values,
                time_from=time_from,
                time_to=time_to,
                interval=interval,
            ),
        )
        for panel in _panels(dashboard)
        for target in panel.get("targets", [])
        if _is_ours(target, panel) and not target.get("hide")
    ]


def variable_queries(
    dashboard: Mapping[str, Any], variables: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """(variable name, InfluxQL) of every query variable of ``dashboard``, interpolated.

    A variable's query may use the variables before it (e.g. sessions of the chosen policy);
    those take ``variables`` or their All value.
    """
    all_values = _all_values(dashboard)
    return [
        (v["name"], substitute(v["query"], variables or {}, all_values=all_values))
        for v in dashboard.get("templating", {}).get("list", [])
        if v.get("type") == "query" and (v.get("datasource") or {}).get("uid") == DATASOURCE_UID
    ]


def annotation_queries(
    dashboard: Mapping[str, Any],
    variables: Mapping[str, str],
    *,
    time_from: TimePoint = 0,
    time_to: TimePoint = "now",
) -> list[tuple[str, str]]:
    """(annotation name, InfluxQL ready to run) of every srv6pm annotation of ``dashboard``."""
    all_values = _all_values(dashboard)
    return [
        (
            a["name"],
            substitute(
                a["target"]["query"],
                variables,
                all_values=all_values,
                time_from=time_from,
                time_to=time_to,
            ),
        )
        for a in dashboard.get("annotations", {}).get("list", [])
        if (a.get("datasource") or {}).get("uid") == DATASOURCE_UID
        and "query" in a.get("target", {})
    ]
