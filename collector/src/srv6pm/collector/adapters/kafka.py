"""The records topic, read by a consumer group with offsets committed by hand, and the
dead-letter topic records that cannot become points go to."""

from __future__ import annotations

import logging

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

log = logging.getLogger(__name__)


class RecordSource:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        self._topic = topic
        self.broker_errors = 0
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"srv6pm-collector-{group}",
                # Offsets move only when InfluxDB has accepted the batch (commit()).
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "error_cb": self._on_error,
                **(extra or {}),
            }
        )
        self._consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.assignment: list[TopicPartition] = []
        self._lag = 0

    def _on_error(self, error: KafkaError) -> None:
        self.broker_errors += 1
        if self.broker_errors in (1, 10) or self.broker_errors % 1000 == 0:
            log.warning("kafka: %s", error)

    def _assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.assignment = list(partitions)
        log.info("assigned partitions %s", sorted(p.partition for p in partitions))

    def _revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        # Called only while polling, between batches: no batch is ever half done here.
        self.assignment = []

    def poll(self, max_records: int, timeout_s: float) -> list[Message]:
        """Up to `max_records` records (errors are logged and left out)."""
        out = []
        for message in self._consumer.consume(max_records, timeout_s):
            error = message.error()
            if error is None:
                out.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                self._on_error(error)
        self._measure_lag()
        return out

    def commit(self, messages: list[Message]) -> None:
        """Commit past the last of `messages` on each partition (synchronously)."""
        last: dict[tuple[str, int], int] = {}
        for m in messages:
            key = (str(m.topic()), int(m.partition() or 0))
            last[key] = max(last.get(key, -1), int(m.offset() or 0))
        if last:
            self._consumer.commit(
                offsets=[TopicPartition(t, p, o + 1) for (t, p), o in last.items()],
                asynchronous=False,
            )

    def lag(self) -> int:
        """Records in the assigned partitions not yet consumed, as of the last poll: computed
        there, on the consuming thread (a Consumer call from another thread waits for the
        consume() in progress, which would hang a metrics scrape)."""
        return self._lag

    def _measure_lag(self) -> None:
        total = 0
        for tp in self._consumer.position(self.assignment) if self.assignment else []:
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if tp.offset >= 0 and high >= 0:
                total += max(0, high - tp.offset)
        self._lag = total

    def close(self) -> None:
        self._consumer.close()


class DeadLetters:
    """Records that cannot become points, with the reason and where they came from (headers).
    Each is acknowledged by the broker before the offset that held it is committed."""

    def __init__(self, bootstrap: str, topic: str, extra: dict[str, str] | None = None) -> None:
        self._topic = topic
        self.sent = 0
        self._errors: list[str] = []
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                **(extra or {}),
            }
        )

    def send(self, message: Message, reason: str) -> None:
        source = f"{message.topic()}/{message.partition()}@{message.offset()}"
        if self.sent < 10 or self.sent % 1000 == 0:  # a flood of bad records: not of log lines
            log.warning(
                "record %s to the dead-letter topic (%d so far): %s", source, self.sent + 1, reason
            )
        self._producer.produce(
            self._topic,
            value=message.value(),
            key=message.key(),
            headers=[("srv6pm.reason", reason.encode()), ("srv6pm.source", source.encode())],
            on_delivery=self._delivered,
        )
        self.sent += 1

    def _delivered(self, error: KafkaError | None, _: Message) -> None:
        if error:
            self._errors.append(str(error))

    def flush(self, timeout_s: float) -> None:
        """Wait for every dead letter sent; raise if any was not stored (the batch is retried)."""
        left = self._producer.flush(timeout_s)
        errors, self._errors = self._errors, []
        if left or errors:
            raise confluent_kafka.KafkaException(
                f"dead-letter topic: {left} records unacknowledged, errors: {errors[:3]}"
            )
