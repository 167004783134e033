"""Latency phase: records produced at a steady rate with their creation time; a sample of them
polled in InfluxDB until visible; the collector's own record-age histogram."""

from __future__ import annotations

import argparse
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import confluent_kafka
from confluent_kafka import Producer
from srv6pm.collector.domain import points
from srv6pm.lab.servers import (
    CollectorProcess,
    InfluxServer,
    KafkaServer,
)

from bench.harness.meters import busy_cores, machine_times
from bench.harness.meters import process_cpu_s as cpu_s
from bench.harness.run import BenchError
from bench.harness.stats import Summary, percentile, summary
from bench.pipeline.common import (
    NODE_PRODUCER,
    PARTITIONS,
    PERIOD_NS,
)
from bench.pipeline.servers import (
    Influx,
    collector_settings,
    delete_topics,
    final_metrics,
    histogram,
    write_failure,
)
from bench.pipeline.workload import Generated, Mix, Sample, generate


class Seen(TypedDict):
    """A sampled record once its point was found: visible within upper_ns of its creation,
    not before lower_ns."""

    created_ns: int
    upper_ns: int
    lower_ns: int


class Produced(TypedDict):
    records: int
    seconds: float
    rate: float  # records/s achieved


class Visible(TypedDict):
    p50: float
    p90: float
    p99: float
    max: float


class VisibleLowerBound(TypedDict):
    p50: float
    p99: float


class RecordAge(TypedDict):
    """The collector's record-age histogram."""

    buckets: dict[str, float]
    p50: str
    p99: str
    count: float
    scraped: bool


class LatencyResult(TypedDict):
    rate: float
    seconds: float
    produced: Produced
    samples: int
    samples_seen: int
    samples_never_seen: int
    visible_s: Visible | None
    visible_lower_bound_s: VisibleLowerBound | None
    poll_cycle_s: Summary | None
    collector_record_age: RecordAge
    collector_batch_seconds: dict[str, float] | None
    cpu_s: dict[str, float]
    machine_busy_cores: float
    seen: list[Seen]


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
        self.seen: list[Seen] = []
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
) -> Produced:
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
    kafka: KafkaServer, influx_server: InfluxServer, mix: Mix, work: Path, args: argparse.Namespace
) -> LatencyResult:
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
    buckets = histogram(after, "srv6pm_collector_record_age_seconds_bucket") or {}
    upper = [s["upper_ns"] / 1e9 for s in poller.seen]
    lower = [s["lower_ns"] / 1e9 for s in poller.seen]
    return {
        "rate": args.latency_rate,
        "seconds": args.latency_seconds,
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
        "collector_batch_seconds": histogram(after, "srv6pm_collector_batch_seconds_bucket"),
        "cpu_s": {k: (cpu1[k] or 0) - (v or 0) for k, v in cpu0.items()},
        "machine_busy_cores": busy_cores(machine0, machine1),
        "seen": poller.seen,
    }
