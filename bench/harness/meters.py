"""Readings from /proc: a core's idle and steal time, backlog drops, a process's CPU time and
memory, the whole machine's busy time, a namespace's snmp6 and UDP socket counters."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from bench.harness.run import BenchError, run

USER_HZ = os.sysconf("SC_CLK_TCK")


def _cpu_fields(cpu: int) -> list[int]:
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name == f"cpu{cpu}":
            return [int(x) for x in fields]
    raise BenchError(f"no cpu{cpu} in /proc/stat")


def cpu_times(cpu: int) -> tuple[float, float]:
    """(idle seconds, tick-sampled busy seconds) of ``cpu`` from /proc/stat.

    The idle figure is exact: with NO_HZ the kernel timestamps idle entry and exit and stops
    the idle clock while it handles an interrupt, softirqs included (/proc/stat only rounds it
    to 10 ms). The busy columns are not: this kernel has no IRQ time accounting and samples
    them on the tick, which is stopped while the core idles between bursts, so most of the
    softirq work of forwarding falls between ticks. Busy is therefore 1 - idle / elapsed; the
    sampled figure is kept only to show the difference. (cpuidle residency is no better: it
    counts the interrupt and softirq work done on waking from HLT as idle.)
    """
    user, nice, system, idle, iowait, irq, softirq = _cpu_fields(cpu)[:7]
    return (idle + iowait) / USER_HZ, (user + nice + system + irq + softirq) / USER_HZ


def idle_s(cpu: int) -> float:
    """Idle seconds of ``cpu`` (idle + iowait; see cpu_times for why busy = elapsed - idle)."""
    return cpu_times(cpu)[0]


def steal_s(cpu: int) -> float:
    """Time the hypervisor ran something else while ``cpu`` wanted to run."""
    return _cpu_fields(cpu)[7] / USER_HZ


def backlog_drops(cpu: int) -> int:
    """Packets dropped because ``cpu``'s input backlog was full (/proc/net/softnet_stat)."""
    lines = Path("/proc/net/softnet_stat").read_text().splitlines()
    return int(lines[cpu].split()[1], 16)


def process_cpu_s(pid: int | None, children: bool = False) -> float | None:
    """utime + stime of a process, all its threads (+ cutime + cstime of its exited children
    with ``children``); None when there is no such process."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    return sum(int(x) for x in fields[11 : 15 if children else 13]) / USER_HZ


def process_cpu_ns(pid: int) -> int:
    """CPU time of all threads of ``pid`` in ns (schedstat: the scheduler's exact runtime)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


def wait_idle(pid: int, min_s: float, quiet_s: float = 0.3, max_s: float = 10.0) -> float:
    """Wait at least ``min_s``, then until ``pid`` used (almost) no CPU for ``quiet_s``, at
    most ``max_s`` in all; returns the time waited."""
    start = time.monotonic()
    time.sleep(min_s)
    while time.monotonic() - start < max_s:
        before = process_cpu_s(pid, children=True) or 0.0
        time.sleep(quiet_s)
        if (process_cpu_s(pid, children=True) or 0.0) - before <= 0.02:
            break
    return time.monotonic() - start


def machine_times() -> tuple[float, float]:
    """(busy, total) jiffies of all cores (/proc/stat); idle and iowait count as not busy."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])  # guest time is already in user
    return total - values[3] - values[4], total


def busy_cores(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Cores busy on average between two machine_times() readings."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return (os.cpu_count() or 1) * busy / total if total else 0.0


def wait_quiet(limit_cores: float, max_s: float) -> float:
    """Wait (at most max_s) until the machine uses under limit_cores over 0.5 s; what it used
    last. The machine is shared: past max_s the caller runs anyway, and keeps the figure."""
    deadline = time.monotonic() + max_s
    while True:
        before = machine_times()
        time.sleep(0.5)
        used = busy_cores(before, machine_times())
        if used < limit_cores or time.monotonic() > deadline:
            return used


def rss_kib(pid: int | str = "self", field: str = "VmRSS") -> int:
    """A memory figure of /proc/<pid>/status in KiB (VmRSS; VmHWM: the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def parse_snmp6(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, value = line.split()
        if not name.endswith("_ifindex"):
            out[name] = int(value)
    return out


def snmp6(pid: int) -> dict[str, int]:
    """IPv6, ICMPv6 and UDP counters of the namespace ``pid`` lives in (/proc/<pid>/net/snmp6)."""
    return parse_snmp6(Path(f"/proc/{pid}/net/snmp6").read_text())


def udp6_counters(pid: int) -> dict[str, int]:
    """Udp6 counters of the namespace ``pid`` lives in."""
    return {k: v for k, v in snmp6(pid).items() if k.startswith("Udp6")}


def netns_snmp6(netns: str) -> dict[str, int]:
    """The counters of a namespace no process of ours lives in: read by a `cat` started there
    (/proc/self/net follows the reader's namespace)."""
    argv = ["nsenter", f"--net=/run/netns/{netns}", "cat", "/proc/self/net/snmp6"]
    return parse_snmp6(run(argv).stdout)


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that moved."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def udp6_ports(pid: int) -> dict[int, int]:
    """Bytes queued per local port on the UDP/IPv6 sockets of ``pid``'s namespace."""
    out: dict[int, int] = {}
    for line in Path(f"/proc/{pid}/net/udp6").read_text().splitlines()[1:]:
        fields = line.split()
        port = int(fields[1].rsplit(":", 1)[1], 16)
        out[port] = out.get(port, 0) + int(fields[4].split(":")[1], 16)
    return out


def udp6_rx_queue(pid: int, port: int) -> int:
    """Bytes queued on the UDP/IPv6 socket(s) bound to ``port`` in ``pid``'s namespace."""
    return udp6_ports(pid).get(port, 0)
