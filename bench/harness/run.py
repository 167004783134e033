"""A benchmark run: errors meant for the user, commands, progress lines, signals, root, the run
id, and ``execute``, the main of every benchmark (results file, report, exit status)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from bench.harness import provenance
from bench.harness.pinning import pin_self

RESULTS = Path(__file__).resolve().parents[1] / "results"


class BenchError(Exception):
    """A failure with a message meant for the user."""


def run(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a command, raise BenchError with its stderr if it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
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

    def __post_init__(self) -> None:
        self.run_id = self.run_id or new_run_id(self.bench)
        self.started = self.started or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.t0

    def header(self) -> dict[str, Any]:
        """The fields every results file starts with."""
        return {"run_id": self.run_id, "script": self.script, "started_utc": self.started}


def write_results(
    run: Run, result: dict[str, Any], out: Path, indent: int = 2, file: Path | None = None
) -> Path:
    """``result`` as ``out/<run id>.json`` (or ``file``), with the run's header first."""
    path = file or out / f"{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {**run.header(), **result}
    path.write_text(json.dumps(document, indent=indent, default=str) + "\n")
    return path


def default_report(result: dict[str, Any]) -> None:
    """The result's Markdown table and its warnings on stdout."""
    if result.get("table"):
        print(f"\n{result['table']}\n")
    for w in result.get("warnings", []):
        print(f"WARNING: {w}")


def execute(
    run: Run,
    measure: Callable[[Run], dict[str, Any]],
    *,
    out: Path = RESULTS,
    file: Path | None = None,
    needs_root: str | None = None,
    pin: int | None = None,
    errors: tuple[type[BaseException], ...] = (),
    environment: Callable[[], dict[str, Any]] = provenance.machine,
    report: Callable[[dict[str, Any]], None] = default_report,
    indent: int = 2,
) -> int:
    """The main of a benchmark: refuse to run without root when ``needs_root`` says why, tear
    down on signals, pin this process (and all it starts) to ``pin``, measure, then write the
    results file and print the report and the run id. Exceptions of ``errors`` (and BenchError)
    are reported in one line and exit with 1."""
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
    result.setdefault("environment", environment())
    result["wall_s"] = run.wall_s
    path = write_results(run, result, out, indent, file)
    report(result)
    print(f"run id {run.run_id}; results: {path}; wall time {result['wall_s']:.0f} s")
    return 0
