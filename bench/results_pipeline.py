#!/usr/bin/env python3
"""The results pipeline on this machine: collector throughput (and Telegraf's, side by side),
latency from a record's creation to its point being queryable, and the node's journal cost.

Phases (``--phases``; the first four by default, in this order):

- ``journal``: the node's outbox. ResultsService + Journal (SQLite WAL) in a temporary
  directory: build and append ``--journal-records`` loss records, then ``flush()``; split into
  building the records (a journal that drops them) and committing them (pre-built entries);
  the shipped journal (synchronous=FULL) against the same journal with synchronous=NORMAL;
  fsyncs per commit from one run under strace, when strace is installed.
- ``throughput``: one Kafka and one InfluxDB for the run. Each round pre-fills a fresh topic
  with ``--records`` records (per block: per node and session one LossRecord (2 points) and one
  DelayRecord (3 points); per node and flow one FlowBlockRecord (1 point)), starts a collector
  on it and times until InfluxDB holds every point; then the same points as line protocol (one
  Kafka message per record) through Telegraf into its own database. A B per round, fresh
  topics, databases and consumer groups each time.
- ``latency``: a collector running and caught up; records produced at ``--latency-rate`` for
  ``--latency-seconds`` with created_unix_ns = now; a sample of them is polled in InfluxDB until
  its point is visible. Also the collector's own ``srv6pm_collector_record_age_seconds``.
- ``breakdown``: where a collector's time goes, one stage at a time in this process: protobuf
  parse, line formatting, the HTTP write (influxdb-client, InfluxDB's own time included), Kafka
  consume and offset commit.
- ``profile`` (not run unless named): one more collector ingest with py-spy sampling the real
  process (``pip install py-spy``); its pipeline thread's samples per stage. Not a figure: the
  sampling itself takes CPU from the machine.

Needs ``make servers`` (Kafka, InfluxDB) and ``bash bench/install-telegraf.sh``. Prints progress
on stderr and the tables on stdout; everything goes to bench/results/results-pipeline-<time>.json.
Method and results: docs/BENCHMARKS.md, "Results pipeline".
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Producer
from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation
from influxdb_client import __version__ as influxdb_client_version
from machine import machine  # bench/machine.py, beside this script
from prometheus_client.parser import text_string_to_metric_families
from srv6pm.collector.adapters.influx import InfluxSink
from srv6pm.collector.adapters.kafka import RecordSource
from srv6pm.collector.domain import points
from srv6pm.lab.servers import (
    INFLUXDB_VERSION,
    CollectorProcess,
    InfluxServer,
    KafkaServer,
    _Server,  # Telegraf is run like our servers: own session, stopped by its PID only
    cache_dir,
)
from srv6pm.node_manager.adapters import records
from srv6pm.node_manager.adapters.journal import Entry, Journal, Kind
from srv6pm.node_manager.domain.blocks import FlowBlock
from srv6pm.node_manager.domain.model import MonitoredFlow, Role, SenderSession
from srv6pm.node_manager.service.results import ResultsService
from srv6pm.proto.v1 import records_pb2 as pb
from srv6pm.twamp.results import DelayBlock, DelayStats, DirectionLoss, LossResult

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
TELEGRAF_VERSION = "1.39.3"  # bench/install-telegraf.sh
PARTITIONS = 3  # as srv6pm.lab.pipeline's records topic
RETENTION_POLICY, RETENTION = "thirty_days", "30d"  # as srv6pm.lab.pipeline's database
PERIOD_NS = 10_000_000_000  # the node manager's default block
BATCH_RECORDS = 5000  # the collector's default batch_size, used by the breakdown as well
CLK_TCK = os.sysconf("SC_CLK_TCK")
SINGLE_COMMITS = 200
MARK_BEGIN, MARK_END = "fsyncs-counted-from-here", "fsyncs-counted-to-here"

# The node manager's publisher (node_manager/adapters/kafka.py): the records on the topic are
# batched and compressed as a node sends them, and the collector pays for decompressing them.
NODE_PRODUCER = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 40_000,
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BenchError(RuntimeError):
    pass


def raise_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so every server's context manager stops it."""

    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


# ---- records like a node's ---------------------------------------------------------------------


@dataclass(frozen=True)
class Mix:
    """What the nodes measure: per node, `sessions` STAMP sessions (a loss and a delay record per
    block each) and `flows` monitored flows (a flow-block record per block each)."""

    nodes: int
    sessions: int
    flows: int

    @property
    def records_per_block(self) -> int:
        return self.nodes * (2 * self.sessions + self.flows)


@dataclass(frozen=True)
class Sample:
    """Where the first point of one record lands: enough to ask InfluxDB whether it is there."""

    measurement: str
    tags: tuple[tuple[str, str], ...]
    time_ns: int

    def statement(self) -> str:
        where = " AND ".join(f"\"{k}\"='{v}'" for k, v in self.tags)
        return (
            f'SELECT count("block") FROM "{self.measurement}" '
            f"WHERE {where} AND time = {self.time_ns}"
        )


@dataclass
class Generated:
    record: pb.MeasurementRecord
    key: str
    sample: Sample


