"""The shared statistics of bench/harness: percentiles, quartiles, summaries, paired ratios."""

from __future__ import annotations

import math

import pytest

from bench.harness.stats import median, paired, percentile, quartiles, ratio, summary


def test_nearest_rank_percentile_is_the_ceil_qn_th_smallest() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0  # ceil(2.5) = 3rd
    assert percentile(values, 40) == 2.0  # ceil(2.0) = 2nd
    assert percentile(values, 99) == 5.0
    assert percentile(values, 1) == 1.0


def test_floor_percentile_is_one_rank_higher_when_qn_is_whole() -> None:
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 50, "floor") == 6.0  # index 5
    assert percentile(values, 50) == 5.0  # nearest rank: 5th
    assert percentile(values, 55, "floor") == percentile(values, 55) == 6.0
    assert percentile(values, 100, "floor") == 10.0


def test_lower_percentile_indexes_q_times_n_minus_one() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 99, "lower") == 99.0  # index int(0.99 * 99) = 98
    assert percentile(values, 50, "lower") == 50.0


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def test_quartiles_of_one_value_are_that_value() -> None:
    assert quartiles([7.0]) == {"min": 7.0, "q1": 7.0, "median": 7.0, "q3": 7.0, "max": 7.0}


def test_quartiles_spread() -> None:
    q = quartiles([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (q["min"], q["median"], q["max"]) == (1.0, 3.0, 5.0)
    assert q["q1"] <= q["median"] <= q["q3"]


def test_summary_ignores_missing_values() -> None:
    assert summary([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert summary([None]) is None


def test_median_of_nothing_is_nan() -> None:
    assert math.isnan(median([]))


def test_paired_ratios_compare_samples_of_the_same_round_only() -> None:
    baseline = {1: 100.0, 2: 200.0}
    samples = [(1, 98.0), (2, 190.0), (3, 50.0)]  # round 3 has no baseline
    assert paired(baseline, samples, lambda b, s: s / b) == [0.98, 0.95]


def test_paired_ratio_is_the_same_whatever_the_round_s_speed() -> None:
    # the machine slows down by half in round 2; the monitored configuration costs 2 % in both
    baseline = {1: 100.0, 2: 50.0}
    monitored = [(1, 98.0), (2, 49.0)]
    assert paired(baseline, monitored, lambda b, s: s / b) == pytest.approx([0.98, 0.98])


def test_ratio_by_zero_is_nan() -> None:
    assert ratio(1.0, 4.0) == 0.25
    assert math.isnan(ratio(1.0, 0.0))
