"""The collector's Prometheus metrics (served with /healthz by srv6pm.common.http)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)


class CollectorMetrics:
    def __init__(self, registry: CollectorRegistry, lag: Callable[[], int]) -> None:
        self.records = Counter(
            "srv6pm_collector_records", "records consumed", ["outcome"], registry=registry
        )
        self.points = Counter(
            "srv6pm_collector_points_written", "points InfluxDB accepted", registry=registry
        )
        self.write_errors = Counter(
            "srv6pm_collector_write_errors", "failed InfluxDB writes (retried)", registry=registry
        )
        self.batch_seconds = Histogram(
            "srv6pm_collector_batch_seconds",
            "time to write one batch to InfluxDB",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.record_age_seconds = Histogram(
            "srv6pm_collector_record_age_seconds",
            "from a record's creation on its node to its points being written",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        lag_gauge = Gauge(
            "srv6pm_collector_consumer_lag", "records not yet consumed", registry=registry
        )
        lag_gauge.set_function(lag)
