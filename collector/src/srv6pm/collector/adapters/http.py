"""Prometheus /metrics and a /healthz endpoint for probes, on one small HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

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


class HealthServer:
    """GET /metrics: Prometheus; GET /healthz: 200 while `healthy()` says so, else 503, with
    the details as JSON either way."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        health: Callable[[], tuple[bool, dict[str, object]]],
    ) -> None:
        host, _, port = address.rpartition(":")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._reply(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif self.path == "/healthz":
                    ok, details = health()
                    self._reply(
                        200 if ok else 503, "application/json", json.dumps(details).encode()
                    )
                else:
                    self._reply(404, "text/plain", b"not found: /metrics, /healthz\n")

            def _reply(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:  # scrapes are not worth a log line
                pass

        self._server = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Handler)  # noqa: S104
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
