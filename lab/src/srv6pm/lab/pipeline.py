"""The results pipeline around a lab: Kafka, InfluxDB and an srv6pm collector, run from one
working directory, with the topics and database the node managers and the collector use."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Self

from .servers import CollectorProcess, InfluxServer, KafkaServer, free_ports

TOPIC = "srv6pm.measurements.v1"
DLQ_TOPIC = "srv6pm.measurements.dlq.v1"
PARTITIONS = 3
TOPIC_RETENTION_MS = 7 * 24 * 3600 * 1000
DATABASE = "srv6pm"
RETENTION_POLICY = "thirty_days"
RETENTION = "30d"


class ResultsPipeline:
    def __init__(self, workdir: Path, collector_settings: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        # all at once: ports picked one server at a time could be picked twice (none is bound
        # before start())
        kafka, controller, influx, rpc, http = free_ports(5)
        self.kafka = KafkaServer(self.workdir / "kafka", kafka, controller)
        self.influx = InfluxServer(self.workdir / "influxdb", influx, rpc)
        self.collector = CollectorProcess(
            self.workdir / "collector",
            {
                "kafka_bootstrap": self.kafka.bootstrap,
                "kafka_topic": TOPIC,
                "kafka_dlq_topic": DLQ_TOPIC,
                "influx_url": self.influx.url,
                "influx_bucket": DATABASE,
                **(collector_settings or {}),
            },
            http,
        )

    @property
    def node_manager_settings(self) -> dict[str, str]:
        return {"kafka_bootstrap": self.kafka.bootstrap, "kafka_topic": TOPIC}

    def start(self) -> None:
        self.kafka.start()
        self.influx.start()
        self.kafka.create_topic(TOPIC, PARTITIONS, TOPIC_RETENTION_MS)
        self.kafka.create_topic(DLQ_TOPIC, 1, TOPIC_RETENTION_MS)
        self.influx.create_database(DATABASE, RETENTION_POLICY, RETENTION)
        self.collector.start()

    def stop(self) -> None:
        for server in (self.collector, self.influx, self.kafka):
            server.stop()

    def query(self, influxql: str) -> list[dict[str, Any]]:
        """Series of an InfluxQL query on the srv6pm database, times in ns."""
        return self.influx.query(influxql, DATABASE, epoch="ns")

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
