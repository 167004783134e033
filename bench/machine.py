"""What every benchmark records about the machine and the code it ran: kernel, CPU, cores,
Python, git revision (results of different runs compare only when these do)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    git = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "git": git,
    }
