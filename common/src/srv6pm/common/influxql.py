"""InfluxQL string literals, for the queries every srv6pm reader of InfluxDB builds."""

from __future__ import annotations


def escape_string(value: str) -> str:
    """``value`` inside an InfluxQL ``'...'`` string literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def string_literal(value: str) -> str:
    """``value`` as an InfluxQL string literal, quotes included."""
    return f"'{escape_string(value)}'"
