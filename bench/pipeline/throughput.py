"""Throughput phase: a pre-filled topic, a collector started on it, timed until InfluxDB holds
every point; ours and Telegraf alternated round by round."""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from srv6pm.lab.servers import (
    CollectorProcess,
    InfluxServer,
    KafkaServer,
    _Server,  # Telegraf is run like our servers: own session, stopped by its PID only
)

from bench.harness.meters import busy_cores, machine_times, wait_quiet
from bench.harness.meters import process_cpu_s as cpu_s
from bench.harness.run import BenchError, log
from bench.harness.stats import Summary, summary
from bench.pipeline.common import (
    PARTITIONS,
)
from bench.pipeline.servers import (
    Influx,
    Metrics,
    TelegrafProcess,
    collector_settings,
    delete_topics,
    final_metrics,
    messages_in,
    produce_all,
    telegraf_config,
    write_failure,
)
from bench.pipeline.workload import Workload


class CollectorOutput(TypedDict, total=False):
    collector_metrics: Metrics  # ours: its points, records and write errors counters
    telegraf_errors: list[str]  # Telegraf: its first error lines


class Ingest(TypedDict):
    """One collector's round: time until InfluxDB held every point, and CPU over it."""

    collector: str
    machine_busy_cores_before: float
    serving_s: float | None
    influx_http: dict[str, int]
    collector_metrics: NotRequired[Metrics]
    telegraf_errors: NotRequired[list[str]]
    points: int
    counted: dict[str, int]  # per measurement, by InfluxQL
    extra_points_written: int
    done_s: float
    first_point_s: float
    points_per_s: float
    steady_points_per_s: float | None
    cpu_s: dict[str, float]
    cpu_s_after_first_point: dict[str, float]
    cpu_us_per_point: dict[str, float]
    machine_busy_cores: float
    polls: int


class Round(Ingest):
    round: int


class ThroughputSummary(TypedDict):
    """One collector over the rounds."""

    points_per_s: Summary | None
    steady_points_per_s: Summary | None
    done_s: Summary | None
    first_point_s: Summary | None
    machine_busy_cores: Summary | None
    cpu_s_under_test: Summary | None
    cpu_s_influxd: Summary | None
    cpu_s_kafka: Summary | None
    cpu_s_this_script: Summary | None
    cpu_us_per_point_under_test: Summary | None
    cpu_us_per_point_influxd: Summary | None
    cpu_us_per_point_kafka: Summary | None


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
    args: argparse.Namespace,
    unblock: Callable[[], None] = lambda: None,
) -> Ingest:
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
    output: CollectorOutput = {}
    with server:
        serving_s = server.last_start_s
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
        influx_http = {k: http1.get(k, 0) - http0.get(k, 0) for k in ("writeReq", "writeReqBytes")}
        if isinstance(server, CollectorProcess):
            metrics = final_metrics(server, args.scrape_timeout_s, unblock) or {}
            prefixes = ("points", "records_total", "write_errors")
            output["collector_metrics"] = {
                k: v
                for k, v in metrics.items()
                if k.startswith(tuple(f"srv6pm_collector_{p}" for p in prefixes))
            }
        if isinstance(server, TelegrafProcess):
            output["telegraf_errors"] = server.errors()[:10]
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
    return {
        "collector": label,
        "machine_busy_cores_before": round(quiet, 2),
        "serving_s": serving_s,
        "influx_http": influx_http,
        **output,
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


def throughput(
    kafka: KafkaServer,
    influx_server: InfluxServer,
    workload: Workload,
    work: Path,
    args: argparse.Namespace,
) -> list[Round]:
    influx = Influx(influx_server)
    rounds: list[Round] = []
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
            rounds.append({**result, "round": r})
            c = result["cpu_s"]
            log(
                f"round {r} {which}: {result['points']} points in {result['done_s']:.2f} s = "
                f"{result['points_per_s']:,.0f} points/s (first point at "
                f"{result['first_point_s']:.2f} s, then {result['steady_points_per_s'] or 0:,.0f}"
                f"/s); CPU s: {which} {c['under_test']:.2f}, influxd {c['influxd']:.2f}, "
                f"kafka {c['kafka']:.2f}; machine {result['machine_busy_cores']:.2f} cores busy"
            )
    return rounds


def throughput_summary(rounds: list[Round]) -> dict[str, ThroughputSummary]:
    out: dict[str, ThroughputSummary] = {}
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
            "cpu_s_under_test": summary(r["cpu_s"]["under_test"] for r in rs),
            "cpu_s_influxd": summary(r["cpu_s"]["influxd"] for r in rs),
            "cpu_s_kafka": summary(r["cpu_s"]["kafka"] for r in rs),
            "cpu_s_this_script": summary(r["cpu_s"]["this_script"] for r in rs),
            "cpu_us_per_point_under_test": summary(r["cpu_us_per_point"]["under_test"] for r in rs),
            "cpu_us_per_point_influxd": summary(r["cpu_us_per_point"]["influxd"] for r in rs),
            "cpu_us_per_point_kafka": summary(r["cpu_us_per_point"]["kafka"] for r in rs),
        }
    return out
