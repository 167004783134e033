"""A benchmark run: errors meant for the user, commands, progress lines, signals, root, the run
id, and ``execute``, the main of every benchmark (results file, report, exit status)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, TypedDict, TypeVar

from bench.harness import provenance
from bench.harness.pinning import pin_self

RESULTS = Path(__file__).resolve().parents[1] / "results"

# What a benchmark's measure returns: its fields of the results file (a TypedDict of its own).
R = TypeVar("R", bound=Mapping[str, object])


class BenchError(Exception):
    """A failure with a message meant for the user."""


def run(argv: Sequence[str], *, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, raise BenchError with its stderr if it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if r.returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` failed: {r.stderr.strip()}")
    return r


def progress(message: str) -> None:
    """A progress line on stderr (stdout holds the report)."""
    print(message, file=sys.stderr, flush=True)


def log(message: str) -> None:
    """A progress line on stderr with the time of day."""
    progress(f"[{time.strftime('%H:%M:%S')}] {message}")


def raise_on_signal(signum: int, _frame: object) -> NoReturn:
    raise SystemExit(f"stopped by signal {signum}")


def handle_signals() -> None:
    """SIGTERM and SIGHUP unwind like an exception, so every lab, namespace and server is torn
    down; SIGINT too even in the background of a non-interactive shell (which ignores it)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_on_signal)


def new_run_id(bench: str) -> str:
    """``<bench>-YYYYMMDD-HHMMSS`` (local time), the name of the run's results file."""
    return f"{bench}-{time.strftime('%Y%m%d-%H%M%S')}"


@dataclass
class Run:
    """One run of a benchmark: its id, its script, when it started."""

    bench: str  # e.g. "stamp-reflector"
    script: str  # e.g. "bench/stamp_reflector.py"
    run_id: str = ""
    started: str = ""  # ISO 8601, UTC
    t0: float = field(default_factory=time.monotonic)
    # once the results are written: the file's fields after the header, and its wall_s
    document: dict[str, object] = field(default_factory=dict)
    measured_s: float = 0.0

    def __post_init__(self) -> None:
        self.run_id = self.run_id or new_run_id(self.bench)
        self.started = self.started or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.t0

    def header(self) -> Header:
        """The fields every results file starts with."""
        return {"run_id": self.run_id, "script": self.script, "started_utc": self.started}


class Header(TypedDict):
    run_id: str
    script: str
    started_utc: str


def write_results(
    run: Run, document: Mapping[str, object], out: Path, indent: int = 2, file: Path | None = None
) -> Path:
    """``document`` as ``out/<run id>.json`` (or ``file``), with the run's header first."""
    path = file or out / f"{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**run.header(), **document}, indent=indent, default=str) + "\n")
    return path


def default_report(result: Mapping[str, object]) -> None:
    """The result's Markdown table and its warnings on stdout."""
    if result.get("table"):
        print(f"\n{result['table']}\n")
    warnings = result.get("warnings", [])
    for w in warnings if isinstance(warnings, list) else []:
        print(f"WARNING: {w}")


def execute(
    run: Run,
    measure: Callable[[Run], R],
    *,
    out: Path = RESULTS,
    file: Path | None = None,
    needs_root: str | None = None,
    pin: int | None = None,
    errors: tuple[type[BaseException], ...] = (),
    environment: Callable[[], Mapping[str, object]] = provenance.machine,
    report: Callable[[R], None] = default_report,
    indent: int = 2,
) -> int:
    """The main of a benchmark: refuse to run without root when ``needs_root`` says why, tear
    down on signals, pin this process (and all it starts) to ``pin``, measure, then write the
    results file and print the report and the run id. Exceptions of ``errors`` (and BenchError)
    are reported in one line and exit with 1.

    The results file holds ``measure``'s result, then ``environment()`` unless the result has
    its own, then ``wall_s``: ``run.document`` once written (``wall_s`` also as
    ``run.measured_s``). ``report`` is given the result."""
    name = Path(run.script).name
    if needs_root and os.geteuid() != 0:
        print(f"{name} needs root ({needs_root})", file=sys.stderr)
        return 2
    handle_signals()
    if pin is not None:
        pin_self(pin)
    caught: tuple[type[BaseException], ...] = (BenchError, *errors)
    try:
        result = measure(run)
    except caught as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    run.document = dict(result)
    run.document.setdefault("environment", environment())
    run.measured_s = run.wall_s
    run.document["wall_s"] = run.measured_s
    path = write_results(run, run.document, out, indent, file)
    report(result)
    print(f"run id {run.run_id}; results: {path}; wall time {run.measured_s:.0f} s")
    return 0
