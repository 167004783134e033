"""`results plot`: loss and delay of a session per block, two panels, drawn with matplotlib's Agg
canvas (a PNG without a display, and without pyplot's global state)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

DIRECTIONS = (("forward", "tab:blue"), ("reverse", "tab:orange"))
US_PER_NS = 1e-3


def _loss_series(
    items: list[dict[str, Any]], direction: str, ratio: bool
) -> tuple[list[int], list[float], list[int]]:
    """(blocks, values) of a direction, NaN where a block could not be measured (the line
    breaks there rather than joining its neighbours), and those blocks."""
    xs: list[int] = []
    ys: list[float] = []
    invalid: list[int] = []
    for item in items:
        d = item.get(direction)
        if d is None:
            continue
        value = d.get("loss_ratio") if ratio else d.get("lost")
        xs.append(item["block"])
        if d.get("valid") and value is not None:
            ys.append(value * 100 if ratio else value)
        else:
            ys.append(math.nan)
            invalid.append(item["block"])
    return xs, ys, invalid


def _delay_series(items: list[dict[str, Any]], stat: str) -> tuple[list[int], list[float]]:
    xs: list[int] = []
    ys: list[float] = []
    for item in items:
        d = item.get("two_way")
        if d is None:
            continue
        xs.append(item["block"])
        valid = d.get("valid") and d.get(stat) is not None
        ys.append(d[stat] * US_PER_NS if valid else math.nan)
    return xs, ys


def plot(
    out: Path,
    session: str,
    loss: list[dict[str, Any]],
    delay: list[dict[str, Any]],
    ratio: bool = False,
) -> None:
    """Write a PNG: lost packets (or the loss ratio) per block in both directions above, two-way
    delay p50 and p99 per block below; a block not measured is a band in its direction's colour."""
    fig = Figure(figsize=(11, 7), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for direction, colour in DIRECTIONS:
        xs, ys, invalid = _loss_series(loss, direction, ratio)
        top.plot(xs, ys, marker="o", markersize=3, linewidth=1, color=colour, label=direction)
        for i, block in enumerate(invalid):  # a band over each block not measured
            label = f"{direction}: not measured" if i == 0 else None
            top.axvspan(block - 0.5, block + 0.5, color=colour, alpha=0.15, label=label)
    top.set_ylabel("loss ratio (%)" if ratio else "lost packets")
    top.set_title(f"session {session}: loss per block")
    for stat, style in (("p50_ns", "-"), ("p99_ns", "--")):
        xs, ys = _delay_series(delay, stat)
        bottom.plot(xs, ys, style, marker=".", linewidth=1, label=f"two-way {stat[:3]}")
    bottom.set_ylabel("delay (µs)")
    bottom.set_title("two-way delay per block")
    bottom.set_xlabel("block")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.ticklabel_format(axis="x", style="plain", useOffset=False)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize="small")
    top.set_ylim(bottom=0)
    fig.savefig(out, format="png")