class Node:
    """One node's sessions and flows, labelled as the node manager labels them."""

    ROLES = (Role.INGRESS, Role.TRANSIT, Role.EGRESS)

    def __init__(self, index: int, mix: Mix, seed: int) -> None:
        self.name = f"r{index + 1:02d}"
        self.rng = random.Random(seed * 1000 + index)
        self.journal_id = 0
        peer = f"r{(index + 1) % mix.nodes + 1:02d}"
        self.sessions = [
            SenderSession(
                name=f"sess-{j:03d}",
                ssid=j + 1,
                reflector_address=f"fc00:0:{index + 2:x}:{j:x}::1",
                forward_flow=f"flow-{2 * j:03d}",
                reverse_flow=f"flow-{2 * j + 1:03d}",
                direct_segments=(f"fc00:0:{index + 2:x}::e", f"fc00:0:{index + 3:x}::d6"),
                return_segments=(f"fc00:0:{index + 1:x}::d6",),
                policy=f"policy-{self.name}-{j:03d}",
                reflector_node=peer,
            )
            for j in range(mix.sessions)
        ]
        self.labels = [records.labels(s) for s in self.sessions]
        role = self.ROLES[index % 3]
        self.flows = [
            MonitoredFlow(
                name=f"flow-{k:03d}",
                segments=(f"fc00:0:{k % 250 + 2:x}::e", f"fc00:0:{k % 250 + 3:x}::d6"),
                role=role,
                interfaces=("eth1",),
                flowmon_id=k + 1,
            )
            for k in range(mix.flows)
        ]

    def _wrap(self, **kind: Any) -> pb.MeasurementRecord:
        self.journal_id += 1
        return pb.MeasurementRecord(
            node=self.name, created_unix_ns=time.time_ns(), journal_id=self.journal_id, **kind
        )

    def _stats(self, base_ns: int) -> DelayStats:
        d = sorted(base_ns + self.rng.randrange(0, 400_000) for _ in range(10))
        return DelayStats(10, d[0], d[4], d[8], d[9], d[9], sum(d) // 10, 35_000)

    def block(self, block: int) -> Iterator[Generated]:
        """This node's records of one block, in the order a node journals them: flow counts at
        the block snapshot, then each session's loss and delay."""
        start = block * PERIOD_NS
        for flow in self.flows:
            packets = self.rng.randrange(80_000, 120_000)
            fb = FlowBlock(flow.name, block, packets, packets * 700)
            record = self._wrap(flow_block=records.flow_block(fb, flow, PERIOD_NS))
            role = records.ROLE_TO_PB[flow.role]
            tags = (("node", self.name), ("flow", flow.name), ("role", points.ROLES[role]))
            yield Generated(record, f"{self.name}/{flow.name}", Sample("flow", tags, start))
        for spec, labels in zip(self.sessions, self.labels, strict=True):
            key = f"{self.name}/{spec.name}"
            tags = (("src_node", self.name), ("session", spec.name))
            if self.rng.random() < 0.01:  # now and then a block the node could not read
                loss = LossResult(spec.name, block, None, None, False, "no counters for block")
            else:
                tx = self.rng.randrange(9_000, 11_000)
                fwd = DirectionLoss(tx, tx - self.rng.choice((0, 0, 0, 1, 5)))
                rev = DirectionLoss(tx, tx - self.rng.choice((0, 0, 0, 2)))
                loss = LossResult(spec.name, block, fwd, rev, True)
            record = self._wrap(loss=records.loss(loss, labels, PERIOD_NS))
            yield Generated(record, key, Sample("loss", (*tags, ("direction", "forward")), start))
            two_way = self._stats(200_000)
            delay = DelayBlock(
                spec.name, block, 10, 0, two_way, self._stats(90_000), self._stats(90_000)
            )
            record = self._wrap(delay=records.delay(delay, labels, PERIOD_NS))
            yield Generated(record, key, Sample("delay", (*tags, ("direction", "two_way")), start))


def generate(mix: Mix, first_block: int, seed: int) -> Iterator[Generated]:
    """Records block after block, every node's for each block (what the nodes publish)."""
    nodes = [Node(i, mix, seed) for i in range(mix.nodes)]
    block = first_block
    while True:
        for node in nodes:
            yield from node.block(block)
        block += 1


@dataclass
class Workload:
    """Pre-built Kafka messages: the records (for our collector) and the same points as line
    protocol, one message per record (for Telegraf)."""

    keys: list[bytes]
    values: list[bytes]
    lines: list[bytes]
    expected: dict[str, int]  # points per measurement
    blocks: int

    @property
    def points(self) -> int:
        return sum(self.expected.values())


def build_workload(n: int, mix: Mix, seed: int) -> Workload:
    blocks = math.ceil(n / mix.records_per_block)
    # Blocks in the recent past, well inside the 30-day retention.
    first = time.time_ns() // PERIOD_NS - blocks - 10
    keys, values, lines = [], [], []
    expected = {"loss": 0, "delay": 0, "flow": 0}
    for g in generate(mix, first, seed):
        if len(values) == n:
            break
        record_lines = points.lines(g.record)  # also checks each record converts
        expected[g.sample.measurement] += len(record_lines)
        keys.append(g.key.encode())
        values.append(g.record.SerializeToString())
        lines.append("\n".join(record_lines).encode())
    return Workload(keys, values, lines, expected, blocks)


# ---- process and machine readings --------------------------------------------------------------


def cpu_s(pid: int | None) -> float | None:
    """utime + stime of a process, all its threads (None: gone)."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_times() -> tuple[float, float]:
    """(busy, total) jiffies of all cores (/proc/stat); idle and iowait count as not busy."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])  # guest time is already in user
    return total - values[3] - values[4], total


def busy_cores(before: tuple[float, float], after: tuple[float, float]) -> float:
    busy, total = after[0] - before[0], after[1] - before[1]
    return (os.cpu_count() or 1) * busy / total if total else 0.0


def wait_quiet(limit_cores: float, max_s: float) -> float:
    """Wait (at most max_s) until the machine uses under limit_cores over 0.5 s; what it used
    last. The machine is shared: past max_s the round runs anyway, and the figure is kept."""
    deadline = time.monotonic() + max_s
    while True:
        before = machine_times()
        time.sleep(0.5)
        used = busy_cores(before, machine_times())
        if used < limit_cores or time.monotonic() > deadline:
            return used


def load_average() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def summary(values: Iterable[float | None]) -> dict[str, float] | None:
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def percentile(values: list[float], q: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# ---- InfluxDB ----------------------------------------------------------------------------------


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

    def statements(self, statements: list[str], db: str) -> list[dict[str, Any]]:
        """The results of several statements in one request, in order."""
        body = urllib.parse.urlencode({"q": ";".join(statements), "db": db})
        results: list[dict[str, Any]] = json.loads(self._request("POST", "/query", body))["results"]
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
            out[name] = int(series[0]["values"][0][1]) if series else 0
        return out

    def create_database(self, db: str) -> None:
        self.server.create_database(db, RETENTION_POLICY, RETENTION)

    def drop_database(self, db: str) -> None:
        self.statements([f'DROP DATABASE "{db}"'], db)


# ---- Kafka -------------------------------------------------------------------------------------


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


# ---- the collectors under test -----------------------------------------------------------------


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
    kafka: KafkaServer, influx: InfluxServer, topic: str, group: str, db: str, args: Any
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


def collector_metrics(collector: CollectorProcess, timeout_s: float) -> dict[str, Any] | None:
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
    out: dict[str, Any] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "le")
            name = s.name + (f"{{{labels}}}" if labels else "")
            if s.name.endswith("_bucket"):
                out.setdefault(name, {})[s.labels["le"]] = s.value
            else:
                out[name] = s.value
    return out


def final_metrics(
    collector: CollectorProcess, timeout_s: float, unblock: Callable[[], None]
) -> dict[str, Any] | None:
    """The collector's /metrics once its work is done. A scrape can hang for as long as the
    collector's pipeline thread keeps calling consume(): the lag gauge (RecordSource.lag) calls
    Consumer.assignment(), which waits until no consume() is running (py-spy shows the handler
    thread in assignment(); a bare consumer with one thread in a consume(5000, 0.2) loop and one
    calling assignment() does the same with confluent-kafka 2.16.1 / librdkafka 2.16.0).
    So: scrape; if no answer within 2 s, `unblock()` makes the next write fail, and the pipeline
    thread waits out its retry backoff outside consume(), when the scrape completes. Last
    resort, a graceful stop (the scrape may then lose the race with the HTTP server's close)."""
    got: dict[str, dict[str, Any] | None] = {}
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


def servers_idle(kafka: KafkaServer, influx: InfluxServer, args: Any) -> dict[str, Any]:
    """What Kafka and InfluxDB use with no client at all, over 5 s: the floor under the CPU
    figures of each phase."""
    wait_quiet(args.quiet_cores, args.quiet_max_s)
    before = {"kafka": cpu_s(kafka.pid), "influxd": cpu_s(influx.pid)}
    time.sleep(5.0)
    after = {"kafka": cpu_s(kafka.pid), "influxd": cpu_s(influx.pid)}
    return {f"{k}_cores": ((after[k] or 0) - (v or 0)) / 5.0 for k, v in before.items()}


# ---- throughput ---------------------------------------------------------------------------------


@dataclass
class IngestWatch:
    """Samples InfluxDB's written-points counter from t0 on; at the first point and when
    `expected` points are in, reads the CPU time of the processes in `pids`."""

    influx: Influx
    expected: int
    pids: dict[str, Callable[[], int | None]]
    interval_s: float
    timeout_s: float
    base: int = 0
    t0: float = 0.0
    first: tuple[float, int] | None = None  # (s after t0, points then)
    done_s: float | None = None
    cpu_first: dict[str, float | None] = field(default_factory=dict)
    cpu_done: dict[str, float | None] = field(default_factory=dict)
    machine_done: tuple[float, float] | None = None
    polls: int = 0
    error: BaseException | None = None

    def cpu(self) -> dict[str, float | None]:
        return {name: cpu_s(pid()) for name, pid in self.pids.items()}

    def run(self) -> None:
        try:
            while time.monotonic() - self.t0 < self.timeout_s:
                n = self.influx.points_written() - self.base
                now = time.monotonic() - self.t0
                self.polls += 1
                if self.first is None and n > 0:
                    self.first, self.cpu_first = (now, n), self.cpu()
                if n >= self.expected:
                    self.done_s, self.cpu_done = now, self.cpu()
                    self.machine_done = machine_times()
                    return
                time.sleep(self.interval_s)
        except BaseException as e:  # the main thread reports it
            self.error = e


def ingest(
    label: str,
    make: Callable[[], _Server],
    kafka: KafkaServer,
    influx_server: InfluxServer,
    influx: Influx,
    db: str,
    expected: dict[str, int],
    args: Any,
    unblock: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Start the collector under test on a pre-filled topic and time it until InfluxDB holds
    every point; CPU of it, influxd and Kafka over the same time. `unblock`: final_metrics."""
    total = sum(expected.values())
    quiet = wait_quiet(args.quiet_cores, args.quiet_max_s)
    server = make()
    pids = {
        "under_test": lambda: server.pid,
        "influxd": lambda: influx_server.pid,
        "kafka": lambda: kafka.pid,
        "this_script": os.getpid,  # its polling of InfluxDB runs on the same 2 cores
    }
    watch = IngestWatch(influx, total, pids, args.poll_s, args.ingest_timeout_s)
    cpu0 = {name: cpu_s(pid()) for name, pid in pids.items()} | {"under_test": 0.0}
    http0 = influx.http_stats()
    watch.base = http0.get("pointsWrittenOK", 0)
    machine0 = machine_times()
    watch.t0 = time.monotonic()
    thread = threading.Thread(target=watch.run, name="watch", daemon=True)
    thread.start()
    result: dict[str, Any] = {"collector": label, "machine_busy_cores_before": round(quiet, 2)}
    with server:
        result["serving_s"] = server.last_start_s
        thread.join(args.ingest_timeout_s + 5)
        if watch.error is not None:
            raise watch.error
        # Exact equality per measurement, by InfluxQL; the HTTP counter only said "enough".
        counted, count_s = influx.counts(db), time.monotonic() - watch.t0
        deadline = time.monotonic() + 30
        while counted != expected and time.monotonic() < deadline:
            time.sleep(0.2)
            counted, count_s = influx.counts(db), time.monotonic() - watch.t0
        time.sleep(1.0)  # anything written after "done" (duplicates) shows in the counter
        http1 = influx.http_stats()
        extra = http1.get("pointsWrittenOK", 0) - watch.base - total
        result["influx_http"] = {
            k: http1.get(k, 0) - http0.get(k, 0) for k in ("writeReq", "writeReqBytes")
        }
        if isinstance(server, CollectorProcess):
            metrics = final_metrics(server, args.scrape_timeout_s, unblock) or {}
            prefixes = ("points", "records_total", "write_errors")
            result["collector_metrics"] = {
                k: v
                for k, v in metrics.items()
                if k.startswith(tuple(f"srv6pm_collector_{p}" for p in prefixes))
            }
        if isinstance(server, TelegrafProcess):
            result["telegraf_errors"] = server.errors()[:10]
    if watch.done_s is None or counted != expected:
        raise BenchError(
            f"{label}: not every point in InfluxDB after {args.ingest_timeout_s} s: "
            f"counted {counted}, expected {expected}"
        )
    done = watch.done_s
    # Duplicates would make the counter reach the total before every distinct point was in:
    # then only the InfluxQL count's time holds.
    if extra > 0:
        done = max(done, count_s)
    first_s, first_n = watch.first or (done, 0)
    cpu = {name: (watch.cpu_done.get(name) or 0.0) - (cpu0[name] or 0.0) for name in pids}
    steady_cpu = {
        name: (watch.cpu_done.get(name) or 0.0) - (watch.cpu_first.get(name) or 0.0)
        for name in pids
    }
    result |= {
        "points": total,
        "counted": counted,
        "extra_points_written": extra,
        "done_s": done,
        "first_point_s": first_s,
        "points_per_s": total / done,
        "steady_points_per_s": (total - first_n) / (done - first_s) if done > first_s else None,
        "cpu_s": cpu,
        "cpu_s_after_first_point": steady_cpu,
        "cpu_us_per_point": {k: v / total * 1e6 for k, v in cpu.items()},
        "machine_busy_cores": busy_cores(machine0, watch.machine_done or machine_times()),
        "polls": watch.polls,
    }
    return result


def throughput(
    kafka: KafkaServer, influx_server: InfluxServer, workload: Workload, work: Path, args: Any
) -> list[dict[str, Any]]:
    influx = Influx(influx_server)
    rounds = []
    for r in range(args.rounds):
        for which in ("collector", "telegraf"):
            if which not in args.collectors:
                continue
            tag = f"r{r}-{which}-{os.getpid()}"
            topic, db, group = f"bench.{tag}", f"bench_{tag.replace('-', '_')}", f"bench-{tag}"
            kafka.create_topic(topic, PARTITIONS)
            if which == "collector":
                kafka.create_topic(f"{topic}.dlq", 1)
            influx.create_database(db)
            payload = workload.values if which == "collector" else workload.lines
            began = time.monotonic()
            produce_all(kafka.bootstrap, topic, workload.keys, payload)
            on_topic = messages_in(kafka, topic)
            if on_topic != len(payload):
                raise BenchError(f"{topic} holds {on_topic} messages, not {len(payload)}")
            log(
                f"round {r} {which}: {topic} pre-filled with {on_topic} messages "
                f"({sum(map(len, payload)) / 1e6:.1f} MB) in {time.monotonic() - began:.1f} s"
            )
            if which == "collector":

                def make(topic: str = topic, db: str = db, group: str = group) -> _Server:
                    settings = collector_settings(
                        kafka, influx_server, topic, group, db, args.collector_setting
                    )
                    return CollectorProcess(work / f"collector-{topic}", settings)

            else:

                def make(topic: str = topic, db: str = db, group: str = group) -> _Server:
                    config = telegraf_config(kafka, influx_server, topic, group, db, args)
                    return TelegrafProcess(work / f"telegraf-{topic}", config)

            try:
                # Only the collector's /metrics needs it (Telegraf's topic holds lines).
                unblock = write_failure(
                    kafka, influx, topic, db, workload.keys[0], workload.values[0]
                )
                result = ingest(
                    which, make, kafka, influx_server, influx, db, workload.expected, args, unblock
                )
            finally:
                influx.drop_database(db)
                delete_topics(kafka, [topic] + ([f"{topic}.dlq"] if which == "collector" else []))
            result["round"] = r
            rounds.append(result)
            c = result["cpu_s"]
            log(
                f"round {r} {which}: {result['points']} points in {result['done_s']:.2f} s = "
                f"{result['points_per_s']:,.0f} points/s (first point at "
                f"{result['first_point_s']:.2f} s, then {result['steady_points_per_s'] or 0:,.0f}"
                f"/s); CPU s: {which} {c['under_test']:.2f}, influxd {c['influxd']:.2f}, "
                f"kafka {c['kafka']:.2f}; machine {result['machine_busy_cores']:.2f} cores busy"
            )
    return rounds


def throughput_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for which in ("collector", "telegraf"):
        rs = [r for r in rounds if r["collector"] == which]
        if not rs:
            continue
        out[which] = {
            "points_per_s": summary(r["points_per_s"] for r in rs),
            "steady_points_per_s": summary(r["steady_points_per_s"] for r in rs),
            "done_s": summary(r["done_s"] for r in rs),
            "first_point_s": summary(r["first_point_s"] for r in rs),
            "machine_busy_cores": summary(r["machine_busy_cores"] for r in rs),
            **{
                f"cpu_s_{name}": summary(r["cpu_s"][name] for r in rs)
                for name in ("under_test", "influxd", "kafka", "this_script")
            },
            **{
                f"cpu_us_per_point_{name}": summary(r["cpu_us_per_point"][name] for r in rs)
                for name in ("under_test", "influxd", "kafka")
            },
        }
    return out


# ---- latency ------------------------------------------------------------------------------------


@dataclass
class Pending:
    sample: Sample
    created_ns: int
    last_miss_ns: int  # when a query last did not find it (the lower bound of its visibility)


class VisibilityPoller:
    """Asks InfluxDB, in one request per cycle, whether each pending sample's point is there."""

    def __init__(self, influx: Influx, db: str, interval_s: float) -> None:
        self.influx, self.db, self.interval_s = influx, db, interval_s
        self.pending: list[Pending] = []
        self.lock = threading.Lock()
        self.seen: list[dict[str, int]] = []
        self.cycle_s: list[float] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="visibility", daemon=True)

    def add(self, sample: Sample, created_ns: int) -> None:
        with self.lock:
            self.pending.append(Pending(sample, created_ns, created_ns))

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                with self.lock:
                    batch = list(self.pending)
                if not batch:
                    time.sleep(self.interval_s)
                    continue
                sent = time.time_ns()
                results = self.influx.statements([p.sample.statement() for p in batch], self.db)
                received = time.time_ns()
                self.cycle_s.append((received - sent) / 1e9)
                found = []
                for p, r in zip(batch, results, strict=True):
                    if r.get("series"):
                        found.append(p)
                        self.seen.append(
                            {
                                "created_ns": p.created_ns,
                                "upper_ns": received - p.created_ns,
                                "lower_ns": max(0, p.last_miss_ns - p.created_ns),
                            }
                        )
                    else:
                        p.last_miss_ns = sent
                with self.lock:
                    self.pending = [p for p in self.pending if p not in found]
                time.sleep(self.interval_s)
        except BaseException as e:
            self.error = e


def produce_paced(
    producer: Producer,
    topic: str,
    stream: Iterator[Generated],
    rate: float,
    seconds: float,
    on_sample: Callable[[Sample, int], None] | None,
    sample_every: int,
    stamp: bool = True,
) -> dict[str, Any]:
    """`rate` records/s on an absolute schedule (a few records every ~2 ms), each stamped with
    created_unix_ns just before it is handed to the producer (0 without `stamp`: the collector
    then leaves the record out of its age histogram)."""
    total = round(rate * seconds)
    errors: list[str] = []

    def delivered(error: confluent_kafka.KafkaError | None, _: object) -> None:
        if error is not None:
            errors.append(str(error))

    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            g = next(stream)
            now = time.time_ns()
            g.record.created_unix_ns = now if stamp else 0
            producer.produce(topic, g.record.SerializeToString(), g.key, on_delivery=delivered)
            if on_sample is not None and sent % sample_every == 0:
                on_sample(g.sample, now)
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    elapsed = time.monotonic() - start
    producer.flush(30)
    if errors:
        raise BenchError(f"producing to {topic}: {errors[:3]}")
    return {"records": sent, "seconds": elapsed, "rate": sent / elapsed}


def histogram_quantile(buckets: dict[str, float], q: float) -> str:
    """The upper bound of the bucket that holds quantile q (what a histogram can tell)."""
    ordered = sorted(buckets.items(), key=lambda kv: float(kv[0]))
    total = ordered[-1][1] if ordered else 0
    for le, count in ordered:
        if total and count >= q * total:
            return f"<= {le} s"
    return "n/a"


def latency(
    kafka: KafkaServer, influx_server: InfluxServer, mix: Mix, work: Path, args: Any
) -> dict[str, Any]:
    influx = Influx(influx_server)
    tag = f"latency-{os.getpid()}"
    topic, db = f"bench.{tag}", f"bench_{tag.replace('-', '_')}"
    kafka.create_topic(topic, PARTITIONS)
    kafka.create_topic(f"{topic}.dlq", 1)
    influx.create_database(db)
    warm_n = round(args.latency_rate * args.latency_warmup_s)
    run_n = round(args.latency_rate * args.latency_seconds)
    blocks = math.ceil((warm_n + run_n) / mix.records_per_block)
    stream_all = generate(mix, time.time_ns() // PERIOD_NS - blocks - 10, args.seed + 1)
    # Built before the run (only the creation time is set when each is sent): this process then
    # does little more than a node's publisher while the latency is measured.
    built = [next(stream_all) for _ in range(warm_n + run_n)]
    warm_points = sum(len(points.lines(g.record)) for g in built[:warm_n])
    stream = iter(built)
    settings = collector_settings(
        kafka, influx_server, topic, f"bench-{tag}", db, args.collector_setting
    )
    collector = CollectorProcess(work / f"collector-{topic}", settings)
    poller = VisibilityPoller(influx, db, args.poll_s)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, **NODE_PRODUCER})
    out: dict[str, Any] = {"rate": args.latency_rate, "seconds": args.latency_seconds}
    try:
        with collector:
            deadline = time.monotonic() + 30
            while len(json.loads(collector.get("/healthz")[1]).get("partitions", [])) < PARTITIONS:
                if time.monotonic() > deadline:
                    raise BenchError("the collector was not assigned every partition in 30 s")
                time.sleep(0.1)
            # Warm-up: connections made, first batches written; then wait until caught up.
            produce_paced(
                producer, topic, stream, args.latency_rate, args.latency_warmup_s, None, 1, False
            )
            deadline = time.monotonic() + 30
            while sum(influx.counts(db).values()) < warm_points:
                if time.monotonic() > deadline:
                    raise BenchError("the collector did not catch up after the warm-up")
                time.sleep(0.1)
            cpu0 = {
                "collector": cpu_s(collector.pid),
                "influxd": cpu_s(influx_server.pid),
                "kafka": cpu_s(kafka.pid),
            }
            machine0 = machine_times()
            poller.thread.start()
            sample_every = max(1, round(args.latency_rate * args.latency_sample_s))
            produced = produce_paced(
                producer,
                topic,
                stream,
                args.latency_rate,
                args.latency_seconds,
                poller.add,
                sample_every,
            )
            cpu1 = {
                "collector": cpu_s(collector.pid),
                "influxd": cpu_s(influx_server.pid),
                "kafka": cpu_s(kafka.pid),
            }
            machine1 = machine_times()
            deadline = time.monotonic() + 30
            while poller.pending and time.monotonic() < deadline and poller.error is None:
                time.sleep(0.1)
            poller.stop.set()
            poller.thread.join(10)
            if poller.error is not None:
                raise poller.error
            time.sleep(1.0)
            unblock = write_failure(
                kafka, influx, topic, db, built[0].key.encode(), built[0].record.SerializeToString()
            )
            after = final_metrics(collector, args.scrape_timeout_s, unblock)
    finally:
        poller.stop.set()
        influx.drop_database(db)
        delete_topics(kafka, [topic, f"{topic}.dlq"])
    # The warm-up's records have no creation time: the collector left them out of the
    # histogram, which holds the measured records only.
    buckets = (after or {}).get("srv6pm_collector_record_age_seconds_bucket", {})
    upper = [s["upper_ns"] / 1e9 for s in poller.seen]
    lower = [s["lower_ns"] / 1e9 for s in poller.seen]
    out |= {
        "produced": produced,
        "samples": len(poller.seen) + len(poller.pending),
        "samples_seen": len(poller.seen),
        "samples_never_seen": len(poller.pending),
        "visible_s": {
            "p50": percentile(upper, 50),
            "p90": percentile(upper, 90),
            "p99": percentile(upper, 99),
            "max": max(upper),
        }
        if upper
        else None,
        "visible_lower_bound_s": {"p50": percentile(lower, 50), "p99": percentile(lower, 99)}
        if lower
        else None,
        "poll_cycle_s": summary(poller.cycle_s),
        "collector_record_age": {
            "buckets": buckets,
            "p50": histogram_quantile(buckets, 0.50),
            "p99": histogram_quantile(buckets, 0.99),
            "count": buckets.get("+Inf", 0),
            "scraped": after is not None,
        },
        "collector_batch_seconds": (after or {}).get("srv6pm_collector_batch_seconds_bucket"),
        "cpu_s": {k: (cpu1[k] or 0) - (v or 0) for k, v in cpu0.items()},
        "machine_busy_cores": busy_cores(machine0, machine1),
        "seen": poller.seen,
    }
    return out


