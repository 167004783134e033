"""Wires settings, Kafka, InfluxDB, the pipeline and the HTTP endpoints."""

from __future__ import annotations

import logging
import threading
import time

from prometheus_client import CollectorRegistry
from srv6pm.common.http import HealthServer

from .adapters.http import CollectorMetrics
from .adapters.influx import InfluxSink
from .adapters.kafka import DeadLetters, RecordSource
from .config import Settings
from .service.pipeline import Pipeline

log = logging.getLogger(__name__)
STUCK_S = 120.0  # no loop turn for this long: unhealthy (the retry loop turns every <= 10 s)


class CollectorServer:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.source = RecordSource(
            settings.kafka_bootstrap,
            settings.kafka_topic,
            settings.kafka_group,
            settings.kafka_config,
        )
        self.registry = CollectorRegistry()
        self.pipeline = Pipeline(
            self.source,
            InfluxSink(
                settings.influx_url,
                settings.influx_token,
                settings.influx_org,
                settings.influx_bucket,
                settings.influx_timeout_ms,
            ),
            DeadLetters(settings.kafka_bootstrap, settings.kafka_dlq_topic, settings.kafka_config),
            CollectorMetrics(self.registry, self.source.lag),
            settings.batch_size,
            settings.batch_wait_ms / 1000,
        )
        self.http = HealthServer(settings.http_listen, self.registry, self._health)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pipeline", daemon=True)

    def _health(self) -> tuple[bool, dict[str, object]]:
        state = self.pipeline.state
        idle = time.monotonic() - state.heartbeat
        failing = state.failing_since
        details: dict[str, object] = {
            "partitions": sorted(p.partition for p in self.source.assignment),
            "seconds_since_loop": round(idle, 1),
            "influxdb": "ok" if failing is None else "failing",
        }
        if failing is not None:
            details["failing_for_s"] = round(time.monotonic() - failing, 1)
            details["last_error"] = state.last_error
        return idle < STUCK_S, details

    def _run(self) -> None:
        try:
            self.pipeline.run(self._stop)
        except Exception:
            log.exception("pipeline stopped")
            raise

    def start(self) -> None:
        self.http.start()
        self._thread.start()
        log.info(
            "collector: %s %s -> %s %s (group %s)",
            self._settings.kafka_bootstrap,
            self._settings.kafka_topic,
            self._settings.influx_url,
            self._settings.influx_bucket,
            self._settings.kafka_group,
        )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.source.close()
        self.http.stop()
