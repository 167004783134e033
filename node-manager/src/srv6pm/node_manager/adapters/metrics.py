"""Prometheus metrics of the node manager, read from the live objects at each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .journal import Journal
from .kafka import KafkaPublisher

APPLY_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class NodeCollector(Collector):
    def __init__(
        self,
        journal: Journal,
        publisher: KafkaPublisher | None,
        sender_stats: Callable[[], Any],
        reflector_stats: Callable[[], Any],
        kernel_reflector_stats: Callable[[], Mapping[str, int]],
    ) -> None:
        self._journal = journal
        self._publisher = publisher
        self._sender_stats = sender_stats
        self._reflector_stats = reflector_stats
        self._kernel_reflector_stats = kernel_reflector_stats

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


def apply_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "srv6pm_apply_seconds",
        "time to converge to a desired state (ApplyState)",
        buckets=APPLY_SECONDS_BUCKETS,
        registry=registry,
    )