# ---- breakdown: a collector's work, one stage at a time -----------------------------------------


def breakdown(
    kafka: KafkaServer, influx_server: InfluxServer, workload: Workload, args: Any
) -> dict[str, Any]:
    """The collector's steps on the workload, each timed alone in this one thread: what a
    single-threaded collector could reach if nothing else ran, and which step dominates."""
    influx = Influx(influx_server)
    n = len(workload.values)
    out: dict[str, Any] = {"records": n, "points": workload.points}
    tag = f"breakdown-{os.getpid()}"
    topic, db = f"bench.{tag}", f"bench_{tag.replace('-', '_')}"
    kafka.create_topic(topic, PARTITIONS)
    influx.create_database(db)
    try:
        produce_all(kafka.bootstrap, topic, workload.keys, workload.values)
        wait_quiet(args.quiet_cores, args.quiet_max_s)
        # Kafka: consume batches of 5000 and commit each, as RecordSource does for the collector.
        source = RecordSource(kafka.bootstrap, topic, f"bench-{tag}")
        got: list[Any] = []
        consume_s = commit_s = 0.0
        commits = 0
        # Joining the group and the first fetch: counted apart, as the collector's start.
        t = time.perf_counter()
        batch = []
        while not batch and time.perf_counter() - t < 60:
            batch = source.poll(BATCH_RECORDS, 0.2)
        group_s = time.perf_counter() - t
        first_batch = len(batch)  # its consume time is in group_s, not in consume_s
        deadline = time.monotonic() + 120
        while batch or (len(got) < n and time.monotonic() < deadline):
            if batch:
                t = time.perf_counter()
                source.commit(batch)
                commit_s += time.perf_counter() - t
                commits += 1
                got.extend(batch)
            if len(got) >= n:
                break
            t = time.perf_counter()
            batch = source.poll(BATCH_RECORDS, 0.2)
            consume_s += time.perf_counter() - t
        source.close()
        if len(got) < n:
            raise BenchError(f"breakdown: consumed {len(got)} of {n} records")
        values = [m.value() for m in got]
        del got
        t = time.perf_counter()
        decoded = [points.decode(v) for v in values]
        decode_s = time.perf_counter() - t
        t = time.perf_counter()
        lines = [points.lines(r) for r in decoded]
        lines_s = time.perf_counter() - t
        sink = InfluxSink(influx_server.url, "", "-", f"{db}/{RETENTION_POLICY}", 30_000)
        cpu0 = cpu_s(influx_server.pid)
        join_s = write_s = 0.0
        for i in range(0, n, BATCH_RECORDS):
            t = time.perf_counter()
            batch_lines = [line for ls in lines[i : i + BATCH_RECORDS] for line in ls]
            join_s += time.perf_counter() - t
            t = time.perf_counter()
            sink.write(batch_lines)
            write_s += time.perf_counter() - t
        influxd_s = (cpu_s(influx_server.pid) or 0) - (cpu0 or 0)
        sink.close()
        counted = influx.counts(db)
        if counted != workload.expected:
            raise BenchError(f"breakdown: counted {counted}, expected {workload.expected}")
    finally:
        influx.drop_database(db)
        delete_topics(kafka, [topic])
    stages = {
        "kafka_consume": consume_s,
        "protobuf_parse": decode_s,
        "line_format": lines_s,
        "gather_lines": join_s,
        "influx_write_http": write_s,
        "kafka_commit": commit_s,
    }
    total = sum(stages.values())
    out |= {
        "stages_s": stages,
        "us_per_point": {k: v / workload.points * 1e6 for k, v in stages.items()},
        "total_s": total,
        "single_thread_points_per_s": workload.points / total,
        "influxd_cpu_s_during_writes": influxd_s,
        "group_join_and_first_fetch_s": group_s,
        "first_batch_records": first_batch,
        "commits": commits,
    }
    return out


