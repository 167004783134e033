"""Runs the compiled tc programs on crafted packets with BPF_PROG_TEST_RUN, against maps written
by the real Monitor (only its tc attach is replaced: no interface is hooked here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from srv6pm.node_manager.domain.model import Marking, MonitoredFlow
from srv6pm.node_manager.drivers.base import PacketStats
from srv6pm.node_manager.drivers.linux.bpftool import obj_get, prog_test_run
from srv6pm.node_manager.drivers.linux.hooks import Hook
from srv6pm.node_manager.drivers.linux.monitor import Monitor

SKB_SIZE = 192  # sizeof(struct __sk_buff), linux/bpf.h
SKB_GSO_SEGS = 164  # offsetof(struct __sk_buff, gso_segs)
SKB_GSO_SIZE = 176  # offsetof(struct __sk_buff, gso_size)
SKB_IFINDEX = 40  # offsetof(struct __sk_buff, ifindex)
PASS, TC_ACT_SHOT = 0xFFFFFFFF, 2  # PASS: TC_ACT_UNSPEC, on to the next filter


@dataclass(frozen=True)
class Run:
    verdict: int
    packet: bytes


class NoHooks:
    """Stands in for tc attach: the programs run through BPF_PROG_TEST_RUN instead."""

    def attached(self, hook: Hook) -> str | None:
        return None

    def attach(self, hook: Hook, program: Path, name: str) -> None:
        pass

    def detach(self, hook: Hook) -> None:
        pass


class Programs:
    """A Monitor on its own bpffs, and its programs run on packets."""

    def __init__(self, root: Path, period_ns: int) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "bpf", "bpf", str(root)], check=True)
        self.monitor = Monitor(root / "bpf", root.parent / "state", NoHooks(), period_ns)  # type: ignore[arg-type]

    def close(self) -> None:
        subprocess.run(["umount", str(self.root)], check=True)
        shutil.rmtree(self.root.parent)  # the mount point and the Monitor's state directory

    def configure(self, marking: Marking, flows: list[MonitoredFlow]) -> None:
        self.monitor.update_flows([], self.monitor.flows())
        self.monitor.set_marking(marking)
        self.monitor.update_flows(flows, [])

    def run(
        self, program: str, packet: bytes, gso_segs: int = 0, gso_size: int = 0, ifindex: int = 0
    ) -> Run:
        """One run; `ifindex` makes the skb's device that interface (its MTU counts)."""
        prog = next((self.root / "bpf" / "progs").iterdir()) / program
        ctx = bytearray(SKB_SIZE)
        ctx[SKB_GSO_SEGS : SKB_GSO_SEGS + 4] = gso_segs.to_bytes(4, "little")
        ctx[SKB_GSO_SIZE : SKB_GSO_SIZE + 4] = gso_size.to_bytes(4, "little")
        ctx[SKB_IFINDEX : SKB_IFINDEX + 4] = ifindex.to_bytes(4, "little")
        fd = obj_get(prog)
        try:
            verdict, out, _ = prog_test_run(fd, packet, bytes(ctx))
        finally:
            os.close(fd)
        return Run(verdict, out)

    def counts(self, flow: str) -> tuple[tuple[int, int], tuple[int, int]]:
        c = self.monitor.read_counters([flow])[flow]
        return (c[0].packets, c[0].bytes), (c[1].packets, c[1].bytes)

    def stats(self) -> PacketStats:
        return self.monitor.read_stats()
