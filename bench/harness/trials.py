"""How trials are scheduled: configurations alternated round by round (A B A B ...), and an
offered rate stepped up a ladder then bisected (RFC 2544's NDR search)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

C = TypeVar("C")
S = TypeVar("S")


def alternate(
    configs: Sequence[C], rounds: int, measure: Callable[[C, int], S], warmup: bool = True
) -> list[S]:
    """``measure(config, round)`` for every configuration, round after round. With
    ``warmup``, round 0 measures every configuration once and is not kept; rounds 1..N are.
    Alternating spreads the machine's drift over all configurations alike."""
    kept = []
    for rnd in range(0 if warmup else 1, rounds + 1):
        for cfg in configs:
            s = measure(cfg, rnd)
            if rnd > 0:
                kept.append(s)
    return kept


def step_up(
    trial: Callable[[int], S], ladder: Sequence[int], stop: Callable[[list[S]], bool]
) -> list[S]:
    """One trial per rate of ``ladder``, upwards, until ``stop(trials so far)``."""
    steps: list[S] = []
    for rate in ladder:
        steps.append(trial(rate))
        if stop(steps):
            break
    return steps


def bisect(
    trial: Callable[[int], S],
    passes: Callable[[S], bool],
    lo: int,
    hi: int,
    resolution: float,
    granularity: int = 500,
) -> S | None:
    """Between ``lo`` (passed, or 0) and ``hi`` (failed), rates rounded to ``granularity``,
    until the interval is under max(resolution, 2 % of lo); the best passing trial it ran."""
    best = None
    while hi - lo > max(resolution, 0.02 * lo):
        mid = int(round((lo + hi) / 2 / granularity) * granularity)
        if mid in (lo, hi):
            break
        t = trial(mid)
        if passes(t):
            lo, best = mid, t
        else:
            hi = mid
    return best
