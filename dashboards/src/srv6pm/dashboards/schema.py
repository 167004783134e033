"""The InfluxDB schema the collector writes (database ``srv6pm``), and a checker for queries.

Every point's timestamp is the start of its measurement block (ns), except ``probe`` points,
which carry the probe's send time, ``liveness`` points, the send time of the probe that
decided the change, ``delay_interval`` points, their computation interval's start, and
``threshold`` points, the event's time. Invalid points carry only ``block``, ``valid`` (false)
and ``reason``. A policy's only segment list has no ``segment_list`` tag (an empty value in
InfluxQL). The dashboards may name only what is listed here; ``unknown_references`` is what the
tests use to hold them to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

FieldType = Literal["int", "float", "bool", "string"]
NUMERIC: frozenset[FieldType] = frozenset({"int", "float"})


@dataclass(frozen=True)
class Measurement:
    """Tags (with their closed set of values, where there is one) and typed fields."""

    tags: dict[str, frozenset[str] | None]
    fields: dict[str, FieldType]
    description: str = ""
    optional: bool = field(default=False)
    # Families of fields named by a value (a histogram bin's edge), read with /^prefix/
    field_patterns: dict[str, FieldType] = field(default_factory=dict)

    def field_type(self, name: str) -> FieldType | None:
        if name in self.fields:
            return self.fields[name]
        return next(
            (kind for pattern, kind in self.field_patterns.items() if re.fullmatch(pattern, name)),
            None,
        )


_STAMP_TAGS: dict[str, frozenset[str] | None] = {
    "session": None,
    "policy": None,
    "src_node": None,
    "dst_node": None,
    "segment_list": None,
}
# The delay histogram: replies in [previous edge, edge) per bin, the last up to infinity
HISTOGRAM_PREFIX = "hist_lt_"
_VALIDITY: dict[str, FieldType] = {"block": "int", "valid": "bool", "reason": "string"}

_DELAY_FIELDS: dict[str, FieldType] = {
    **_VALIDITY,
    "samples": "int",
    "probes_sent": "int",
    "probes_lost": "int",
    "min_ns": "int",
    "p50_ns": "int",
    "p90_ns": "int",
    "p99_ns": "int",
    "max_ns": "int",
    "mean_ns": "int",
    "jitter_ns": "int",
}

SCHEMA: dict[str, Measurement] = {
    "loss": Measurement(
        description="one point per STAMP session per block per direction",
        tags={**_STAMP_TAGS, "direction": frozenset({"forward", "reverse"})},
        fields={
            **_VALIDITY,
            "tx": "int",
            "rx": "int",
            "lost": "int",
            "loss_ratio": "float",
        },
    ),
    "delay": Measurement(
        description="one point per STAMP session per block per direction",
        tags={**_STAMP_TAGS, "direction": frozenset({"two_way", "forward", "reverse"})},
        fields=dict(_DELAY_FIELDS),
        field_patterns={rf"{HISTOGRAM_PREFIX}(-?\d+|inf)": "int"},
    ),
    "delay_interval": Measurement(
        description="one point per STAMP session per computation interval per direction, "
        "time = the interval's start",
        optional=True,
        tags={**_STAMP_TAGS, "direction": frozenset({"two_way", "forward", "reverse"})},
        fields={**_DELAY_FIELDS, "interval_ns": "int"},
        field_patterns={rf"{HISTOGRAM_PREFIX}(-?\d+|inf)": "int"},
    ),
    "flow": Measurement(
        description="one point per node per monitored flow per block",
        tags={
            "node": None,
            "flow": None,
            "role": frozenset({"ingress", "transit", "egress"}),
        },
        fields={**_VALIDITY, "packets": "int", "bytes": "int", "flow_mon_id": "int"},
    ),
    "probe": Measurement(
        description="one point per STAMP probe (off by default), time = send time",
        optional=True,
        tags=dict(_STAMP_TAGS),
        fields={
            "seq": "int",
            "two_way_ns": "int",
            "forward_ns": "int",
            "reverse_ns": "int",
            "one_way_valid": "bool",
        },
    ),
    "liveness": Measurement(
        description="one point per change of a segment list's liveness, time = the deciding "
        "probe's send time",
        optional=True,
        tags=dict(_STAMP_TAGS),
        fields={
            "state": "int",
            "previous": "int",
            "consecutive": "int",
            "description": "string",
        },
    ),
    "threshold": Measurement(
        description="one point per delay threshold crossing, time = the event's time",
        optional=True,
        tags={
            **_STAMP_TAGS,
            "metric": frozenset(
                {"two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter"}
            ),
        },
        fields={
            "value_ns": "int",
            "reference_ns": "int",
            "first": "bool",
            "accelerated": "bool",
            "description": "string",
        },
    ),
}

# InfluxQL functions whose first argument must be a numeric field.
_NUMERIC_FUNCTIONS = frozenset(
    {"sum", "mean", "median", "min", "max", "spread", "stddev", "percentile", "top", "bottom"}
)
_IDENT = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FROM = re.compile(r'\bFROM\s+"([^"]+)"', re.IGNORECASE)
_ALIAS = re.compile(r'\bAS\s+"([^"]+)"', re.IGNORECASE)
_FUNCTION_ARG = re.compile(r'\b([a-z_]+)\(\s*"([^"]+)"', re.IGNORECASE)
_GROUP_BY = re.compile(r"\bGROUP\s+BY\s+(.*?)(?:\bfill\(|\bORDER\b|\bLIMIT\b|$)", re.IGNORECASE)
_WITH_KEY = re.compile(r'\bWITH\s+KEY\s*=\s*"([^"]+)"', re.IGNORECASE)
_TAG_EQUALS = re.compile(r'"([^"]+)"\s*(?:=|!=|<>)\s*\'((?:[^\'\\]|\\.)*)\'')
_TAG_REGEX = re.compile(r'"([^"]+)"\s*[=!]~\s*/\^\(?([\w|-]+)\)?\$/')
_FIELD_REGEX = re.compile(r"(?:SELECT\s+|,\s*|\()/\^(\w+)/", re.IGNORECASE)
_BOOL_COMPARE = re.compile(r'"([^"]+)"\s*(?:=|!=)\s*(?:true|false)\b', re.IGNORECASE)


def unknown_references(query: str) -> list[str]:
    """What ``query`` names that the schema does not have, as readable problems (empty if none).

    Checks the measurement, every double-quoted identifier that is not an ``AS`` alias, that
    GROUP BY and ``WITH KEY`` name tags, that aggregates and booleans apply to fields of the right
    type, and that literal tag values belong to the tag's closed set of values.
    """
    measurements = _FROM.findall(query)
    if not measurements:
        return [f"no FROM measurement in {query!r}"]
    problems = [f"unknown measurement {m!r}" for m in measurements if m not in SCHEMA]
    if problems:
        return problems
    known = [SCHEMA[m] for m in measurements]
    tags = {t for m in known for t in m.tags}
    fields = {name: kind for m in known for name, kind in m.fields.items()}
    for ident in _IDENT.findall(query):
        kind = next((k for m in known if (k := m.field_type(ident))), None)
        if kind is not None:
            fields[ident] = kind
    aliases = set(_ALIAS.findall(query))

    for ident in _IDENT.findall(query):
        if ident in measurements or ident in aliases or ident in tags or ident in fields:
            continue
        problems.append(f"{ident!r} is neither a tag nor a field of {measurements}")
    for prefix in _FIELD_REGEX.findall(query):
        families = [p for m in known for p in m.field_patterns]
        if not any(p.startswith(prefix) for p in families):
            problems.append(f"/^{prefix}/ names no field family of {measurements}")
    for clause in _GROUP_BY.findall(query):
        problems += [
            f"GROUP BY {ident!r}: not a tag of {measurements}"
            for ident in _IDENT.findall(clause)
            if ident not in tags
        ]
    problems += [
        f"WITH KEY {key!r}: not a tag of {measurements}"
        for key in _WITH_KEY.findall(query)
        if key not in tags
    ]
    for function, arg in _FUNCTION_ARG.findall(query):
        if function.lower() in _NUMERIC_FUNCTIONS and fields.get(arg) not in NUMERIC:
            problems.append(f"{function}({arg!r}): not a numeric field of {measurements}")
    for ident in _BOOL_COMPARE.findall(query):
        if fields.get(ident) != "bool":
            problems.append(f"{ident!r} compared with a boolean but is not a boolean field")
    literal_values = [(tag, [value]) for tag, value in _TAG_EQUALS.findall(query)]
    literal_values += [(tag, alt.split("|")) for tag, alt in _TAG_REGEX.findall(query)]
    for tag, values in literal_values:
        closed = next((m.tags[tag] for m in known if m.tags.get(tag)), None)
        if tag not in tags:
            if fields.get(tag) != "string":
                problems.append(f"{tag!r} compared with a string: neither tag nor string field")
        elif closed is not None:
            problems += [
                f"{tag}={v!r}: not one of {sorted(closed)}" for v in values if v not in closed
            ]
    return problems
