"""What every benchmark records about the machine and the code it ran: kernel, CPU, cores,
Python, git revision; the objects it loaded and the sources they came from (results of
different runs compare only when these do)."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path
from typing import TypedDict

ROOT = Path(__file__).resolve().parents[2]


def git(*args: str) -> str:
    """A git command in the repository; its output, empty when it fails."""
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return r.stdout.strip()


class Machine(TypedDict):
    kernel: str
    cpu: str
    cores: int | None
    python: str
    git: str  # git describe --always --dirty


def machine() -> Machine:
    """Kernel, CPU model, cores, Python, ``git describe --always --dirty``."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    return {
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "git": git("describe", "--always", "--dirty"),
    }


def sha256(path: Path) -> str | None:
    """The file's sha256, None when it does not exist."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def source_revision(source: Path) -> dict[str, str]:
    """HEAD, and the git blobs of ``source`` in the tree and at HEAD: equal when an object
    measured was built from committed source (or say which commit it was not)."""
    relative = str(source.relative_to(ROOT))
    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "source_blob": git("hash-object", relative),
        "source_blob_at_head": git("rev-parse", f"HEAD:{relative}"),
    }


def net_core_sysctls(*names: str) -> dict[str, int]:
    """Integer sysctls of net.core (netdev_max_backlog, rmem_max, ...)."""
    return {n: int(Path(f"/proc/sys/net/core/{n}").read_text()) for n in names}


def udp_environment() -> dict[str, object]:
    """The machine and the net.core sysctls that bound a UDP receiver (the STAMP benchmarks)."""
    return {**machine(), **net_core_sysctls("netdev_max_backlog", "rmem_max")}


def load_average() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
