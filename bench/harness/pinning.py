"""Which core does what on this machine kind (2 cores): the load on one, the work measured on
the other, so the measured core's busy time is that work alone (docs/BENCHMARKS.md)."""

from __future__ import annotations

import os
from collections.abc import Sequence

LOAD_CORE = 0  # generators, this script, servers that are not measured
MEASURED_CORE = 1  # the router's forwarding, the reflector, the sender sessions


def pin_self(core: int) -> None:
    """This process, and everything it starts from now on, on ``core`` only."""
    os.sched_setaffinity(0, {core})


def taskset(core: int, argv: Sequence[str]) -> list[str]:
    """``argv`` pinned to ``core`` (taskset exec()s: the pid is the command's)."""
    return ["taskset", "-c", str(core), *argv]


def cpu_mask(core: int) -> str:
    """The hexadecimal mask of one core, as rps_cpus takes it."""
    return f"{1 << core:x}"


def rps_command(ifname: str, core: int) -> str:
    """A shell command steering ``ifname``'s receive work (RPS) to ``core``; run it in the
    interface's namespace. veth delivers on the transmitting CPU otherwise."""
    return f"echo {cpu_mask(core)} > /sys/class/net/{ifname}/queues/rx-0/rps_cpus"
