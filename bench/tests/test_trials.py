"""How the harness schedules trials: rounds alternated with a warm-up, a ladder, bisection."""

from __future__ import annotations

from bench.harness.trials import alternate, bisect, step_up


def test_alternate_runs_every_configuration_each_round_and_drops_the_warm_up() -> None:
    seen: list[tuple[str, int]] = []

    def measure(cfg: str, rnd: int) -> tuple[str, int]:
        seen.append((cfg, rnd))
        return cfg, rnd

    kept = alternate(["plain", "altmark"], 2, measure)
    assert seen == [(c, r) for r in (0, 1, 2) for c in ("plain", "altmark")]
    assert kept == [("plain", 1), ("altmark", 1), ("plain", 2), ("altmark", 2)]


def test_step_up_stops_at_the_first_step_that_says_stop() -> None:
    steps = step_up(lambda rate: rate, [10, 20, 30, 40], lambda s: s[-1] >= 30)
    assert steps == [10, 20, 30]


def test_bisect_finds_the_highest_passing_rate_to_the_resolution() -> None:
    limit = 43_700  # a reflector that loses nothing up to here
    tried: list[int] = []

    def trial(rate: int) -> int:
        tried.append(rate)
        return rate

    best = bisect(trial, lambda rate: rate <= limit, 40_000, 60_000, 1000)
    assert best is not None
    assert best <= limit
    assert limit - best <= max(1000, 0.02 * best)
    assert all(rate % 500 == 0 for rate in tried)


def test_bisect_without_a_passing_trial_returns_none() -> None:
    assert bisect(lambda rate: rate, lambda rate: False, 0, 4000, 1000) is None