def py_spy_profile(
    kafka: KafkaServer, influx_server: InfluxServer, workload: Workload, work: Path, args: Any
) -> dict[str, Any]:
    """One extra ingest (not a figure) with py-spy sampling the collector's every thread,
    summarised by the collector's own functions and by leaf functions."""
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        return {"skipped": "py-spy is not installed (pip install py-spy)"}
    influx = Influx(influx_server)
    tag = f"profile-{os.getpid()}"
    topic, db = f"bench.{tag}", f"bench_{tag.replace('-', '_')}"
    kafka.create_topic(topic, PARTITIONS)
    kafka.create_topic(f"{topic}.dlq", 1)
    influx.create_database(db)
    raw = work / "py-spy.txt"
    try:
        produce_all(kafka.bootstrap, topic, workload.keys, workload.values)
        settings = collector_settings(
            kafka, influx_server, topic, f"bench-{tag}", db, args.collector_setting
        )
        collector = CollectorProcess(work / f"collector-{topic}", settings)
        with collector:
            spy = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(collector.pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--output",
                    str(raw),
                    "--nonblocking",
                    "--threads",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                deadline = time.monotonic() + args.ingest_timeout_s
                while influx.counts(db) != workload.expected and time.monotonic() < deadline:
                    time.sleep(0.5)
            finally:
                spy.send_signal(signal.SIGINT)
                spy.wait(30)
    finally:
        influx.drop_database(db)
        delete_topics(kafka, [topic, f"{topic}.dlq"])
    return summarise_py_spy(raw)


# Frames read "function (path:line)"; the first of these marks found anywhere in a stack names
# its stage. The last two catch stacks py-spy could not walk up to the root.
PY_SPY_STAGES = (
    ("kafka_consume", "RecordSource.poll (collector/adapters/kafka.py"),
    ("protobuf_parse", "decode (collector/domain/points.py"),
    ("line_format", "lines (collector/domain/points.py"),
    ("influx_write", "InfluxSink.write (collector/adapters/influx.py"),
    ("kafka_commit", "RecordSource.commit (collector/adapters/kafka.py"),
    ("metrics", "(prometheus_client/"),
    ("write_other", "Pipeline._write (collector/service/pipeline.py"),
    ("line_format", "(collector/domain/points.py"),
)


def summarise_py_spy(raw: Path) -> dict[str, Any]:
    """Collapsed stacks ("thread;frame;...;frame count", root first) to samples per thread and,
    for the pipeline thread, the share of its samples in each stage. py-spy samples a thread
    only while it runs Python or holds the GIL; librdkafka's own threads are not seen."""
    if not raw.exists():
        return {"skipped": "py-spy wrote nothing"}
    threads: dict[str, int] = {}
    leaves: dict[str, int] = {}
    stages: dict[str, int] = {}
    pipeline_total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")
        threads[frames[0]] = threads.get(frames[0], 0) + count
        if "pipeline" not in frames[0]:
            continue
        pipeline_total += count
        leaves[frames[-1]] = leaves.get(frames[-1], 0) + count
        stage = next(
            (name for name, mark in PY_SPY_STAGES if any(mark in f for f in frames)), "other"
        )
        stages[stage] = stages.get(stage, 0) + count
    top = sorted(leaves.items(), key=lambda kv: -kv[1])[:15]
    share = {k: v / pipeline_total for k, v in sorted(stages.items(), key=lambda kv: -kv[1])}
    return {
        "samples_per_thread": threads,
        "pipeline_samples": pipeline_total,
        "pipeline_share": share if pipeline_total else {},
        "pipeline_top_leaves": [[k, v / pipeline_total] for k, v in top] if pipeline_total else [],
        "raw": str(raw),
    }


# ---- journal -----------------------------------------------------------------------------------


class CountingJournal(Journal):
    """The node's Journal; counts the writer thread's commits and the time spent in them, and
    optionally runs SQLite with another `synchronous` setting (the shipped one is FULL)."""

    def __init__(self, path: Path, synchronous: str = "FULL") -> None:
        self.synchronous = synchronous
        self.commits = 0
        self.commit_s = 0.0
        self.batch_sizes: list[int] = []
        super().__init__(path, retention_s=7 * 24 * 3600, max_bytes=1 << 30)

    def _connect(self) -> Any:
        db = super()._connect()
        if self.synchronous != "FULL":
            db.execute(f"PRAGMA synchronous={self.synchronous}")
        return db

    def _commit(self, db: Any, items: Any) -> bool:
        t = time.perf_counter()
        ok = super()._commit(db, items)
        self.commit_s += time.perf_counter() - t
        self.commits += 1
        self.batch_sizes.append(len(items))
        return ok


class DroppingJournal:
    """Takes entries and keeps nothing: what building the records alone costs."""

    def append(self, entries: Iterable[Entry]) -> None:
        for _ in entries:
            pass


def loss_results(n: int, sessions: int) -> list[tuple[int, LossResult]]:
    """n loss results of `sessions` sessions, block after block (built before any timing)."""
    rng = random.Random(7)
    first = time.time_ns() // PERIOD_NS - n // sessions - 10
    out = []
    for i in range(n):
        s, block = i % sessions, first + i // sessions
        tx = rng.randrange(9_000, 11_000)
        result = LossResult(
            f"sess-{s:03d}", block, DirectionLoss(tx, tx - 1), DirectionLoss(tx, tx), True
        )
        out.append((s, result))
    return out


def session_specs(sessions: int) -> list[SenderSession]:
    return [
        SenderSession(
            name=f"sess-{j:03d}",
            ssid=j + 1,
            reflector_address=f"fc00:0:2:{j:x}::1",
            forward_flow=f"flow-{2 * j:03d}",
            reverse_flow=f"flow-{2 * j + 1:03d}",
            direct_segments=("fc00:0:2::e", "fc00:0:3::d6"),
            return_segments=("fc00:0:1::d6",),
            policy=f"policy-{j:03d}",
            reflector_node="r02",
        )
        for j in range(sessions)
    ]


def journal_once(
    directory: Path, synchronous: str, results: list[tuple[int, LossResult]], sessions: int
) -> dict[str, Any]:
    """Three timings on fresh journals in `directory`: building only, journaling pre-built
    entries, and the node's path (build + append, then flush)."""
    n = len(results)
    specs = session_specs(sessions)
    out: dict[str, Any] = {"synchronous": synchronous, "records": n}

    dropping = ResultsService(DroppingJournal(), "r01", PERIOD_NS)  # type: ignore[arg-type]
    sinks = [dropping.session(s) for s in specs]
    t = time.perf_counter()
    for s, r in results:
        sinks[s].add_loss(r)
    out["build_s"] = time.perf_counter() - t

    # The same records as entries, built beforehand: the journal's own cost.
    labels = [records.labels(spec) for spec in specs]
    entries = []
    for s, r in results:
        record = pb.MeasurementRecord(
            node="r01", created_unix_ns=time.time_ns(), loss=records.loss(r, labels[s], PERIOD_NS)
        )
        entries.append(
            Entry(Kind.LOSS, r.session, r.block, record.created_unix_ns, record.SerializeToString())
        )
    journal = CountingJournal(directory / f"entries-{synchronous}.db", synchronous)
    t = time.perf_counter()
    for e in entries:
        journal.append([e])
    appended = time.perf_counter() - t
    if not journal.flush(600):
        raise BenchError("journal flush timed out")
    out["entries"] = {
        "append_s": appended,
        "total_s": time.perf_counter() - t,
        "commit_s": journal.commit_s,
        "commits": journal.commits,
        "mean_batch": n / journal.commits if journal.commits else None,
        "dropped": journal.stats.dropped,
    }
    journal.close()

    journal = CountingJournal(directory / f"node-{synchronous}.db", synchronous)
    service = ResultsService(journal, "r01", PERIOD_NS)
    sinks = [service.session(s) for s in specs]
    t = time.perf_counter()
    for s, r in results:
        sinks[s].add_loss(r)
    appended = time.perf_counter() - t
    t2 = time.perf_counter()
    if not journal.flush(600):
        raise BenchError("journal flush timed out")
    flushed = time.perf_counter() - t2
    out["node"] = {
        "build_and_append_s": appended,
        "flush_s": flushed,
        "total_s": appended + flushed,
        "commit_s": journal.commit_s,
        "commits": journal.commits,
        "mean_batch": n / journal.commits if journal.commits else None,
        "dropped": journal.stats.dropped,
        "appended": journal.stats.appended,
    }
    # A node at rest journals a few records at a time, so each commit (and its fsync) carries
    # one or a few: what a commit costs then, one record per commit.
    waits = []
    for e in entries[:SINGLE_COMMITS]:
        t = time.perf_counter()
        journal.append([e])
        journal.flush(60)
        waits.append(time.perf_counter() - t)
    out["single"] = {
        "commits": len(waits),
        "p50_ms": percentile(waits, 50) * 1e3,
        "p99_ms": percentile(waits, 99) * 1e3,
    }
    journal.close()
    return out


def count_fsyncs(directory: Path, n: int, sessions: int) -> dict[str, Any]:
    """The node's path once under strace: fsync/fdatasync calls per file, per writer commit."""
    strace = shutil.which("strace")
    if strace is None:
        return {"skipped": "strace is not installed"}
    trace = directory / "strace.txt"
    child = subprocess.run(
        [
            strace,
            "-f",
            "-qq",
            "-y",
            "-e",
            "trace=fsync,fdatasync,sync_file_range",
            "-o",
            str(trace),
            sys.executable,
            __file__,
            "--journal-child",
            str(n),
            "--journal-sessions",
            str(sessions),
            "--journal-dir",
            str(directory),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        return {"skipped": f"strace run failed: {child.stderr[-500:]}"}
    info = json.loads(child.stdout.strip().splitlines()[-1])
    per_file: dict[str, int] = {}
    counting = False
    for line in trace.read_text().splitlines():
        if "sync" not in line or "<" not in line:
            continue
        name = Path(line.split("<", 1)[1].split(">", 1)[0]).name
        if name in (MARK_BEGIN, MARK_END):
            counting = name == MARK_BEGIN
        elif counting:
            per_file[name] = per_file.get(name, 0) + 1
    total = sum(per_file.values())
    return {
        "records": n,
        "commits": info["commits"],
        "fsyncs": per_file,
        "fsyncs_per_commit": total / info["commits"] if info["commits"] else None,
        "note": "under strace: system calls are slower, so commits are larger than without it",
    }


def _mark(path: Path) -> None:
    """An fsync of a file of this name: where the counted part of the strace output begins
    and ends (creating the schema, switching to WAL and closing fsync too)."""
    with path.open("wb") as f:
        os.fsync(f.fileno())


def journal_child(n: int, sessions: int, directory: Path) -> None:
    results = loss_results(n, sessions)
    journal = CountingJournal(directory / "traced.db", "FULL")
    service = ResultsService(journal, "r01", PERIOD_NS)
    sinks = [service.session(s) for s in session_specs(sessions)]
    _mark(directory / MARK_BEGIN)
    for s, r in results:
        sinks[s].add_loss(r)
    journal.flush(600)
    _mark(directory / MARK_END)
    journal.close()
    print(json.dumps({"commits": journal.commits, "batch_sizes": journal.batch_sizes}))


def journal_phase(args: Any) -> dict[str, Any]:
    results = loss_results(args.journal_records, args.journal_sessions)
    parent = Path(args.journal_dir) if args.journal_dir else None
    runs = []
    with tempfile.TemporaryDirectory(prefix="srv6pm-bench-journal-", dir=parent) as tmp:
        directory = Path(tmp)
        # Untimed, so the first timed variant does not pay for warming up the code paths.
        journal_once(directory, "FULL", results[: len(results) // 10], args.journal_sessions)
        for r in range(args.journal_rounds):
            for synchronous in ("FULL", "NORMAL"):
                wait_quiet(args.quiet_cores, args.quiet_max_s)
                sub = directory / f"{r}-{synchronous}"
                sub.mkdir()
                run = journal_once(sub, synchronous, results, args.journal_sessions)
                run["round"] = r
                runs.append(run)
                node = run["node"]
                per = 1e6 / len(results)
                log(
                    f"journal {synchronous} round {r}: build {run['build_s'] * per:.1f} us/record;"
                    f" entries only {run['entries']['total_s'] * per:.1f} us/record"
                    f" ({run['entries']['commits']} commits); node path "
                    f"{len(results) / node['total_s']:,.0f} records/s ({node['commits']} commits)"
                )
                shutil.rmtree(sub)
        fsyncs = count_fsyncs(directory, min(args.journal_records, 20_000), args.journal_sessions)
    filesystem = subprocess.run(
        ["df", "-T", str(parent or tempfile.gettempdir())],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()[-1:]
    return {
        "runs": runs,
        "fsyncs": fsyncs,
        "filesystem": filesystem,
        "summary": journal_summary(runs),
    }


def journal_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for synchronous in ("FULL", "NORMAL"):
        rs = [r for r in runs if r["synchronous"] == synchronous]
        if not rs:
            continue
        n = rs[0]["records"]
        out[synchronous] = {
            "build_us_per_record": summary(r["build_s"] / n * 1e6 for r in rs),
            "entries_us_per_record": summary(r["entries"]["total_s"] / n * 1e6 for r in rs),
            "entries_commit_us_per_record": summary(r["entries"]["commit_s"] / n * 1e6 for r in rs),
            "entries_commits": summary(r["entries"]["commits"] for r in rs),
            "node_records_per_s": summary(n / r["node"]["total_s"] for r in rs),
            "node_us_per_record": summary(r["node"]["total_s"] / n * 1e6 for r in rs),
            "node_flush_s": summary(r["node"]["flush_s"] for r in rs),
            "node_commits": summary(r["node"]["commits"] for r in rs),
            "node_commit_us_per_record": summary(r["node"]["commit_s"] / n * 1e6 for r in rs),
            "single_commit_p50_ms": summary(r["single"]["p50_ms"] for r in rs),
            "single_commit_p99_ms": summary(r["single"]["p99_ms"] for r in rs),
        }
    return out


# ---- report ------------------------------------------------------------------------------------


def fmt(s: dict[str, float] | None, scale: float = 1.0, digits: int = 0) -> str:
    if s is None:
        return "-"
    f = f"{{:,.{digits}f}}"
    median, low, high = (f.format(s[k] * scale) for k in ("median", "min", "max"))
    return f"{median} ({low}-{high})"


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def report(result: dict[str, Any]) -> None:
    """The figures as Markdown tables: median (min-max) over rounds."""
    if "journal" in result:
        print("\nJournal, per record")
        table(
            [
                "synchronous",
                "build us",
                "entries only us",
                "of which commit us",
                "node path records/s",
                "node path us",
                "commits",
                "1-record commit p50 / p99 ms",
            ],
            [
                [
                    sync,
                    fmt(s["build_us_per_record"], digits=1),
                    fmt(s["entries_us_per_record"], digits=1),
                    fmt(s["entries_commit_us_per_record"], digits=1),
                    fmt(s["node_records_per_s"]),
                    fmt(s["node_us_per_record"], digits=1),
                    fmt(s["node_commits"]),
                    f"{fmt(s['single_commit_p50_ms'], digits=2)} / "
                    f"{fmt(s['single_commit_p99_ms'], digits=2)}",
                ]
                for sync, s in result["journal"]["summary"].items()
            ],
        )
        print(f"fsyncs: {json.dumps(result['journal']['fsyncs'])}")
    if "throughput" in result:
        print("\nThroughput")
        table(
            [
                "collector",
                "points/s from start",
                "points/s after first point",
                "done s",
                "CPU s under test",
                "CPU s influxd",
                "CPU s Kafka",
                "machine busy cores",
            ],
            [
                [
                    which,
                    fmt(s["points_per_s"]),
                    fmt(s["steady_points_per_s"]),
                    fmt(s["done_s"], digits=2),
                    fmt(s["cpu_s_under_test"], digits=2),
                    fmt(s["cpu_s_influxd"], digits=2),
                    fmt(s["cpu_s_kafka"], digits=2),
                    fmt(s["machine_busy_cores"], digits=2),
                ]
                for which, s in result["throughput"]["summary"].items()
            ],
        )
    if "latency" in result:
        lat = result["latency"]
        vis = lat["visible_s"] or {}
        age = lat["collector_record_age"]
        print(
            f"\nLatency: {lat['produced']['rate']:,.0f} records/s for "
            f"{lat['produced']['seconds']:.1f} s, {lat['samples_seen']} of {lat['samples']} "
            "samples seen; creation to visible p50/p90/p99/max "
            + "/".join(f"{vis[k]:.3f}" for k in ("p50", "p90", "p99", "max") if k in vis)
            + f" s; collector record age p50 {age['p50']}, p99 {age['p99']}"
        )
    if "breakdown" in result:
        b = result["breakdown"]
        print(
            "\nBreakdown (one thread, us per point): "
            + ", ".join(f"{k} {v:.2f}" for k, v in b["us_per_point"].items())
            + f"; single thread {b['single_thread_points_per_s']:,.0f} points/s"
        )
    if "profile" in result and "pipeline_share" in result["profile"]:
        print(
            "\npy-spy, pipeline thread: "
            + ", ".join(f"{k} {v:.0%}" for k, v in result["profile"]["pipeline_share"].items())
        )


def environment() -> dict[str, Any]:
    return {
        **machine(),
        "protobuf": f"{protobuf_version} ({api_implementation.Type()})",
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "influxdb_client": influxdb_client_version,
        "influxdb": INFLUXDB_VERSION,
        "kafka": os.environ.get("KAFKA_VERSION") or "4.4.0",
        "telegraf": TELEGRAF_VERSION,
        "load_average": load_average(),
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--phases",
        nargs="+",
        default=["journal", "throughput", "latency", "breakdown"],
        choices=["journal", "throughput", "latency", "breakdown", "profile"],
        help="what to run ('profile': one extra ingest with py-spy on the collector)",
    )
    p.add_argument("--records", type=int, default=200_000, help="records per throughput round")
    p.add_argument(
        "--rounds", type=int, default=3, help="throughput rounds (collector, then Telegraf)"
    )
    p.add_argument(
        "--collectors",
        nargs="+",
        default=["collector", "telegraf"],
        choices=["collector", "telegraf"],
    )
    p.add_argument("--nodes", type=int, default=10, help="nodes the records come from")
    p.add_argument("--sessions", type=int, default=50, help="STAMP sessions per node")
    p.add_argument("--flows", type=int, default=100, help="monitored flows per node")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--collector-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a collector setting (e.g. batch_size=10000); the shipped defaults otherwise",
    )
    p.add_argument("--telegraf-max-undelivered", type=int, default=10_000)
    p.add_argument("--telegraf-flush-interval", default="200ms")
    p.add_argument("--telegraf-content-encoding", default="identity", choices=["identity", "gzip"])
    p.add_argument("--poll-s", type=float, default=0.02, help="InfluxDB polling interval")
    p.add_argument(
        "--scrape-timeout-s", type=float, default=60, help="how long to wait for /metrics"
    )
    p.add_argument("--ingest-timeout-s", type=float, default=300)
    p.add_argument(
        "--quiet-cores",
        type=float,
        default=0.3,
        help="before each measurement, wait until the machine uses less than this...",
    )
    p.add_argument("--quiet-max-s", type=float, default=20, help="... but no longer than this")
    p.add_argument("--latency-rate", type=float, default=2000, help="records/s")
    p.add_argument("--latency-seconds", type=float, default=20)
    p.add_argument("--latency-warmup-s", type=float, default=2)
    p.add_argument(
        "--latency-sample-s", type=float, default=0.05, help="one sampled record per this time"
    )
    p.add_argument("--journal-records", type=int, default=100_000)
    p.add_argument("--journal-sessions", type=int, default=50)
    p.add_argument("--journal-rounds", type=int, default=3)
    p.add_argument(
        "--journal-dir",
        default=None,
        help="where the journals go (a temporary directory under it; default: the system's)",
    )
    p.add_argument("--journal-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--workdir", default=None, help="servers' directory (default: a temporary one)")
    p.add_argument("--out", default=None, help="JSON file (default: bench/results/...)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.journal_child is not None:
        journal_child(args.journal_child, args.journal_sessions, Path(args.journal_dir))
        return 0
    raise_on_sigterm()
    started = time.strftime("%Y%m%d-%H%M%S")
    out_path = Path(args.out) if args.out else RESULTS / f"results-pipeline-{started}.json"
    mix = Mix(args.nodes, args.sessions, args.flows)
    result: dict[str, Any] = {
        "started": started,
        "settings": {k: v for k, v in vars(args).items() if k != "journal_child"},
        "mix": {
            "nodes": mix.nodes,
            "sessions_per_node": mix.sessions,
            "flows_per_node": mix.flows,
            "records_per_block": mix.records_per_block,
            "period_s": PERIOD_NS / 1e9,
        },
        "environment": environment(),
    }
    wall = time.monotonic()
    if "journal" in args.phases:
        log(f"journal: {args.journal_records} loss records, {args.journal_rounds} rounds")
        result["journal"] = journal_phase(args)
    servers = {"throughput", "latency", "breakdown", "profile"} & set(args.phases)
    if servers:
        if "telegraf" in args.collectors and "throughput" in args.phases:
            telegraf_binary()
        began = time.monotonic()
        workload = build_workload(args.records, mix, args.seed)
        result["workload"] = {
            "records": len(workload.values),
            "points": workload.points,
            "points_per_measurement": workload.expected,
            "blocks": workload.blocks,
            "record_bytes_mean": sum(map(len, workload.values)) / len(workload.values),
            "line_message_bytes_mean": sum(map(len, workload.lines)) / len(workload.lines),
            "build_s": time.monotonic() - began,
        }
        log(f"workload: {json.dumps(result['workload'])}")
        with contextlib.ExitStack() as stack:
            work = Path(
                args.workdir
                or stack.enter_context(tempfile.TemporaryDirectory(prefix="srv6pm-bench-rp-"))
            )
            kafka = stack.enter_context(KafkaServer(work / "kafka"))
            influx = stack.enter_context(InfluxServer(work / "influxdb"))
            log(f"Kafka {kafka.bootstrap} pid {kafka.pid}, InfluxDB {influx.url} pid {influx.pid}")
            result["servers_idle"] = servers_idle(kafka, influx, args)
            log(f"servers idle: {json.dumps(result['servers_idle'])}")
            if "throughput" in args.phases:
                rounds = throughput(kafka, influx, workload, work, args)
                result["throughput"] = {"rounds": rounds, "summary": throughput_summary(rounds)}
            if "latency" in args.phases:
                log(f"latency: {args.latency_rate:.0f} records/s for {args.latency_seconds} s")
                result["latency"] = latency(kafka, influx, mix, work, args)
            if "breakdown" in args.phases:
                log("breakdown: the collector's stages one at a time")
                result["breakdown"] = breakdown(kafka, influx, workload, args)
            if "profile" in args.phases:
                log("profile: py-spy on one more collector ingest")
                result["profile"] = py_spy_profile(kafka, influx, workload, work, args)
    result["wall_s"] = time.monotonic() - wall
    result["environment"]["load_average_end"] = load_average()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1, default=str))
    report(result)
    log(f"written {out_path} ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
