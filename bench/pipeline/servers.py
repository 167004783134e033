"""The servers a phase talks to (InfluxDB, Kafka) and the collectors under test (ours, as a
process, and Telegraf)."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

import confluent_kafka
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from srv6pm.lab.servers import (
    CollectorProcess,
    InfluxServer,
    KafkaServer,
    _Server,  # Telegraf is run like our servers: own session, stopped by its PID only
    cache_dir,
)

from bench.harness.meters import process_cpu_s as cpu_s
from bench.harness.meters import wait_quiet
from bench.harness.run import BenchError, log
from bench.pipeline.common import (
    BATCH_RECORDS,
    NODE_PRODUCER,
    PARTITIONS,
    RETENTION,
    RETENTION_POLICY,
    TELEGRAF_VERSION,
)

# A cell of an InfluxQL result (a JSON value).
Cell = str | int | float | bool | None

# The collector's /metrics: plain values, and histograms as {le: cumulative count}.
Metrics = dict[str, float | dict[str, float]]


class Series(TypedDict, total=False):
    name: str
    columns: list[str]
    values: list[list[Cell]]


class StatementResult(TypedDict, total=False):
    """One statement's result in InfluxDB's /query answer."""

    statement_id: int
    series: list[Series]
    error: str


class Influx:
    """The queries this benchmark makes, on one kept-alive connection per thread."""

    def __init__(self, server: InfluxServer) -> None:
        self.server = server
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(
                "127.0.0.1", self.server.port, timeout=30
            )
        return conn

    def _request(self, method: str, path: str, body: str | None = None) -> bytes:
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
        for attempt in (1, 2):  # a kept-alive connection the server closed: once more, anew
            conn = self._conn()
            try:
                conn.request(method, path, body, headers)
                reply = conn.getresponse()
                data = reply.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
                continue
            if reply.status != 200:
                raise BenchError(f"InfluxDB {path}: HTTP {reply.status} {data[:300]!r}")
            return data
        raise AssertionError("unreachable")

    def http_stats(self) -> dict[str, int]:
        """InfluxDB's HTTP service counters since it started (all databases): pointsWrittenOK,
        writeReq, writeReqBytes, ..."""
        stats = json.loads(self._request("GET", "/debug/vars"))
        out: dict[str, int] = {}
        for k, v in stats.items():
            if k.startswith("httpd"):
                for name, value in v["values"].items():
                    out[name] = out.get(name, 0) + int(value)
        return out

    def points_written(self) -> int:
        """Points InfluxDB's HTTP service has accepted since it started (all databases)."""
        return self.http_stats().get("pointsWrittenOK", 0)

    def statements(self, statements: list[str], db: str) -> list[StatementResult]:
        """The results of several statements in one request, in order."""
        body = urllib.parse.urlencode({"q": ";".join(statements), "db": db})
        answer = json.loads(self._request("POST", "/query", body))
        results: list[StatementResult] = answer["results"]
        for r in results:
            if "error" in r:
                raise BenchError(f"InfluxQL: {r['error']}")
        return sorted(results, key=lambda r: int(r.get("statement_id", 0)))

    def counts(self, db: str) -> dict[str, int]:
        """Points per measurement: every point of ours has an integer field `block`."""
        names = ("loss", "delay", "flow")
        results = self.statements([f'SELECT count("block") FROM "{m}"' for m in names], db)
        out = {}
        for name, r in zip(names, results, strict=True):
            series = r.get("series") or []
            count = series[0]["values"][0][1] if series else 0
            if not isinstance(count, int):
                raise BenchError(f"InfluxQL count of {name}: {count!r}")
            out[name] = count
        return out

    def create_database(self, db: str) -> None:
        self.server.create_database(db, RETENTION_POLICY, RETENTION)

    def drop_database(self, db: str) -> None:
        self.statements([f'DROP DATABASE "{db}"'], db)


