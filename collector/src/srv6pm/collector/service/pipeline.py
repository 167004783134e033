"""Consume records, write their points, then commit: the collector's one use case.

A batch is committed only once it is written and its bad records are in the dead-letter topic,
so no offset is ever committed for a record whose points InfluxDB has not accepted. One batch is
written while the next is consumed and converted; batches are committed in order. InfluxDB down
or refusing service: the batch is retried with backoff; one more batch is consumed meanwhile, no
more. Held longer than Kafka's max.poll.interval.ms, the collector leaves its group
and others take its partitions; its commit then fails and those records are written again by
their new owner: points are idempotent, so that only costs time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Message

from ..adapters.http import CollectorMetrics
from ..adapters.influx import InfluxSink, WriteFailed, WriteRefused
from ..adapters.kafka import DeadLetters, RecordSource
from ..domain import points

log = logging.getLogger(__name__)
BACKOFF_S = (0.5, 1, 2, 5, 10)
DLQ_FLUSH_S = 10.0
AGE_SAMPLES = 64  # records per batch whose age is observed


@dataclass
class _Prepared:
    message: Message
    lines: list[str]
    created_ns: int


@dataclass
class PipelineState:
    heartbeat: float = field(default_factory=time.monotonic)
    failing_since: float | None = None
    last_error: str = ""


class Pipeline:
    def __init__(
        self,
        source: RecordSource,
        sink: InfluxSink,
        dead_letters: DeadLetters,
        metrics: CollectorMetrics,
        batch_size: int,
        batch_wait_s: float,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._source = source
        self._sink = sink
        self._dead_letters = dead_letters
        self._metrics = metrics
        self._batch_size = batch_size
        self._batch_wait_s = batch_wait_s
        self._clock = clock
        self.state = PipelineState()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="influxdb-write")
        self._pending: tuple[list[Message], Future[bool]] | None = None

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step(stop)
        self._finish()

    def step(self, stop: threading.Event) -> None:
        """Consume and convert a batch while the previous one is being written (InfluxDB works
        while we convert); then commit the previous one and hand this one to the writer."""
        self.state.heartbeat = time.monotonic()
        messages = self._source.poll(self._batch_size, self._batch_wait_s)
        prepared = [p for p in map(self._prepare, messages) if p is not None]
        self._finish()
        if messages:
            self._pending = (messages, self._writer.submit(self._write_until_done, prepared, stop))

    def _finish(self) -> None:
        """Wait for the batch being written; commit it once written."""
        if self._pending is None:
            return
        messages, written = self._pending
        self._pending = None
        while True:
            self.state.heartbeat = time.monotonic()
            try:
                done = written.result(timeout=1.0)
                break
            except TimeoutError:
                continue
        if done:
            self._commit(messages)

    def _write_until_done(self, batch: list[_Prepared], stop: threading.Event) -> bool:
        """Write a batch (and its dead letters), retrying with backoff; False if stopped first."""
        attempt = 0
        while not stop.is_set():
            try:
                self._write(batch)
                self._dead_letters.flush(DLQ_FLUSH_S)
            except (WriteFailed, KafkaException) as e:
                self._failed(str(e), attempt)
                stop.wait(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
                attempt += 1
                continue
            if self.state.failing_since is not None:
                log.info("writing again after %.1f s", time.monotonic() - self.state.failing_since)
            self.state.failing_since = None
            return True
        return False

    def _prepare(self, message: Message) -> _Prepared | None:
        """The record's points; a record that has none goes to the dead-letter topic."""
        try:
            record = points.decode(message.value())
            return _Prepared(message, points.lines(record), record.created_unix_ns)
        except points.RecordError as e:
            self._dead_letter(message, str(e))
        except Exception as e:  # a record must never stop the stream
            log.exception("record %s/%d@%d", message.topic(), message.partition(), message.offset())
            self._dead_letter(message, f"cannot convert: {type(e).__name__}: {e}")
        return None

    def _dead_letter(self, message: Message, reason: str) -> None:
        self._dead_letters.send(message, reason)
        self._metrics.records.labels("dead_letter").inc()

    def _write(self, batch: list[_Prepared]) -> None:
        lines = [line for p in batch for line in p.lines]
        if not lines:
            return
        started = time.monotonic()
        try:
            self._sink.write(lines)
        except WriteRefused:
            # Some point is refused (e.g. a field's type changed): find which record it is
            # and let the others through.
            for p in batch:
                try:
                    self._sink.write(p.lines)
                except WriteRefused as e:
                    self._dead_letter(p.message, f"InfluxDB refused its points: {e}")
                    p.lines = []
        self._metrics.batch_seconds.observe(time.monotonic() - started)
        now = self._clock()
        written = [p for p in batch if p.lines]
        self._metrics.points.inc(sum(len(p.lines) for p in written))
        self._metrics.records.labels("written").inc(len(written))
        # a sample of each batch: the distribution is the same, at a fraction of the cost
        for p in written[:: max(1, len(written) // AGE_SAMPLES)]:
            if p.created_ns:
                self._metrics.record_age_seconds.observe(max(0, now - p.created_ns) / 1e9)

    def _failed(self, error: str, attempt: int) -> None:
        self._metrics.write_errors.inc()
        if self.state.failing_since is None:
            self.state.failing_since = time.monotonic()
        self.state.last_error = error
        if attempt in (0, 3) or attempt % 20 == 0:
            log.warning("batch not written (attempt %d), retrying: %s", attempt + 1, error)

    def _commit(self, messages: list[Message]) -> None:
        try:
            self._source.commit(messages)
        except KafkaException as e:
            # Written already: whoever owns these partitions now writes them again, the same.
            log.warning("offset commit failed (the records will be written again): %s", e)
