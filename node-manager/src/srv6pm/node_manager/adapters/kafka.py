"""Drains the journal to Kafka: one long-lived idempotent producer (acks=all), records keyed by
"<node>/<session or flow>" so each stays in order on its partition, marked delivered from the
delivery reports. Kafka down, slow or unreachable: records wait in the journal (never more than
MAX_IN_FLIGHT in memory) and go out in journal order when it is back. A failed delivery re-sends
from the oldest failed record: consumers see a record at least once, in order per key."""

from __future__ import annotations

import functools
import logging
import threading
from dataclasses import dataclass

import confluent_kafka

from .journal import Journal
from .records import with_journal_id

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 20_000
READ_BATCH = 5_000
RETRY_S = 1.0


@dataclass
class PublisherStats:
    published: int = 0  # acknowledged by Kafka (acks=all)
    delivery_failures: int = 0  # failed deliveries, re-sent
    broker_errors: int = 0  # client-level errors (brokers down, unreachable, ...)


class KafkaPublisher:
    def __init__(
        self,
        journal: Journal,
        node_id: str,
        bootstrap: str,
        topic: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        self._journal = journal
        self._node_id = node_id
        self._topic = topic
        self.stats = PublisherStats()
        self._producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": f"srv6pm-node-manager-{node_id}",
                "enable.idempotence": True,  # no duplicates or reordering from retries
                "acks": "all",
                "linger.ms": 20,
                "compression.type": "lz4",
                # A record not acknowledged in 5 minutes is reported failed and re-sent from
                # the journal; until then librdkafka retries it.
                "message.timeout.ms": 300_000,
                "queue.buffering.max.messages": MAX_IN_FLIGHT * 2,
                "error_cb": self._on_error,
                **(extra or {}),
            }
        )
        self._in_flight: set[int] = set()
        self._acked: list[int] = []
        self._failed: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-publisher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _on_error(self, error: confluent_kafka.KafkaError) -> None:
        self.stats.broker_errors += 1
        if self.stats.broker_errors in (1, 10) or self.stats.broker_errors % 1000 == 0:
            log.warning("kafka: %s (records wait in the journal)", error)

    def _on_delivery(
        self, journal_id: int, error: confluent_kafka.KafkaError | None, _: object
    ) -> None:
        (self._failed if error else self._acked).append(journal_id)
        if error and len(self._failed) == 1:
            log.warning("kafka: delivery of journal record %d failed: %s", journal_id, error)

    def _run(self) -> None:
        cursor = 0  # the last journal id handed to the producer
        while not self._stop.is_set():
            room = MAX_IN_FLIGHT - len(self._in_flight)
            rows = self._journal.undelivered(cursor, min(room, READ_BATCH)) if room > 0 else []
            for journal_id, key, record in rows:
                if not self._produce(journal_id, key, record):
                    break
                cursor = journal_id
            self._producer.poll(0 if rows else 0.05)
            cursor = self._settle(cursor)

    def _produce(self, journal_id: int, key: str, record: bytes) -> bool:
        try:
            self._producer.produce(
                self._topic,
                value=with_journal_id(record, journal_id),
                key=f"{self._node_id}/{key}",
                on_delivery=functools.partial(self._on_delivery, journal_id),
            )
        except BufferError:
            return False  # the producer's queue is full: poll, then go on from here
        self._in_flight.add(journal_id)
        return True

    def _settle(self, cursor: int) -> int:
        """Mark what Kafka acknowledged; after a failure, wait for what is still in flight and
        go back to the oldest failed record."""
        acked, self._acked = self._acked, []
        self._in_flight.difference_update(acked)
        self._journal.mark_delivered(acked)
        self.stats.published += len(acked)
        if not self._failed:
            return cursor
        self._producer.flush(RETRY_S)
        failed, self._failed = self._failed, []
        self.stats.delivery_failures += len(failed)
        self._in_flight.difference_update(failed)
        self._stop.wait(RETRY_S)
        return min(cursor, min(failed) - 1)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._producer.flush(timeout)
        self._settle(0)
