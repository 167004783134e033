"""Breakdown phase: a collector's stages one at a time in this process, and (profile) py-spy on
a real collector process."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TypedDict, final

from confluent_kafka import Message
from srv6pm.collector.adapters.influx import InfluxSink
from srv6pm.collector.adapters.kafka import RecordSource
from srv6pm.collector.domain import points
from srv6pm.lab.servers import (
    CollectorProcess,
    InfluxServer,
    KafkaServer,
)

from bench.harness.meters import process_cpu_s as cpu_s
from bench.harness.meters import wait_quiet
from bench.harness.run import BenchError
from bench.pipeline.common import (
    BATCH_RECORDS,
    PARTITIONS,
    RETENTION_POLICY,
)
from bench.pipeline.servers import Influx, collector_settings, delete_topics, produce_all
from bench.pipeline.workload import Workload


class Breakdown(TypedDict):
    """A collector's stages, each timed alone in one thread."""

    records: int
    points: int
    stages_s: dict[str, float]
    us_per_point: dict[str, float]
    total_s: float
    single_thread_points_per_s: float
    influxd_cpu_s_during_writes: float
    group_join_and_first_fetch_s: float
    first_batch_records: int
    commits: int


@final  # no other keys: "pipeline_share" in a result tells a Profile from it
class Skipped(TypedDict):
    skipped: str  # why


@final
class Profile(TypedDict):
    """py-spy's samples of a collector: per thread, and the pipeline thread's by stage."""

    samples_per_thread: dict[str, int]
    pipeline_samples: int
    pipeline_share: dict[str, float]
    pipeline_top_leaves: list[list[str | float]]  # [function, share]
    raw: str  # py-spy's output


def breakdown(
    kafka: KafkaServer, influx_server: InfluxServer, workload: Workload, args: argparse.Namespace
) -> Breakdown:
    """The collector's steps on the workload, each timed alone in this one thread: what a
    single-threaded collector could reach if nothing else ran, and which step dominates."""
    influx = Influx(influx_server)
    n = len(workload.values)
    tag = f"breakdown-{os.getpid()}"
    topic, db = f"bench.{tag}", f"bench_{tag.replace('-', '_')}"
    kafka.create_topic(topic, PARTITIONS)
    influx.create_database(db)
    try:
        produce_all(kafka.bootstrap, topic, workload.keys, workload.values)
        wait_quiet(args.quiet_cores, args.quiet_max_s)
        # Kafka: consume batches of 5000 and commit each, as RecordSource does for the collector.
        source = RecordSource(kafka.bootstrap, topic, f"bench-{tag}")
        got: list[Message] = []
        consume_s = commit_s = 0.0
        commits = 0
        # Joining the group and the first fetch: counted apart, as the collector's start.
        t = time.perf_counter()
        batch: list[Message] = []
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
    return {
        "records": n,
        "points": workload.points,
        "stages_s": stages,
        "us_per_point": {k: v / workload.points * 1e6 for k, v in stages.items()},
        "total_s": total,
        "single_thread_points_per_s": workload.points / total,
        "influxd_cpu_s_during_writes": influxd_s,
        "group_join_and_first_fetch_s": group_s,
        "first_batch_records": first_batch,
        "commits": commits,
    }


def py_spy_profile(
    kafka: KafkaServer,
    influx_server: InfluxServer,
    workload: Workload,
    work: Path,
    args: argparse.Namespace,
) -> Profile | Skipped:
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


def summarise_py_spy(raw: Path) -> Profile | Skipped:
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