def produce_all(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> None:
    """Every message on the topic, acknowledged, or BenchError."""
    errors: list[str] = []

    def delivered(error: confluent_kafka.KafkaError | None, _: object) -> None:
        if error is not None:
            errors.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, **NODE_PRODUCER})
    for key, value in zip(keys, values, strict=True):
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) or errors:
        raise BenchError(f"pre-filling {topic}: {len(errors)} errors, e.g. {errors[:2]}")


def messages_in(kafka: KafkaServer, topic: str) -> int:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": "bench-watermarks"}
    )
    try:
        total = 0
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=10
            )
            total += high - low
        return total
    finally:
        consumer.close()


def delete_topics(kafka: KafkaServer, topics: list[str]) -> None:
    for future in kafka.admin().delete_topics(topics, operation_timeout=30).values():
        with contextlib.suppress(confluent_kafka.KafkaException):
            future.result(30)


def telegraf_binary() -> Path:
    binary = cache_dir() / f"telegraf-{TELEGRAF_VERSION}" / "bin" / "telegraf"
    if not os.access(binary, os.X_OK):
        raise BenchError(f"telegraf is not installed at {binary}: bash bench/install-telegraf.sh")
    return binary


class TelegrafProcess(_Server):
    """Telegraf with a given configuration; it has no endpoint to probe, so start() returns as
    soon as the process runs (the points arriving in InfluxDB say the rest)."""

    name = "telegraf"

    def __init__(self, workdir: Path, config: str) -> None:
        super().__init__(workdir, start_timeout=30, stop_timeout=15)
        self.config = config

    def _prepare(self) -> list[str]:
        path = self.workdir / "telegraf.conf"
        path.write_text(self.config)
        return [str(telegraf_binary()), "--config", str(path)]

    def _serving(self) -> bool:
        return True

    def errors(self) -> list[str]:
        with contextlib.suppress(FileNotFoundError):
            text = self.output_path.read_text(errors="replace")
            return [line for line in text.splitlines() if " E! " in line]
        return []


def telegraf_config(
    kafka: KafkaServer,
    influx: InfluxServer,
    topic: str,
    group: str,
    db: str,
    args: argparse.Namespace,
) -> str:
    """The settings INFRA.md found Telegraf needs here, the rest as a user tuning it for
    throughput would set them (each says why)."""
    return f"""
[agent]
  ## Points go out in batches as large as the collector's (batch_size 5000).
  metric_batch_size = {BATCH_RECORDS}
  metric_buffer_limit = 100000
  ## A partial batch waits at most this long: the collector's batch_wait_ms (200) is the same
  ## trade. Telegraf's default, 10 s, would add up to 10 s to the last points of a run.
  flush_interval = "{args.telegraf_flush_interval}"
  flush_jitter = "0s"
  ## The default adds a `host` tag to every point: other series than the collector writes.
  omit_hostname = true
  quiet = true

[[inputs.kafka_consumer]]
  brokers = ["{kafka.bootstrap}"]
  ## Its default protocol (0.10.2.0) is refused by Kafka 4.x (endless EOF errors).
  kafka_version = "4.0.0"
  topics = ["{topic}"]
  consumer_group = "{group}"
  offset = "oldest"
  ## The default (1000) is below the batch size: every batch would wait for the flush.
  max_undelivered_messages = {args.telegraf_max_undelivered}
  data_format = "influx"

[[outputs.influxdb]]
  urls = ["{influx.url}"]
  database = "{db}"
  skip_database_creation = true
  ## Telegraf gzips by default; influxdb-client (the collector) does not: the same bytes on the
  ## wire for both unless --telegraf-content-encoding gzip.
  content_encoding = "{args.telegraf_content_encoding}"
"""


def collector_settings(
    kafka: KafkaServer, influx: InfluxServer, topic: str, group: str, db: str, extra: list[str]
) -> dict[str, str]:
    settings = {
        "kafka_bootstrap": kafka.bootstrap,
        "kafka_topic": topic,
        "kafka_dlq_topic": f"{topic}.dlq",
        "kafka_group": group,
        "influx_url": influx.url,
        "influx_bucket": f"{db}/{RETENTION_POLICY}",
    }
    for item in extra:
        name, _, value = item.partition("=")
        settings[name.replace("-", "_")] = value
    return settings


