"""Prometheus metrics of the node manager, read from the live objects at each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .journal import Journal
from .kafka import KafkaPublisher

APPLY_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LIVENESS_LABELS = ["session", "policy", "segment_list"]
THRESHOLD_LABELS = [*LIVENESS_LABELS, "metric"]


@dataclass(frozen=True)
class SessionLiveness:
    """A running session with liveness: its state (None: not decided yet) and its changes."""

    session: str
    policy: str
    segment_list: str
    up: bool | None
    changes: int


@dataclass(frozen=True)
class SessionThresholds:
    """A running session with thresholds: the events of each metric it watches."""

    session: str
    policy: str
    segment_list: str
    events: Mapping[str, int]  # metric -> events since the session (re)started


class NodeCollector(Collector):
    def __init__(
        self,
        journal: Journal,
        publisher: KafkaPublisher | None,
        sender_stats: Callable[[], Any],
        reflector_stats: Callable[[], Any],
        kernel_reflector_stats: Callable[[], Mapping[str, int]],
        liveness: Callable[[], Iterable[SessionLiveness]] = tuple,
        thresholds: Callable[[], Iterable[SessionThresholds]] = tuple,
    ) -> None:
        self._journal = journal
        self._publisher = publisher
        self._sender_stats = sender_stats
        self._reflector_stats = reflector_stats
        self._kernel_reflector_stats = kernel_reflector_stats
        self._liveness = liveness
        self._thresholds = thresholds

    def collect(self) -> Iterator[Metric]:
        groups: list[tuple[str, Any]] = [
            ("srv6pm_stamp_sender", self._sender_stats()),
            ("srv6pm_stamp_reflector", self._reflector_stats()),
            ("srv6pm_journal", self._journal.stats),
        ]
        if self._publisher:
            groups.append(("srv6pm_kafka", self._publisher.stats))
        for prefix, stats in groups:
            for name, value in asdict(stats).items():
                yield CounterMetricFamily(f"{prefix}_{name}", f"{prefix} {name}", value=value)
        prefix = "srv6pm_stamp_kernel_reflector"
        for name, value in self._kernel_reflector_stats().items():
            yield CounterMetricFamily(f"{prefix}_{name}", f"{prefix} {name}", value=value)
        yield GaugeMetricFamily(
            "srv6pm_journal_depth",
            "records in the journal not yet acknowledged by Kafka",
            value=self._journal.depth(),
        )
        yield from self._liveness_metrics()
        yield self._threshold_metrics()

    def _liveness_metrics(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "srv6pm_stamp_liveness_up",
            "liveness of a session's segment list: 1 up, 0 down, -1 not decided yet "
            "(a session restarts undecided)",
            labels=LIVENESS_LABELS,
        )
        changes = CounterMetricFamily(
            "srv6pm_stamp_liveness_changes",
            "liveness changes of a session since it (re)started, its first decision included",
            labels=LIVENESS_LABELS,
        )
        for s in self._liveness():
            labels = [s.session, s.policy, s.segment_list]
            state.add_metric(labels, -1 if s.up is None else int(s.up))
            changes.add_metric(labels, s.changes)
        yield state
        yield changes

    def _threshold_metrics(self) -> Metric:
        events = CounterMetricFamily(
            "srv6pm_stamp_threshold_events",
            "delay threshold events of a session since it (re)started, its first report "
            "included, per metric it watches",
            labels=THRESHOLD_LABELS,
        )
        for s in self._thresholds():
            for metric, count in s.events.items():
                events.add_metric([s.session, s.policy, s.segment_list, metric], count)
        return events


def apply_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "srv6pm_apply_seconds",
        "time to converge to a desired state (ApplyState)",
        buckets=APPLY_SECONDS_BUCKETS,
        registry=registry,
    )
