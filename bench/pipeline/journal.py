"""Journal phase: the node's outbox (ResultsService + Journal, SQLite WAL): building, committing,
the node's path, synchronous FULL against NORMAL, fsyncs per commit under strace."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NotRequired, TypedDict

from srv6pm.node_manager.adapters import records
from srv6pm.node_manager.adapters.journal import Entry, Journal, Kind
from srv6pm.node_manager.domain.model import SenderSession
from srv6pm.node_manager.service.results import ResultsService
from srv6pm.proto.v1 import records_pb2 as pb
from srv6pm.twamp.results import DirectionLoss, LossResult

from bench.harness.meters import wait_quiet
from bench.harness.run import BenchError, log
from bench.harness.stats import Summary, percentile, summary
from bench.pipeline.common import (
    PERIOD_NS,
    SINGLE_COMMITS,
)

SCRIPT = Path(__file__).resolve().parents[1] / "results_pipeline.py"  # --journal-child
MARK_BEGIN, MARK_END = "fsyncs-counted-from-here", "fsyncs-counted-to-here"


class EntriesTiming(TypedDict):
    """Pre-built entries appended to a journal: the journal's own cost."""

    append_s: float
    total_s: float
    commit_s: float
    commits: int
    mean_batch: float | None
    dropped: int


class NodeTiming(TypedDict):
    """The node's path: ResultsService builds and appends, then the journal is flushed."""

    build_and_append_s: float
    flush_s: float
    total_s: float
    commit_s: float
    commits: int
    mean_batch: float | None
    dropped: int
    appended: int


class SingleCommits(TypedDict):
    """One record per commit, as at rest."""

    commits: int
    p50_ms: float
    p99_ms: float


class JournalRun(TypedDict):
    synchronous: str
    records: int
    build_s: float
    entries: EntriesTiming
    node: NodeTiming
    single: SingleCommits
    round: NotRequired[int]  # a timed run's round (not the warm-up's)


class ChildInfo(TypedDict):
    """What --journal-child prints."""

    commits: int
    batch_sizes: list[int]


class Skipped(TypedDict):
    skipped: str  # why


class Fsyncs(TypedDict):
    records: int
    commits: int
    fsyncs: dict[str, int]  # per file
    fsyncs_per_commit: float | None
    note: str


class JournalSummary(TypedDict):
    """One `synchronous` setting over the rounds."""

    build_us_per_record: Summary | None
    entries_us_per_record: Summary | None
    entries_commit_us_per_record: Summary | None
    entries_commits: Summary | None
    node_records_per_s: Summary | None
    node_us_per_record: Summary | None
    node_flush_s: Summary | None
    node_commits: Summary | None
    node_commit_us_per_record: Summary | None
    single_commit_p50_ms: Summary | None
    single_commit_p99_ms: Summary | None


class JournalPhase(TypedDict):
    runs: list[JournalRun]
    fsyncs: Fsyncs | Skipped
    filesystem: list[str]  # df -T of the journals' directory
    summary: dict[str, JournalSummary]  # per `synchronous` setting


class CountingJournal(Journal):
    """The node's Journal; counts the writer thread's commits and the time spent in them, and
    optionally runs SQLite with another `synchronous` setting (the shipped one is FULL)."""

    def __init__(self, path: Path, synchronous: str = "FULL") -> None:
        self.synchronous = synchronous
        self.commits = 0
        self.commit_s = 0.0
        self.batch_sizes: list[int] = []
        super().__init__(path, retention_s=7 * 24 * 3600, max_bytes=1 << 30)

    def _connect(self) -> sqlite3.Connection:
        db = super()._connect()
        if self.synchronous != "FULL":
            db.execute(f"PRAGMA synchronous={self.synchronous}")
        return db

    def _commit(self, db: sqlite3.Connection, items: list[Entry | list[int]]) -> bool:
        t = time.perf_counter()
        ok = super()._commit(db, items)
        self.commit_s += time.perf_counter() - t
        self.commits += 1
        self.batch_sizes.append(len(items))
        return ok


class DroppingJournal(Journal):
    """Takes entries and keeps nothing: what building the records alone costs. There is no
    database behind it: append() is all it does."""

    def __init__(self) -> None:  # not Journal's, which opens the database and its writer
        pass

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
) -> JournalRun:
    """Three timings on fresh journals in `directory`: building only, journaling pre-built
    entries, and the node's path (build + append, then flush)."""
    n = len(results)
    specs = session_specs(sessions)

    dropping = ResultsService(DroppingJournal(), "r01", PERIOD_NS)
    sinks = [dropping.session(s) for s in specs]
    t = time.perf_counter()
    for s, r in results:
        sinks[s].add_loss(r)
    build_s = time.perf_counter() - t

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
    entries_timing: EntriesTiming = {
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
    node: NodeTiming = {
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
    single: SingleCommits = {
        "commits": len(waits),
        "p50_ms": percentile(waits, 50) * 1e3,
        "p99_ms": percentile(waits, 99) * 1e3,
    }
    journal.close()
    return {
        "synchronous": synchronous,
        "records": n,
        "build_s": build_s,
        "entries": entries_timing,
        "node": node,
        "single": single,
    }


def count_fsyncs(directory: Path, n: int, sessions: int) -> Fsyncs | Skipped:
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
            str(SCRIPT),
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
    info: ChildInfo = json.loads(child.stdout.strip().splitlines()[-1])
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
    info: ChildInfo = {"commits": journal.commits, "batch_sizes": journal.batch_sizes}
    print(json.dumps(info))


def journal_phase(args: argparse.Namespace) -> JournalPhase:
    results = loss_results(args.journal_records, args.journal_sessions)
    parent = Path(args.journal_dir) if args.journal_dir else None
    runs: list[JournalRun] = []
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


def journal_summary(runs: list[JournalRun]) -> dict[str, JournalSummary]:
    out: dict[str, JournalSummary] = {}
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