def collector_metrics(collector: CollectorProcess, timeout_s: float) -> Metrics | None:
    """The collector's /metrics: plain values and histograms ({le: cumulative count}); None
    when it does not answer in time (see final_metrics)."""
    conn = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=timeout_s)
    try:
        conn.request("GET", "/metrics")
        reply = conn.getresponse()
        body = reply.read()
    except (OSError, http.client.HTTPException) as e:
        log(f"collector /metrics did not answer in {timeout_s:.0f} s: {e}")
        return None
    finally:
        conn.close()
    if reply.status != 200:
        raise BenchError(f"collector /metrics: HTTP {reply.status}")
    out: Metrics = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "le")
            name = s.name + (f"{{{labels}}}" if labels else "")
            if s.name.endswith("_bucket"):
                buckets = out.get(name)
                if not isinstance(buckets, dict):
                    buckets = out[name] = {}
                buckets[s.labels["le"]] = s.value
            else:
                out[name] = s.value
    return out


def histogram(metrics: Metrics | None, name: str) -> dict[str, float] | None:
    """A histogram of collector_metrics(), None if there is none of that name."""
    buckets = (metrics or {}).get(name)
    return buckets if isinstance(buckets, dict) else None


def final_metrics(
    collector: CollectorProcess, timeout_s: float, unblock: Callable[[], None]
) -> Metrics | None:
    """The collector's /metrics once its work is done. A scrape can hang for as long as the
    collector's pipeline thread keeps calling consume(): the lag gauge (RecordSource.lag) calls
    Consumer.assignment(), which waits until no consume() is running (py-spy shows the handler
    thread in assignment(); a bare consumer with one thread in a consume(5000, 0.2) loop and one
    calling assignment() does the same with confluent-kafka 2.16.1 / librdkafka 2.16.0).
    So: scrape; if no answer within 2 s, `unblock()` makes the next write fail, and the pipeline
    thread waits out its retry backoff outside consume(), when the scrape completes. Last
    resort, a graceful stop (the scrape may then lose the race with the HTTP server's close)."""
    got: dict[str, Metrics | None] = {}
    thread = threading.Thread(
        target=lambda: got.update(m=collector_metrics(collector, timeout_s)), daemon=True
    )
    thread.start()
    thread.join(2.0)
    if thread.is_alive():
        log("collector /metrics hangs (its consumer is in consume()): failing its next write")
        unblock()
        thread.join(15.0)
    if thread.is_alive():
        log("collector /metrics still hangs: stopping the collector")
        collector.stop()
        thread.join(timeout_s)
    return got.get("m")


def write_failure(
    kafka: KafkaServer, influx: Influx, topic: str, db: str, key: bytes, value: bytes
) -> Callable[[], None]:
    """Drop the collector's database (its counts are taken already), then give it one more
    record: InfluxDB answers 404, which the collector retries after a backoff."""

    def unblock() -> None:
        influx.drop_database(db)
        produce_all(kafka.bootstrap, topic, [key], [value])

    return unblock


def servers_idle(
    kafka: KafkaServer, influx: InfluxServer, args: argparse.Namespace
) -> dict[str, float]:
    """What Kafka and InfluxDB use with no client at all, over 5 s: the floor under the CPU
    figures of each phase."""
    wait_quiet(args.quiet_cores, args.quiet_max_s)
    before = {"kafka": cpu_s(kafka.pid), "influxd": cpu_s(influx.pid)}
    time.sleep(5.0)
    after = {"kafka": cpu_s(kafka.pid), "influxd": cpu_s(influx.pid)}
    return {f"{k}_cores": ((after[k] or 0) - (v or 0)) / 5.0 for k, v in before.items()}
