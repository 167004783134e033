"""Delay threshold crossings with hysteresis (the SR-PM model of draft-ietf-spring-stamp-srpm:
a delay is reported when it moved enough, not every time it is measured).

Each watched metric has a reference: the value it last reported. A new value crosses when it is
more than `percent` % of the reference, or more than `absolute_ns`, away from it (either one, when
both are set). A crossing is reported as an event and becomes the new reference; a value that
does not cross changes nothing, so a slow drift is reported once it adds up to a threshold, and
noise around the reference is never reported. The first value of a metric is always reported
(`first`, reference 0). At most one event per metric per `min_report_interval_ns`: a crossing
inside that time is not reported and leaves the reference where it was, so the next check
compares against it again.

Values come at the end of each computation interval (or block) and, with `check_each_burst`, as
each burst's mean (`accelerated`): only the mean metrics have a burst value. Pure: the caller
says the values and when they were taken.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass


class Metric(enum.Enum):
    TWO_WAY_MEAN = "two_way_mean"
    TWO_WAY_P99 = "two_way_p99"
    FORWARD_MEAN = "forward_mean"  # one-way: only with synchronised clocks
    REVERSE_MEAN = "reverse_mean"
    JITTER = "jitter"  # two-way mean |IPDV|


# What a burst's mean stands for: a percentile or a jitter of a few back-to-back probes says
# little, so those are checked per interval only.
BURST_METRICS = frozenset({Metric.TWO_WAY_MEAN, Metric.FORWARD_MEAN, Metric.REVERSE_MEAN})


@dataclass(frozen=True)
class ThresholdConfig:
    percent: float = 0.0
    absolute_ns: int = 0
    check_each_burst: bool = False
    min_report_interval_ns: int = 0
    metrics: tuple[Metric, ...] = (Metric.TWO_WAY_MEAN,)

    def __post_init__(self) -> None:
        if self.percent < 0 or self.absolute_ns < 0 or self.min_report_interval_ns < 0:
            raise ValueError(
                f"thresholds must be >= 0, not {self.percent} %, {self.absolute_ns} ns, "
                f"{self.min_report_interval_ns} ns between reports"
            )
        if not (self.percent or self.absolute_ns):
            raise ValueError("give a percent or an absolute threshold (both 0: no thresholds)")
        if not self.metrics or len(set(self.metrics)) != len(self.metrics):
            raise ValueError(f"threshold metrics must be distinct and at least one: {self.metrics}")


@dataclass(frozen=True)
class ThresholdEvent:
    """`metric` moved from `reference_ns` (the value last reported) to `value_ns`."""

    session: str
    metric: Metric
    value_ns: int
    reference_ns: int  # 0 when `first`
    first: bool
    accelerated: bool  # decided on one burst's mean
    at_ns: int  # the end of the interval, or the burst's last T1


@dataclass
class _Reported:
    value_ns: int
    at_ns: int


class ThresholdMonitor:
    """One session's thresholds: the reference and last report of each metric."""

    def __init__(self, session: str, config: ThresholdConfig) -> None:
        self.session = session
        self.config = config
        self._reported: dict[Metric, _Reported] = {}
        self.events: dict[Metric, int] = dict.fromkeys(config.metrics, 0)  # reported so far

    def interval(self, values: Mapping[Metric, int], at_ns: int) -> list[ThresholdEvent]:
        """Check the values of an interval (or block) that ended at `at_ns`; a metric with no
        value (no reply, no one-way delay) is not checked."""
        return self._check(values, at_ns, accelerated=False)

    def burst(self, means: Mapping[Metric, int], at_ns: int) -> list[ThresholdEvent]:
        """The accelerated check of a burst's means (`at_ns`: its last probe's T1); nothing
        unless `check_each_burst`."""
        if not self.config.check_each_burst:
            return []
        return self._check(
            {m: v for m, v in means.items() if m in BURST_METRICS}, at_ns, accelerated=True
        )

    def _check(
        self, values: Mapping[Metric, int], at_ns: int, accelerated: bool
    ) -> list[ThresholdEvent]:
        events = []
        for metric in self.config.metrics:
            value = values.get(metric)
            if value is None:
                continue
            last = self._reported.get(metric)
            if last is not None:
                if not self.crossed(last.value_ns, value):
                    continue
                if at_ns - last.at_ns < self.config.min_report_interval_ns:
                    continue  # too soon: the reference stays, the next check sees it again
            self._reported[metric] = _Reported(value, at_ns)
            self.events[metric] += 1
            events.append(
                ThresholdEvent(
                    self.session,
                    metric,
                    value,
                    last.value_ns if last else 0,
                    last is None,
                    accelerated,
                    at_ns,
                )
            )
        return events

    def crossed(self, reference_ns: int, value_ns: int) -> bool:
        """More than `percent` % of the reference or more than `absolute_ns` away from it."""
        change = abs(value_ns - reference_ns)
        by_percent = self.config.percent > 0 and change * 100 > self.config.percent * abs(
            reference_ns
        )
        by_absolute = self.config.absolute_ns > 0 and change > self.config.absolute_ns
        return by_percent or by_absolute
