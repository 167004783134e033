"""Prometheus metrics of the controller, read from its services at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .deps import Services


class ControllerCollector(Collector):
    def __init__(self, services: Services) -> None:
        self._services = services

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        reconciler = self._services.reconciler
        if reconciler:
            stats = reconciler.stats
            for name, value, text in (
                ("passes", stats.passes, "reconcile passes"),
                ("applies", stats.applies, "ApplyState calls that changed a node"),
                ("drifts", stats.drifts, "nodes found to differ from a state they had taken"),
                ("failures", stats.failures, "node reconciliations that failed"),
            ):
                yield CounterMetricFamily(f"srv6pm_reconcile_{name}", text, value=value)
            applied = GaugeMetricFamily(
                "srv6pm_node_applied", "1 when the node holds its desired state", labels=["node"]
            )
            for node, state in sorted(stats.by_node.items()):
                applied.add_metric([node], 1.0 if state == "applied" else 0.0)
            yield applied
        violated = GaugeMetricFamily(
            "srv6pm_threshold_violated",
            "1 when the session breaks its objective (0 ok, absent: not evaluated yet)",
            labels=["session"],
        )
        for row in self._services.thresholds.all():
            if row.state != "unknown":
                violated.add_metric([row.session], 1.0 if row.state == "violated" else 0.0)
        yield violated
