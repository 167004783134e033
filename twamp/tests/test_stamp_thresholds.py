"""Delay thresholds with hysteresis: the first value is reported, then only a move of more than
the threshold from the value last reported, at most once per metric per minimum interval. Known
delay sequences give exact events, alone and through a sender on a clock of ours (intervals,
blocks and the accelerated check on each burst)."""

from __future__ import annotations

import pytest
from srv6pm.twamp.thresholds import Metric, ThresholdConfig, ThresholdMonitor
from test_stamp_delay_blocks import MS

US = 1_000
MEAN = Metric.TWO_WAY_MEAN


def monitor(**settings) -> ThresholdMonitor:
    return ThresholdMonitor("s", ThresholdConfig(**settings))


def intervals(m: ThresholdMonitor, values_us: list[int], step: int = 100 * MS) -> list[tuple]:
    """Two-way means (µs), one per interval ending every `step`: (value, reference, first) of
    each event, in µs."""
    out = []
    for i, value in enumerate(values_us):
        for e in m.interval({MEAN: value * US}, (i + 1) * step):
            out.append((e.value_ns // US, e.reference_ns // US, e.first))
    return out


def test_the_first_value_is_reported_then_only_moves_beyond_the_percentage():
    m = monitor(percent=20)
    # 20 % of 10 ms is 2 ms: 12 ms is not more than that, 12.001 ms is; the reference moves to it
    assert intervals(m, [10_000, 11_000, 12_000, 12_001, 10_000, 9_600, 9_500]) == [
        (10_000, 0, True),
        (12_001, 10_000, False),
        # 20 % of 12.001 ms is 2.4002 ms: 9.6 ms is 2.401 ms away, 10 ms only 2.001 ms
        (9_600, 12_001, False),
    ]
    assert m.events == {MEAN: 3}


def test_an_absolute_threshold_and_either_one_of_two():
    assert intervals(monitor(absolute_ns=500 * US), [1_000, 1_500, 1_501, 1_100, 1_000]) == [
        (1_000, 0, True),
        (1_501, 1_000, False),
        (1_000, 1_501, False),  # 501 µs back down
    ]
    # 50 % of 1 ms or 2 ms: a small delay moves by percent, a large one by 2 ms
    both = monitor(percent=50, absolute_ns=2_000 * US)
    assert intervals(both, [1_000, 1_400, 1_501, 20_000, 21_999, 22_001]) == [
        (1_000, 0, True),
        (1_501, 1_000, False),
        (20_000, 1_501, False),
        (22_001, 20_000, False),  # 10 % but more than 2 ms
    ]


def test_a_slow_drift_is_reported_once_it_adds_up_to_the_threshold():
    # 300 µs a step, under 1 ms each: reported when 1.2 ms away from the reference, not before
    drift = [5_000 + 300 * i for i in range(8)]  # 5000 5300 ... 7100
    assert intervals(monitor(absolute_ns=1_000 * US), drift) == [
        (5_000, 0, True),
        (6_200, 5_000, False),  # then 6500, 6800, 7100 are within 1 ms of 6200
    ]


def test_at_most_one_event_per_metric_per_minimum_interval_and_the_reference_stays():
    m = monitor(absolute_ns=1_000 * US, min_report_interval_ns=250 * MS)
    # intervals end every 100 ms: at 200 and 300 ms a crossing comes too soon after the first
    # event (100 ms); at 400 ms it is reported, against the first's value; at 600 ms, 9 ms is
    # 2 ms away but 200 ms after the last event: not yet
    assert intervals(m, [1_000, 5_000, 6_000, 7_000, 7_500, 9_000]) == [
        (1_000, 0, True),
        (7_000, 1_000, False),
    ]
    (late,) = m.interval({MEAN: 9_000 * US}, 650 * MS)
    assert (late.value_ns, late.reference_ns, late.at_ns) == (9_000 * US, 7_000 * US, 650 * MS)


def test_each_metric_has_its_own_reference_and_a_missing_value_is_not_checked():
    m = monitor(
        absolute_ns=100 * US,
        metrics=(MEAN, Metric.TWO_WAY_P99, Metric.FORWARD_MEAN, Metric.JITTER),
    )
    first = m.interval({MEAN: 1 * MS, Metric.TWO_WAY_P99: 3 * MS, Metric.JITTER: 0}, 10)
    assert [(e.metric, e.first) for e in first] == [
        (MEAN, True),
        (Metric.TWO_WAY_P99, True),
        (Metric.JITTER, True),  # no forward delay without synchronised clocks
    ]
    later = m.interval(
        {MEAN: 1 * MS, Metric.TWO_WAY_P99: 3 * MS + 101 * US, Metric.FORWARD_MEAN: 400 * US},
        20,
    )
    assert [(e.metric, e.value_ns, e.reference_ns, e.first) for e in later] == [
        (Metric.TWO_WAY_P99, 3 * MS + 101 * US, 3 * MS, False),
        (Metric.FORWARD_MEAN, 400 * US, 0, True),
    ]


def test_a_burst_is_checked_only_when_asked_and_only_on_mean_metrics():
    metrics = (MEAN, Metric.TWO_WAY_P99)
    assert monitor(absolute_ns=1, metrics=metrics).burst({MEAN: 5}, 1) == []
    m = monitor(absolute_ns=100 * US, check_each_burst=True, metrics=metrics)
    (first,) = m.burst({MEAN: 1 * MS, Metric.TWO_WAY_P99: 9 * MS}, 7)
    assert (first.metric, first.accelerated, first.at_ns) == (MEAN, True, 7)
    # the burst moved the reference: the interval compares with the burst's mean
    (mean, p99) = m.interval({MEAN: 1_200 * US, Metric.TWO_WAY_P99: 2 * MS}, 100)
    assert (mean.metric, mean.reference_ns, mean.accelerated) == (MEAN, 1 * MS, False)
    assert (p99.metric, p99.first) == (Metric.TWO_WAY_P99, True)


def test_threshold_settings_are_checked():
    for settings, error in (
        ({}, "give a percent or an absolute threshold"),
        ({"percent": -1.0}, "must be >= 0"),
        ({"percent": 1.0, "metrics": ()}, "at least one"),
        ({"percent": 1.0, "metrics": (MEAN, MEAN)}, "distinct"),
    ):
        with pytest.raises(ValueError, match=error):
            ThresholdConfig(**settings)
