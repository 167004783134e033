"""eBPF for measuring: kernel.bpf_stats for as long as a block runs, a program's run time and
run count, and a probe of the time each CPU spends in the NET_RX softirq
(bench/softirq.bpf.c). bpf(2) is called directly where bpftool 7.1 cannot: it can neither
attach raw tracepoints nor hold BPF_ENABLE_STATS open."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from collections.abc import Iterator
from pathlib import Path

from srv6pm.node_manager.drivers.linux.bpftool import bpf_syscall, obj_get

from bench.harness.run import run

BPF_MAP_LOOKUP_ELEM = 1
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


class _RawTracepointAttr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_uint64),
        ("prog_fd", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("cookie", ctypes.c_uint64),
    )


class _MapLookupAttr(ctypes.Structure):
    _fields_ = (
        ("map_fd", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("value", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    )


class _EnableStatsAttr(ctypes.Structure):
    _fields_ = (("type", ctypes.c_uint32),)


def bpf(cmd: int, attr: ctypes.Structure) -> int:
    """The bpf(2) system call; returns its (fd) result or raises OSError."""
    result = bpf_syscall(cmd, attr)
    if result < 0:
        raise OSError(-result, os.strerror(-result))
    return result


@contextlib.contextmanager
def bpf_stats() -> Iterator[None]:
    """kernel.bpf_stats_enabled for the duration (and never longer, even on a crash: the fd
    turns it off by itself when this process dies)."""
    fd = bpf(BPF_ENABLE_STATS, _EnableStatsAttr(type=BPF_STATS_RUN_TIME))
    try:
        yield
    finally:
        os.close(fd)


def program_stats(program: Path | int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of a pinned program or a program id (zeros while bpf_stats is
    off)."""
    which = ["pinned", str(program)] if isinstance(program, Path) else ["id", str(program)]
    info = json.loads(run(["bpftool", "-j", "prog", "show", *which]).stdout)
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


def remove_pins(path: Path) -> None:
    """Unpin a bpffs tree (unlinking releases the objects)."""
    if path.is_dir():
        for sub in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if sub.is_dir():
                sub.rmdir()
            else:
                sub.unlink()
        path.rmdir()


class _NetRxTime(ctypes.Structure):
    """struct net_rx_time of bench/softirq.bpf.c (one per possible CPU in a lookup)."""

    _fields_ = (
        ("start_ns", ctypes.c_uint64),
        ("total_ns", ctypes.c_uint64),
        ("runs", ctypes.c_uint64),
    )


def possible_cpus() -> int:
    """Number of possible CPUs (a per-CPU map value holds one slot for each)."""
    text = Path("/sys/devices/system/cpu/possible").read_text().strip()
    return max(int(part.split("-")[-1]) for part in text.split(",")) + 1


class NetRxProbe:
    """NET_RX softirq time per CPU (bench/softirq.bpf.c), attached while the object lives,
    pinned under ``pin_dir`` (removed again by close())."""

    def __init__(self, obj: Path, pin_dir: Path) -> None:
        self._dir = pin_dir
        remove_pins(pin_dir)
        pin_dir.mkdir(parents=True)  # bpftool pins into an existing directory only
        progs, maps = str(pin_dir / "progs"), str(pin_dir / "maps")
        run(["bpftool", "prog", "loadall", str(obj), progs, "pinmaps", maps])
        self._fds: list[int] = []
        try:
            self._map_fd = obj_get(pin_dir / "maps" / "bench_net_rx")
            self._fds.append(self._map_fd)
            for tracepoint in ("softirq_entry", "softirq_exit"):
                self._fds.append(self._attach(tracepoint))
        except BaseException:
            self.close()
            raise

    def _attach(self, tracepoint: str) -> int:
        prog = obj_get(self._dir / "progs" / f"bench_{tracepoint}")
        try:
            name = ctypes.create_string_buffer(tracepoint.encode())
            attr = _RawTracepointAttr(name=ctypes.addressof(name), prog_fd=prog)
            return bpf(BPF_RAW_TRACEPOINT_OPEN, attr)
        finally:
            os.close(prog)

    def read(self, cpu: int) -> tuple[int, int]:
        """(nanoseconds in NET_RX, NET_RX runs) on ``cpu`` since the probe was loaded.

        One bpf(2) call rather than a bpftool process: the read lands microseconds after the
        other counters of a snapshot.
        """
        key = ctypes.c_uint32(0)
        values = (_NetRxTime * possible_cpus())()
        attr = _MapLookupAttr(
            map_fd=self._map_fd, key=ctypes.addressof(key), value=ctypes.addressof(values)
        )
        bpf(BPF_MAP_LOOKUP_ELEM, attr)
        return values[cpu].total_ns, values[cpu].runs

    def close(self) -> None:
        for fd in self._fds:  # closing the link fds detaches the programs
            os.close(fd)
        self._fds = []
        remove_pins(self._dir)
