"""InfluxQL string literals, for the queries every srv6pm reader of InfluxDB builds."""

from __future__ import annotations


def escape_string(value: str) -> str:
    """``value`` inside an InfluxQL ``'...'`` string literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def string_literal(value: str) -> str:
    """``value`` as an InfluxQL string literal, quotes included."""
    return f"'{escape_string(value)}'"


_REGEX_SPECIAL = frozenset("\\^$.|?*+()[]{}/")


def escape_regex(value: str) -> str:
    """``value`` matched literally inside an InfluxQL ``/.../`` regex literal (``/`` is its
    delimiter)."""
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in value)
