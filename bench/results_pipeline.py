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

Needs ``make servers`` (Kafka, InfluxDB) and ``bash bench/install-telegraf.sh``. Run it with
``python3 -m bench.results_pipeline`` or ``python3 bench/results_pipeline.py`` (``--quick`` for a
smoke run). Prints progress on stderr and the tables on stdout; everything goes to
bench/results/results-pipeline-<YYYYMMDD-HHMMSS>.json (the run id). The phases live in
bench/pipeline/. Method and results: docs/BENCHMARKS.md, "Results pipeline".
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/results_pipeline.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import json
import os
import tempfile
import time
from typing import NotRequired, TypedDict

import confluent_kafka
from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation
from influxdb_client import __version__ as influxdb_client_version
from srv6pm.lab.servers import INFLUXDB_VERSION, InfluxServer, KafkaServer

from bench.harness import provenance
from bench.harness.report import markdown_table
from bench.harness.report import summary_span as fmt
from bench.harness.run import Run, execute, log
from bench.pipeline.breakdown import Breakdown, Profile, Skipped, breakdown, py_spy_profile
from bench.pipeline.common import PERIOD_NS, TELEGRAF_VERSION
from bench.pipeline.journal import JournalPhase, journal_child, journal_phase
from bench.pipeline.latency import LatencyResult, latency
from bench.pipeline.servers import servers_idle, telegraf_binary
from bench.pipeline.throughput import Round, ThroughputSummary, throughput, throughput_summary
from bench.pipeline.workload import Mix, build_workload


class MixInfo(TypedDict):
    nodes: int
    sessions_per_node: int
    flows_per_node: int
    records_per_block: int
    period_s: float


class WorkloadInfo(TypedDict):
    records: int
    points: int
    points_per_measurement: dict[str, int]
    blocks: int
    record_bytes_mean: float
    line_message_bytes_mean: float
    build_s: float


class Throughput(TypedDict):
    rounds: list[Round]
    summary: dict[str, ThroughputSummary]  # per collector


class PipelineResult(TypedDict):
    """The phases asked for, each under its name."""

    started: str
    settings: dict[str, object]  # the arguments
    mix: MixInfo
    environment: dict[str, object]
    journal: NotRequired[JournalPhase]
    workload: NotRequired[WorkloadInfo]
    servers_idle: NotRequired[dict[str, float]]  # cores busy with no client
    throughput: NotRequired[Throughput]
    latency: NotRequired[LatencyResult]
    breakdown: NotRequired[Breakdown]
    profile: NotRequired[Profile | Skipped]


def table(header: list[str], rows: list[list[str]]) -> None:
    print(markdown_table(header, rows))


def report(result: PipelineResult) -> None:
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
        vis = lat["visible_s"]
        age = lat["collector_record_age"]
        print(
            f"\nLatency: {lat['produced']['rate']:,.0f} records/s for "
            f"{lat['produced']['seconds']:.1f} s, {lat['samples_seen']} of {lat['samples']} "
            "samples seen; creation to visible p50/p90/p99/max "
            + "/".join(
                f"{v:.3f}"
                for v in ((vis["p50"], vis["p90"], vis["p99"], vis["max"]) if vis else ())
            )
            + f" s; collector record age p50 {age['p50']}, p99 {age['p99']}"
        )
    if "breakdown" in result:
        b = result["breakdown"]
        print(
            "\nBreakdown (one thread, us per point): "
            + ", ".join(f"{k} {v:.2f}" for k, v in b["us_per_point"].items())
            + f"; single thread {b['single_thread_points_per_s']:,.0f} points/s"
        )
    profile = result.get("profile")
    if profile is not None and "pipeline_share" in profile:
        print(
            "\npy-spy, pipeline thread: "
            + ", ".join(f"{k} {v:.0%}" for k, v in profile["pipeline_share"].items())
        )


def environment() -> dict[str, object]:
    return {
        **provenance.machine(),
        "protobuf": f"{protobuf_version} ({api_implementation.Type()})",
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "influxdb_client": influxdb_client_version,
        "influxdb": INFLUXDB_VERSION,
        "kafka": os.environ.get("KAFKA_VERSION") or "4.4.0",
        "telegraf": TELEGRAF_VERSION,
        "load_average": provenance.load_average(),
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
    p.add_argument("--out", default=None, help="JSON file (default: bench/results/<run id>.json)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (about 1 min): 2,000 journal records in 1 round, 5,000 records in 1"
        " throughput round, 3 s of latency at 500 records/s; figures meaningless",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.journal_records, args.journal_rounds, args.records, args.rounds = 2000, 1, 5000, 1
        args.latency_rate, args.latency_seconds, args.latency_warmup_s = 500, 3, 1
        args.quiet_max_s = 2
    return args


def measure(args: argparse.Namespace, run: Run) -> PipelineResult:
    """The phases asked for, servers started once for all that need them."""
    mix = Mix(args.nodes, args.sessions, args.flows)
    result: PipelineResult = {
        "started": run.run_id.removeprefix(f"{run.bench}-"),
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
    result["environment"]["load_average_end"] = provenance.load_average()
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.journal_child is not None:
        journal_child(args.journal_child, args.journal_sessions, Path(args.journal_dir))
        return 0
    run = Run("results-pipeline", "bench/results_pipeline.py")

    def report_and_log(result: PipelineResult) -> None:
        report(result)
        log(f"written {run.run_id} ({run.measured_s:.0f} s)")

    return execute(
        run,
        lambda r: measure(args, r),
        file=Path(args.out) if args.out else None,
        report=report_and_log,
        indent=1,
    )


if __name__ == "__main__":
    sys.exit(main())
