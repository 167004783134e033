"""Where the benchmarks run: two namespaces joined by a veth pair (the STAMP benchmarks), or
a lab of srv6pm.lab (routers with node managers) brought up, and always torn down."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from bench.harness.pinning import rps_command
from bench.harness.run import BenchError, progress, run

if TYPE_CHECKING:  # only lab benchmarks pass a Lab; the veth pair needs no srv6pm.lab
    from srv6pm.lab import Lab


@dataclass(frozen=True)
class Side:
    netns: str
    ifname: str
    address: str
    rps_core: int  # receive work of this side's veth runs on this core


@dataclass(frozen=True)
class Pair:
    """Two namespaces joined by one veth pair, with static neighbours (no ND during a run)."""

    a: Side
    b: Side

    def sides(self) -> tuple[Side, Side]:
        return self.a, self.b

    def exists(self) -> list[str]:
        names = run(["ip", "netns", "list"]).stdout.split()
        return [s.netns for s in self.sides() if s.netns in names]

    def up(self) -> None:
        for side in self.sides():
            run(["ip", "netns", "add", side.netns])
        a, b = self.sides()
        other_end = ["peer", "name", b.ifname, "netns", b.netns]
        run(["ip", "-n", a.netns, "link", "add", a.ifname, "type", "veth", *other_end])
        for side in self.sides():
            sysctls = [f"net.ipv6.conf.{c}.accept_dad=0" for c in ("all", "default", side.ifname)]
            run(["ip", "netns", "exec", side.netns, "sysctl", "-qw", *sysctls])
            run(["ip", "-n", side.netns, "link", "set", "lo", "up"])
            run(["ip", "-n", side.netns, "link", "set", side.ifname, "up"])
            address = [f"{side.address}/64", "dev", side.ifname, "nodad"]
            run(["ip", "-n", side.netns, "addr", "add", *address])
            rps = rps_command(side.ifname, side.rps_core)
            run(["ip", "netns", "exec", side.netns, "sh", "-c", rps])
        for side, peer in ((a, b), (b, a)):
            entry = [peer.address, "lladdr", self.mac(peer), "dev", side.ifname, "nud", "permanent"]
            run(["ip", "-n", side.netns, "-6", "neigh", "replace", *entry])

    def mac(self, side: Side) -> str:
        r = run(["ip", "-n", side.netns, "-j", "link", "show", side.ifname])
        return str(json.loads(r.stdout)[0]["address"])

    def down(self) -> list[str]:
        problems = []
        for netns in self.exists():
            r = subprocess.run(
                ["ip", "netns", "del", netns], capture_output=True, text=True, check=False
            )
            if r.returncode != 0:
                problems.append(f"ip netns del {netns}: {r.stderr.strip()}")
        return problems

    @contextlib.contextmanager
    def running(self) -> Iterator[Pair]:
        """Up (after removing what an earlier run left), then down however the block ends."""
        if self.exists():
            progress(f"removing namespaces left by an earlier run: {self.exists()}")
            self.down()
        try:
            self.up()
            yield self
        finally:
            for problem in self.down():
                progress(f"teardown: {problem}")


# ---- labs of srv6pm.lab ----------------------------------------------------------------------


def bindable(port: int, reuse: bool) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, int(reuse))
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for_port(port: int, timeout_s: float = 70.0) -> None:
    """Wait while ``port`` is held only by TIME_WAIT connections of an earlier run.

    The lab's pre-flight check binds without SO_REUSEADDR, so it refuses such a port for up to
    a minute, although the node manager could listen on it.
    """
    deadline = time.monotonic() + timeout_s
    while not bindable(port, reuse=False) and bindable(port, reuse=True):
        if time.monotonic() > deadline:
            return  # let the lab report it
        time.sleep(1)


@contextlib.contextmanager
def lab_running(lab: Lab, base_port: int | None = None) -> Iterator[Lab]:
    """The lab up (after removing one an earlier run left), down however the block ends."""
    if lab.is_up():
        progress(f"removing a lab {lab.prefix!r} left by an earlier run")
        lab.down()
    try:
        if base_port is not None:
            wait_for_port(base_port)
        lab.up()
        yield lab
    finally:
        for problem in lab.down():
            progress(f"teardown: {problem}")


@contextlib.contextmanager
def single_instance(lock: Path, what: str) -> Iterator[None]:
    """Refuse to run twice at once (both runs would share namespaces, ports, probes)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchError(f"another {what} is running") from None
        yield


def sh(lab: Lab, node: str, command: str) -> None:
    """A shell command in a lab node; BenchError with its stderr if it fails."""
    r = lab.exec(node, ["sh", "-c", command], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"{node}: `{command}` failed: {r.stderr.strip()}")


def read_mac(lab: Lab, node: str, ifname: str) -> str:
    r = lab.exec(node, ["cat", f"/sys/class/net/{ifname}/address"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"cannot read the MAC of {node}/{ifname}: {r.stderr.strip()}")
    return str(r.stdout).strip()


class NetnsCounters:
    """Interface counters of one lab node's namespace, read from here without a process per
    read.

    A /proc/<pid>/net file belongs to the namespace of that process when it is opened and keeps
    it for as long as it is open, so a short-lived process in the namespace is enough. Reads
    are then microseconds apart, so the window edges of all counters coincide.
    """

    def __init__(self, lab: Lab, node: str) -> None:
        proc = lab.popen(node, ["sleep", "60"])
        try:
            self._file = self._open_in_netns(proc.pid, node)
        finally:
            proc.kill()  # our own child, by its handle
            proc.wait()

    @staticmethod
    def _open_in_netns(pid: int, node: str) -> TextIO:
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{pid}/ns/net") == own:  # until `ip netns exec` has run
            if time.monotonic() > deadline:
                raise BenchError(f"helper process in {node} did not enter its namespace")
            time.sleep(0.01)
        return open(f"/proc/{pid}/net/dev")  # kept open: it holds the namespace

    def read(self, ifname: str) -> dict[str, int]:
        """rx/tx packets and drops of ``ifname``."""
        self._file.seek(0)
        for line in self._file.read().splitlines()[2:]:
            name, _, rest = line.partition(":")
            if name.strip() == ifname:
                f = [int(x) for x in rest.split()]
                return {"rx": f[1], "rx_drop": f[3], "tx": f[9], "tx_drop": f[11]}
        raise BenchError(f"no interface {ifname} in {self._file.name}")

    def close(self) -> None:
        self._file.close()
