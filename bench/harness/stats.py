"""Statistics of benchmark samples: medians, quartiles, percentiles, min/median/max summaries,
ratios paired by round (which cancel the drift of a shared machine between rounds)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypedDict, TypeVar

T = TypeVar("T")

PercentileMethod = Literal["nearest-rank", "lower", "floor"]


class Quartiles(TypedDict):
    min: float
    q1: float
    median: float
    q3: float
    max: float


class Summary(TypedDict):
    median: float
    min: float
    max: float
    n: int


def median(values: Sequence[float]) -> float:
    """The median, NaN for no values."""
    return statistics.median(values) if values else float("nan")


def quartiles(values: Sequence[float]) -> Quartiles:
    """min, q1, median, q3, max (statistics.quantiles' default, exclusive, method)."""
    v = sorted(values)
    q1, q2, q3 = statistics.quantiles(v, n=4) if len(v) > 1 else (v[0], v[0], v[0])
    return {"min": v[0], "q1": q1, "median": q2, "q3": q3, "max": v[-1]}


def summary(values: Iterable[float | None]) -> Summary | None:
    """median, min, max and n of the values that are not None; None when there is none."""
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def percentile(
    values: Sequence[float], q: float, method: PercentileMethod = "nearest-rank"
) -> float:
    """The q-th percentile (0 < q <= 100) of ``values``, one of them (no interpolation).

    The benchmarks have used three ranks; each keeps its own so its figures stay comparable:
    ``nearest-rank``: the ceil(q/100 * n)-th smallest; ``floor``: index floor(q/100 * n),
    at most n - 1 (the same but one rank higher when q/100 * n is whole); ``lower``: index
    floor(q/100 * (n - 1)) (numpy's "lower").
    """
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    n = len(ordered)
    if method == "nearest-rank":
        index = max(0, math.ceil(q / 100 * n) - 1)
    elif method == "floor":
        index = min(n - 1, int(q / 100 * n))
    else:
        index = int(q / 100 * (n - 1))
    return ordered[index]


def paired(
    baseline: Mapping[int, T], samples: Iterable[tuple[int, T]], ratio: Callable[[T, T], float]
) -> list[float]:
    """``ratio(baseline, sample)`` for each (round, sample) whose round has a baseline sample.

    Configurations alternated round by round (A B A B ...) are compared round by round: the
    median of these ratios cancels what changed on the machine between rounds, which the ratio
    of the two medians does not."""
    return [ratio(baseline[rnd], s) for rnd, s in samples if rnd in baseline]


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0."""
    return numerator / denominator if denominator else float("nan")
