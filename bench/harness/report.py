"""The figures as text: Markdown tables (pasted into docs/BENCHMARKS.md) and the ways the
benchmarks print a spread of values."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.harness.stats import Quartiles, Summary


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def quartile_span(q: Quartiles, scale: float = 1.0, fmt: str = ".3f") -> str:
    """``median (q1-q3)`` of a stats.quartiles() result."""
    return f"{q['median'] / scale:{fmt}} ({q['q1'] / scale:{fmt}}-{q['q3'] / scale:{fmt}})"


def summary_span(s: Summary | None, scale: float = 1.0, digits: int = 0) -> str:
    """``median (min-max)`` of a stats.summary() result, thousands separated; "-" for None."""
    if s is None:
        return "-"
    f = f"{{:,.{digits}f}}"
    median, low, high = (f.format(v * scale) for v in (s["median"], s["min"], s["max"]))
    return f"{median} ({low}-{high})"


def kilo_span(values: Sequence[float]) -> str:
    """``median (min-max)`` in thousands: ``63.9k (59.1-70.9k)``."""
    return (
        f"{statistics.median(values) / 1e3:.1f}k ({min(values) / 1e3:.1f}-{max(values) / 1e3:.1f}k)"
    )


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "**NO**")
