#!/usr/bin/env python3
"""STAMP Session-Reflector throughput on one core: NDR (no loss) and the rate at 0.5 % loss.

Two namespaces, bs-gen and bs-refl, joined by a veth pair. In bs-refl, our reflector
(``srv6pm.twamp`` Reflector, stateless, unauthenticated, on one asyncio loop: this script with
``--serve``) runs pinned to core 1, and RPS steers the receive work of its veth to core 1 too.
In bs-gen, bench/stampgen.c (pinned to core 0, RPS of its veth on core 0) sends 44-octet STAMP
test packets at a paced rate and counts the replies on its socket.

Each trial offers one rate for --trial seconds. A search steps the rate up a ladder, then
bisects between the last loss-free step and the first lossy one (NDR, RFC 2544) and between
the last step at <= 0.5 % loss and the first above it. The search is repeated --repeats times.
Longer trials (--confirm s) then start at the median NDR and step down by 10 % until
--confirm-repeats of them in a row lose nothing. A separate pass measures the CPU cost per
reflected packet at a moderate rate. A bare Python loop (recvmsg, struct, sendto; no asyncio,
no TLVs) is measured the same way as a baseline for what Python costs on this machine.

Two more reflectors are measured the same way in the same run unless left out: stamp-suite
(its cached binary, when present; --no-stamp-suite) and srv6pm's in-kernel reflector
(node-manager/bpf/reflector.c, program srv6pm_reflect on bsr0's tc ingress, pinned in a bpffs
directory of its own; --no-kernel). The in-kernel one answers in the receive softirq, which
RPS keeps on core 1, and the reply leaves through the namespace's forwarding. The one-core
generator runs out before it does, so every trial also gives the reflector core's capacity:
reflected packets per second of core 1 busy time (/proc/stat), as bench/forwarding.py measures
a router's.

Run as root: ``python bench/stamp_reflector.py`` (``--help`` for the knobs). ``--other NAME=CMD``
adds another reflector, measured the same way (``{addr}`` and ``{port}`` in CMD are replaced).
Method and results: docs/BENCHMARKS.md. Raw data: bench/results/stamp-reflector-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import importlib
import json
import os
import select
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from machine import machine  # bench/machine.py, beside this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = HERE / "bin"
RESULTS = HERE / "results"

GEN_CORE = 0  # generator, its replies' receive (RPS), this script
REFL_CORE = 1  # the reflector process and its receive (RPS)
PORT = 862
GEN_PORT = 50000
PACKET_OCTETS = 44
LADDER = (5_000, 10_000, 20_000, 30_000, 40_000, 60_000, 80_000, 100_000, 120_000, 150_000, 200_000)
# beyond what the generator reaches on this machine: only the in-kernel reflector gets there, and
# these steps show where the generator, not the reflector, stops
LADDER_TOP = (250_000, 300_000)
OURS = "srv6pm.twamp"
BARE = "python-bare-loop"
KERNEL = "srv6pm.bpf"
STAMP_SUITE = "stamp-suite"
CACHE = Path(os.environ.get("SRV6PM_CACHE", Path.home() / ".cache/srv6pm"))
BPF_ROOT = Path("/sys/fs/bpf/srv6pm")
TC_PRIO = 10
PDR_LOSS = 0.005  # "rate at 0.5 % loss": the highest rate with loss <= this

USER_HZ = os.sysconf("SC_CLK_TCK")


# ---- small helpers ---------------------------------------------------------------------------


class BenchError(Exception):
    """A failure with a message meant for the user."""


def run(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a command, raise BenchError with its stderr if it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if r.returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` failed: {r.stderr.strip()}")
    return r


def build_stampgen() -> Path:
    """bench/bin/stampgen, rebuilt when older than its source."""
    source, target = HERE / "stampgen.c", BIN / "stampgen"
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        target.parent.mkdir(parents=True, exist_ok=True)
        run(["gcc", "-O2", "-Wall", "-Wextra", str(source), "-o", str(target)])
    return target


def idle_s(cpu: int) -> float:
    """Idle seconds of ``cpu`` (/proc/stat idle + iowait). Exact with NO_HZ, rounded to 10 ms;
    the busy columns are tick-sampled and miss most softirq work (see the forwarding section of
    docs/BENCHMARKS.md), so busy time is taken as elapsed - idle."""
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name == f"cpu{cpu}":
            return (int(fields[3]) + int(fields[4])) / USER_HZ
    raise BenchError(f"no cpu{cpu} in /proc/stat")


def steal_s(cpu: int) -> float:
    """Time the hypervisor ran something else while ``cpu`` wanted to run (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name == f"cpu{cpu}":
            return int(fields[7]) / USER_HZ
    raise BenchError(f"no cpu{cpu} in /proc/stat")


def backlog_drops(cpu: int) -> int:
    """Packets dropped because ``cpu``'s input backlog was full (/proc/net/softnet_stat)."""
    lines = Path("/proc/net/softnet_stat").read_text().splitlines()
    return int(lines[cpu].split()[1], 16)


def process_cpu_ns(pid: int) -> int:
    """CPU time of all threads of ``pid`` in ns (schedstat: the scheduler's exact runtime)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


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
    """The counters of a namespace no process of ours lives in between trials (the generator's):
    read by a `cat` started there (/proc/self/net follows the reader's namespace)."""
    argv = ["nsenter", f"--net=/run/netns/{netns}", "cat", "/proc/self/net/snmp6"]
    return parse_snmp6(run(argv).stdout)


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that moved."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def udp6_rx_queue(pid: int, port: int) -> int:
    """Bytes queued on the UDP/IPv6 socket(s) bound to ``port`` in ``pid``'s namespace."""
    total = 0
    for line in Path(f"/proc/{pid}/net/udp6").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port:
            total += int(fields[4].split(":")[1], 16)
    return total


def raise_on_signal(signum: int, _frame: object) -> NoReturn:
    raise SystemExit(f"stopped by signal {signum}")


def environment() -> dict[str, Any]:
    sysctl = Path("/proc/sys/net/core")
    return {
        **machine(),
        "netdev_max_backlog": int((sysctl / "netdev_max_backlog").read_text()),
        "rmem_max": int((sysctl / "rmem_max").read_text()),
    }


# ---- the reflector under test (--serve) ------------------------------------------------------


class ConstantCounters:
    """A BlockCounters stand-in: every flow counted 0 packets in every block. The benchmark's
    probes carry no Direct Measurement TLV, so the reflector never asks for counters."""

    def block_packets(self, flow: str, block: int) -> int | None:
        return 0


def _loop_policy() -> str:
    """Use uvloop when it happens to be installed (it is not a dependency); say which loop."""
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def _serve(address: str, port: int, loop_name: str) -> None:
    # imported here: the orchestrating side of this script does not need the project installed
    from srv6pm.twamp.reflector import Reflector, ReflectorConfig  # noqa: PLC0415
    from srv6pm.twamp.transport import Endpoint, open_socket  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    sock = open_socket(address, port)
    endpoint = Endpoint(sock)
    reflector = Reflector(ReflectorConfig(), ConstantCounters(), endpoint.send)
    endpoint.serve(reflector.handle)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    print(json.dumps({"ready": True, "loop": loop_name, "rcvbuf": rcvbuf}), flush=True)
    await stop.wait()
    endpoint.close()
    print(json.dumps({"stats": dataclasses.asdict(reflector.stats)}), flush=True)


def serve(address: str, port: int) -> int:
    loop_name = _loop_policy()
    asyncio.run(_serve(address, port, loop_name))
    return 0


class _Stop(Exception):
    pass


def serve_bare(address: str, port: int) -> int:
    """Baseline, not a STAMP implementation: the least a Python reflector does per packet.

    One blocking loop: recvmsg() with the same socket and ancillary data as the engine (kernel
    T2, hop limit, traffic class), one struct unpack, T3 from the clock, one struct pack of the
    44-octet reply, sendto(). No TLVs, no validation beyond the length, no asyncio."""
    from srv6pm.twamp.timestamps import ntp_from_unix_ns  # noqa: PLC0415
    from srv6pm.twamp.transport import (  # noqa: PLC0415
        ANCILLARY_BUFFER,
        RECV_BUFFER,
        SCM_TIMESTAMPNS,
        open_socket,
    )

    def stop(_signum: int, _frame: object) -> NoReturn:
        raise _Stop

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    sock = open_socket(address, port)
    sock.setblocking(True)
    probe, reply = struct.Struct(">IQHH"), struct.Struct(">IQHHQIQH2xB3x")
    timespec, intval = struct.Struct("@qq"), struct.Struct("@i")
    rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    print(json.dumps({"ready": True, "loop": "blocking", "rcvbuf": rcvbuf}), flush=True)
    received = reflected = 0
    try:
        while True:
            data, ancillary, _flags, source = sock.recvmsg(RECV_BUFFER, ANCILLARY_BUFFER)
            received += 1
            if len(data) < 44:
                continue
            t2, hop_limit = time.time_ns(), 255
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
                    sec, nsec = timespec.unpack_from(value)
                    t2 = sec * 1_000_000_000 + nsec
                elif level == socket.IPPROTO_IPV6 and kind == socket.IPV6_HOPLIMIT:
                    hop_limit = intval.unpack_from(value)[0]
            seq, t1, error_estimate, ssid = probe.unpack_from(data)
            out = reply.pack(
                seq,
                ntp_from_unix_ns(time.time_ns()),
                1,
                ssid,
                ntp_from_unix_ns(t2),
                seq,
                t1,
                error_estimate,
                hop_limit,
            )
            sock.sendto(out, source)
            reflected += 1
    except _Stop:
        pass
    print(json.dumps({"stats": {"received": received, "reflected": reflected}}), flush=True)
    return 0


def hold(address: str, port: int) -> int:
    """The in-kernel reflector's port holder: a bound socket that reads nothing. The program
    answers before the socket could see a probe; what it passes up stays queued here and is
    counted at the end."""

    def stop(_signum: int, _frame: object) -> NoReturn:
        raise _Stop

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.bind((address, port))
    print(json.dumps({"ready": True, "loop": "none (holds the port)"}), flush=True)
    try:
        while True:
            signal.pause()
    except _Stop:
        pass
    sock.setblocking(False)
    queued = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            sock.recv(2048)
            queued += 1
    print(json.dumps({"stats": {"queued": queued}}), flush=True)
    return 0


def probe_once(source: str, reflector: str, port: int, count: int = 20) -> int:
    """Check a reflector's replies with a plain socket before the load: answered, hop limit on
    arrival, Sender TTL, Error Estimate, T3 - T2. Run in the generator's namespace."""
    from srv6pm.twamp.timestamps import ntp_from_unix_ns  # noqa: PLC0415

    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
    sock.bind((source, GEN_PORT + 1))
    sock.settimeout(1.0)
    probe = struct.Struct(">IQHH28x")
    answered, hop_limits, ttls, estimates, t3_t2_ns = 0, set(), set(), set(), []
    for seq in range(count):
        sock.sendto(probe.pack(seq, ntp_from_unix_ns(time.time_ns()), 1, 4242), (reflector, port))
        try:
            data, ancillary, _flags, _src = sock.recvmsg(2048, 64)
        except TimeoutError:
            continue
        if len(data) < PACKET_OCTETS or struct.unpack_from(">I", data, 24)[0] != seq:
            continue
        answered += 1
        for level, kind, value in ancillary:
            if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_HOPLIMIT:
                hop_limits.add(struct.unpack("@i", value)[0])
        t3, estimate, _ssid, t2 = struct.unpack_from(">QHHQ", data, 4)
        estimates.add(f"0x{estimate:04x}")
        ttls.add(data[40])
        t3_t2_ns.append((t3 - t2) * 1_000_000_000 / 2**32)
        time.sleep(0.01)
    out = {
        "sent": count,
        "answered": answered,
        "hop_limit_on_arrival": sorted(hop_limits),
        "sender_ttl": sorted(ttls),
        "error_estimate": sorted(estimates),
        "t3_minus_t2_ns_median": statistics.median(t3_t2_ns) if t3_t2_ns else None,
    }
    print(json.dumps(out), flush=True)
    return 0


# ---- namespaces ------------------------------------------------------------------------------


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
            mask = f"{1 << side.rps_core:x}"
            rps = f"/sys/class/net/{side.ifname}/queues/rx-0/rps_cpus"
            run(["ip", "netns", "exec", side.netns, "sh", "-c", f"echo {mask} > {rps}"])
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
        if self.exists():
            print(f"removing namespaces left by an earlier run: {self.exists()}", file=sys.stderr)
            self.down()
        try:
            self.up()
            yield self
        finally:
            for problem in self.down():
                print(f"teardown: {problem}", file=sys.stderr)


PAIR = Pair(
    Side("bs-gen", "bsg0", "fd00:bb::1", GEN_CORE),
    Side("bs-refl", "bsr0", "fd00:bb::2", REFL_CORE),
)


# ---- reflector processes ---------------------------------------------------------------------


class ReflectorProcess:
    """A reflector running in a namespace, pinned to one core."""

    def __init__(self, name: str, argv: Sequence[str], side: Side, core: int) -> None:
        self.name = name
        self.info: dict[str, Any] = {}
        self.kernel: KernelPath | None = None  # the in-kernel reflector this process stands by
        full = ["ip", "netns", "exec", side.netns, "taskset", "-c", str(core), *argv]
        # `ip netns exec` and `taskset` both exec(): the child's pid is the reflector's.
        # stderr to a file: a chatty reflector must never block on a full pipe
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.pid = self.proc.pid

    @classmethod
    def ours(cls, side: Side, core: int, port: int = PORT, bare: bool = False) -> ReflectorProcess:
        """Our engine (--serve), or the bare Python baseline (--serve-bare)."""
        argv = [sys.executable, str(Path(__file__).resolve())]
        argv += ["--serve-bare" if bare else "--serve", "--address", side.address]
        argv += ["--port", str(port)]
        r = cls(BARE if bare else OURS, argv, side, core)
        r.info = r.read_json(timeout_s=20)
        if not r.info.get("ready"):
            r.stop()
            raise BenchError(f"our reflector did not start: {r.info}")
        return r

    @classmethod
    def in_kernel(cls, side: Side, core: int, bpf_root: Path) -> ReflectorProcess:
        """srv6pm_reflect on ``side``'s tc ingress; this process only holds the port open."""
        kernel = KernelPath(side, bpf_root)
        argv = [sys.executable, str(Path(__file__).resolve()), "--hold"]
        try:
            kernel.attach()
            r = cls(KERNEL, [*argv, "--address", side.address, "--port", str(PORT)], side, core)
        except BaseException:
            for problem in kernel.detach():
                print(f"teardown: {problem}", file=sys.stderr)
            raise
        r.kernel = kernel
        try:
            r.info = {**r.read_json(timeout_s=20), **kernel.info}
        except BaseException:
            r.stop()  # detaches too
            raise
        return r

    @classmethod
    def other(cls, name: str, command: str, side: Side, core: int) -> ReflectorProcess:
        argv = shlex.split(command.format(addr=side.address, port=PORT))
        r = cls(name, argv, side, core)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # listening when its port shows in /proc/net/udp6
            if r.proc.poll() is not None:
                raise BenchError(f"{name} exited: {r.stderr_text()}")
            with contextlib.suppress(ValueError, IndexError):
                if any(
                    int(line.split()[1].rsplit(":", 1)[1], 16) == PORT
                    for line in Path(f"/proc/{r.pid}/net/udp6").read_text().splitlines()[1:]
                ):
                    return r
            time.sleep(0.2)
        r.stop()
        raise BenchError(f"{name} did not open port {PORT}")

    def read_json(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            raise BenchError(f"{self.name}: no output ({self.stderr_text()})")
        return dict(json.loads(line))

    def stderr_text(self) -> str:
        self.log.seek(0)
        return self.log.read().strip()[-2000:]

    def cpu_ns(self) -> int:
        return process_cpu_ns(self.pid)

    def program_stats(self) -> dict[str, int]:
        """The in-kernel reflector's counters; nothing for a userspace one."""
        return self.kernel.stats() if self.kernel else {}

    def drained(self, timeout_s: float = 10.0) -> None:
        """Wait until the reflector's socket is empty (it answered all it will answer)."""
        if self.kernel:
            return  # answered in the softirq; what sits in the holder's socket stays there
        deadline = time.monotonic() + timeout_s
        while udp6_rx_queue(self.pid, PORT) and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        """SIGTERM (ours prints its final stats), SIGKILL if it does not go."""
        final: dict[str, Any] = {}
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, _ = self.proc.communicate()
            for line in out.splitlines():
                with contextlib.suppress(ValueError):
                    final.update(json.loads(line))
        self.log.close()
        if self.kernel:
            final["program"] = self.kernel.stats()
            final["teardown_problems"] = self.kernel.detach()
            self.kernel = None
        return final


def source_revision(source: Path) -> dict[str, str]:
    """HEAD, and the git blobs of ``source`` in the tree and at HEAD: equal when the object
    measured was built from committed source (or say which commit it was not)."""

    def git(*args: str) -> str:
        r = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        )
        return r.stdout.strip()

    relative = str(source.relative_to(ROOT))
    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "source_blob": git("hash-object", relative),
        "source_blob_at_head": git("rev-parse", f"HEAD:{relative}"),
    }


class KernelPath:
    """srv6pm_reflect loaded into a bpffs directory of its own and attached to the reflector
    veth's tc ingress. detach() undoes exactly what attach() did, in reverse."""

    def __init__(self, side: Side, bpf_root: Path) -> None:
        self.side = side
        self.bpf_root = bpf_root
        self.bpf_dir = bpf_root / f"bench-stamp-reflector-{os.getpid()}-{time.time_ns()}"
        self.info: dict[str, Any] = {}
        self._undo: list[tuple[str, Callable[[], None]]] = []
        self._reflector: Any = None

    def _ns(self, *argv: str) -> list[str]:
        # nsenter, not `ip netns exec`: that remounts /sys and hides the bpffs and its pins
        return ["nsenter", f"--net=/run/netns/{self.side.netns}", *argv]

    def attach(self) -> None:
        # imported here: the other reflectors do not need the node manager installed
        from srv6pm.node_manager.domain.errors import FailedPrecondition  # noqa: PLC0415
        from srv6pm.node_manager.drivers.linux.kernel_reflector import (  # noqa: PLC0415
            KernelReflector,
            KernelReflectorConfig,
            default_object,
        )
        from srv6pm.node_manager.drivers.linux.monitor import tai_offset_ns  # noqa: PLC0415
        from srv6pm.twamp.error_estimate import clock_error_estimate  # noqa: PLC0415

        if self.bpf_dir.exists():
            raise BenchError(f"{self.bpf_dir} exists already")
        if not self.bpf_root.exists():
            self._undo.append((f"rmdir {self.bpf_root}", self.bpf_root.rmdir))
        self._undo.append((f"rm -r {self.bpf_dir}", self._remove_pins))
        config = KernelReflectorConfig(
            address=self.side.address,
            port=PORT,
            error_estimate=clock_error_estimate(False),  # what our userspace reflector sends
            stateful=False,
            tai_offset_ns=tai_offset_ns(),
            enabled=True,
        )
        try:
            self._reflector = KernelReflector(self.bpf_dir)
            self._reflector.configure(config)
        except FailedPrecondition as e:
            raise BenchError(f"in-kernel reflector: {e}") from e
        program = self._reflector.program
        sysctl = "net.ipv6.conf.all.forwarding"
        old = run(self._ns("sysctl", "-n", sysctl)).stdout.strip()
        # the reply is the probe, rewritten before routing: it reaches the sender by forwarding
        run(self._ns("sysctl", "-qw", f"{sysctl}=1"))
        self._undo.append(
            (f"{sysctl}={old}", lambda: run(self._ns("sysctl", "-qw", f"{sysctl}={old}")))
        )
        dev = self.side.ifname
        run(self._ns("tc", "qdisc", "add", "dev", dev, "clsact"))
        self._undo.append(
            (
                f"tc qdisc del dev {dev} clsact",
                lambda: run(self._ns("tc", "qdisc", "del", "dev", dev, "clsact")),
            )
        )
        filt = ["tc", "filter", "add", "dev", dev, "ingress", "prio", str(TC_PRIO)]
        run(self._ns(*filt, "bpf", "da", "pinned", str(program)))
        self._undo.append(
            (
                f"tc filter del dev {dev} ingress prio {TC_PRIO}",
                lambda: run(
                    self._ns("tc", "filter", "del", "dev", dev, "ingress", "prio", str(TC_PRIO))
                ),
            )
        )
        shown = run(self._ns("tc", "filter", "show", "dev", dev, "ingress")).stdout
        if "srv6pm_reflect" not in shown:
            raise BenchError(f"srv6pm_reflect is not on {dev}'s ingress: {shown}")
        self.info = {
            "bpf_dir": str(self.bpf_dir),
            "program": str(program),
            "object": str(default_object()),
            # the object in the tree at attach time, which need not be the committed source's
            "object_sha256": hashlib.sha256(default_object().read_bytes()).hexdigest(),
            **source_revision(ROOT / "node-manager/bpf/reflector.c"),
            "tc_filter": shown.strip(),
            "config": asdict(config),
        }

    def _remove_pins(self) -> None:
        # unpinning drops the last reference to the program and maps once tc lets go of it
        if self.bpf_dir.exists():
            shutil.rmtree(self.bpf_dir)

    def stats(self) -> dict[str, int]:
        return dict(self._reflector.stats()) if self._reflector else {}

    def detach(self) -> list[str]:
        """Undo attach(), last step first; returns what could not be undone."""
        problems = []
        while self._undo:
            what, step = self._undo.pop()
            try:
                step()
            except (BenchError, OSError) as e:
                problems.append(f"{what}: {e}")
        self._reflector = None
        return problems


# ---- trials ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    reflector: str
    rate: int  # requested
    duration_s: float
    offered_pps: float  # sent / elapsed
    reflected_pps: float  # replies counted by the generator / elapsed
    sent: int
    received: int
    loss: float  # (sent - received) / sent
    send_errors: int
    schedule_resets: int
    refl_cpu_ns_per_pkt: float  # reflector process CPU time / replies
    core_busy_ns_per_pkt: float  # reflector core busy time (process + softirq) / replies
    core_busy: float  # fraction of the trial's wall time
    core_steal: float  # fraction of the trial's wall time the hypervisor took from the core
    rcvbuf_errors: int  # reflector namespace Udp6RcvbufErrors
    sndbuf_errors: int  # reflector namespace Udp6SndbufErrors
    backlog_drops: int  # reflector core's input backlog
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_max_us: float
    # reflected packets per second of reflector-core busy time: what the core would answer if
    # it did nothing else (bench/forwarding.py's router capacity)
    capacity_pps: float
    gen_backlog_drops: int  # generator core's input backlog (replies)
    gen_rcvbuf_errors: int  # generator namespace Udp6RcvbufErrors
    program: dict[str, int]  # in-kernel reflector: its counters' change over the trial


class Bench:
    def __init__(self, stampgen: Path, trial_s: float, drain_s: float) -> None:
        self.stampgen = stampgen
        self.trial_s = trial_s
        self.drain_s = drain_s
        self._ssid = 0
        self.trials: list[Trial] = []

    def trial(self, refl: ReflectorProcess, rate: int, duration_s: float | None = None) -> Trial:
        duration = duration_s or self.trial_s
        self._ssid = self._ssid % 65535 + 1  # a new SSID per trial: late replies do not count
        gen, refl_side = PAIR.a, PAIR.b
        argv = ["ip", "netns", "exec", gen.netns, "taskset", "-c", str(GEN_CORE)]
        argv += [str(self.stampgen), "--src", gen.address, "--dst", refl_side.address]
        argv += ["--sport", str(GEN_PORT), "--dport", str(PORT), "--ssid", str(self._ssid)]
        argv += ["--rate", str(rate), "--duration", f"{duration:.3f}"]
        argv += ["--drain", f"{self.drain_s:.3f}"]
        refl.drained()
        time.sleep(0.3)
        gen0, gdrops0, prog0 = netns_snmp6(gen.netns), backlog_drops(GEN_CORE), refl.program_stats()
        udp0, drops0, cpu0 = udp6_counters(refl.pid), backlog_drops(REFL_CORE), refl.cpu_ns()
        t0, idle0, steal0 = time.monotonic(), idle_s(REFL_CORE), steal_s(REFL_CORE)
        r = run(argv)
        t1, idle1, steal1 = time.monotonic(), idle_s(REFL_CORE), steal_s(REFL_CORE)
        udp1, drops1, cpu1 = udp6_counters(refl.pid), backlog_drops(REFL_CORE), refl.cpu_ns()
        gen1, gdrops1, prog1 = netns_snmp6(gen.netns), backlog_drops(GEN_CORE), refl.program_stats()
        g = json.loads(r.stdout)
        sent, received, elapsed = g["sent"], g["received"], g["elapsed_s"]
        busy_ns = max(0.0, (t1 - t0) - (idle1 - idle0)) * 1e9
        t = Trial(
            reflector=refl.name,
            rate=rate,
            duration_s=duration,
            offered_pps=sent / elapsed,
            reflected_pps=received / elapsed,
            sent=sent,
            received=received,
            loss=(sent - received) / sent if sent else float("nan"),
            send_errors=g["send_errors"],
            schedule_resets=g["schedule_resets"],
            refl_cpu_ns_per_pkt=(cpu1 - cpu0) / received if received else float("nan"),
            core_busy_ns_per_pkt=busy_ns / received if received else float("nan"),
            core_busy=busy_ns / 1e9 / (t1 - t0),
            core_steal=(steal1 - steal0) / (t1 - t0),
            rcvbuf_errors=udp1.get("Udp6RcvbufErrors", 0) - udp0.get("Udp6RcvbufErrors", 0),
            sndbuf_errors=udp1.get("Udp6SndbufErrors", 0) - udp0.get("Udp6SndbufErrors", 0),
            backlog_drops=drops1 - drops0,
            rtt_p50_us=g["rtt_p50_us"],
            rtt_p99_us=g["rtt_p99_us"],
            rtt_max_us=g["rtt_max_us"],
            capacity_pps=received / (busy_ns / 1e9) if busy_ns > 0 else float("nan"),
            gen_backlog_drops=gdrops1 - gdrops0,
            gen_rcvbuf_errors=gen1.get("Udp6RcvbufErrors", 0) - gen0.get("Udp6RcvbufErrors", 0),
            program={k: v - prog0.get(k, 0) for k, v in prog1.items()},
        )
        self.trials.append(t)
        print(
            f"  {t.reflector}: rate {rate / 1e3:6.1f}k offered {t.offered_pps / 1e3:6.1f}k "
            f"reflected {t.reflected_pps / 1e3:6.1f}k loss {t.loss:7.3%} "
            f"cpu {t.refl_cpu_ns_per_pkt:6.0f} ns/pkt core {t.core_busy:.2f} "
            f"steal {t.core_steal:.2f} "
            f"capacity {t.capacity_pps / 1e3:.0f}k "
            f"drops rcvbuf {t.rcvbuf_errors} sndbuf {t.sndbuf_errors} backlog {t.backlog_drops} "
            f"gen backlog {t.gen_backlog_drops} gen rcvbuf {t.gen_rcvbuf_errors} "
            f"resets {t.schedule_resets} rtt p50/p99/max {t.rtt_p50_us / 1e3:.1f}/"
            f"{t.rtt_p99_us / 1e3:.1f}/{t.rtt_max_us / 1e3:.1f} ms"
            + (f" program {t.program}" if t.program else ""),
            flush=True,
        )
        return t


@dataclass
class Search:
    reflector: str
    repeat: int
    steps: list[Trial]
    ndr_pps: float  # highest offered rate of a trial of this search with 0 loss
    pdr_pps: float  # the same with loss <= PDR_LOSS
    max_reflected_pps: float  # the most replies per second a trial of this search got back
    ndr_capacity_pps: float  # capacity_pps of the trial that gave ndr_pps


def bisect(
    bench: Bench, refl: ReflectorProcess, ok: Trial | None, bad: Trial, limit: float, res: float
) -> Trial | None:
    """The highest passing trial (loss <= limit) between ``ok`` (passed) and ``bad`` (failed)."""
    lo = ok.rate if ok else 0
    hi = bad.rate
    best = ok
    while hi - lo > max(res, 0.02 * lo):
        mid = int(round((lo + hi) / 2 / 500) * 500)
        if mid in (lo, hi):
            break
        t = bench.trial(refl, mid)
        if t.loss <= limit:
            lo, best = mid, t
        else:
            hi = mid
    return best


def search(bench: Bench, refl: ReflectorProcess, repeat: int, ladder: Sequence[int]) -> Search:
    """Step up the ladder until loss passes 5 % (or twice above 0.5 %), then bisect.

    NDR and the 0.5 % rate are the highest offered rates among all trials of this search that
    met the criterion (results are not monotonic: a higher rate can pass where a lower failed)."""
    first = len(bench.trials)
    steps: list[Trial] = []
    for rate in ladder:
        t = bench.trial(refl, rate)
        steps.append(t)
        if t.loss > 0.05 or sum(s.loss > PDR_LOSS for s in steps) >= 2:
            break
    for limit in (0.0, PDR_LOSS):
        first_bad = next((s for s in steps if s.loss > limit), None)
        passing = [
            s for s in steps if s.loss <= limit and (not first_bad or s.rate < first_bad.rate)
        ]
        if first_bad:
            bisect(bench, refl, passing[-1] if passing else None, first_bad, limit, 1000)
    mine = bench.trials[first:]
    at_ndr = max((t for t in mine if t.loss == 0), key=lambda t: t.offered_pps, default=None)
    return Search(
        refl.name,
        repeat,
        steps,
        at_ndr.offered_pps if at_ndr else 0.0,
        max((t.offered_pps for t in mine if t.loss <= PDR_LOSS), default=0.0),
        max(t.reflected_pps for t in mine),
        at_ndr.capacity_pps if at_ndr else float("nan"),
    )


def confirm_pass(
    bench: Bench, refl: ReflectorProcess, ndr: float, duration_s: float, repeats: int
) -> list[Trial]:
    """Longer trials, from the median NDR down in steps of 10 % until ``repeats`` in a row
    have no loss (at most 5 rates): what the reflector sustains beyond a 3 s trial."""
    trials: list[Trial] = []
    rate = int(round(ndr / 500) * 500)
    for _ in range(5):
        at_rate = []
        for _ in range(repeats):
            at_rate.append(bench.trial(refl, rate, duration_s=duration_s))
            if at_rate[-1].loss > 0:
                break
        trials += at_rate
        if all(t.loss == 0 for t in at_rate):
            break
        rate = int(round(rate * 0.9 / 500) * 500)
    return trials


def cpu_pass(bench: Bench, refl: ReflectorProcess, rate: int, repeats: int) -> list[Trial]:
    return [bench.trial(refl, rate, duration_s=5.0) for _ in range(repeats)]


# ---- report ----------------------------------------------------------------------------------


def spread(values: Sequence[float]) -> str:
    return (
        f"{statistics.median(values) / 1e3:.1f}k ({min(values) / 1e3:.1f}-{max(values) / 1e3:.1f}k)"
    )


def capacity_of(confirm: Sequence[Trial]) -> list[float]:
    """Capacity from the loss-free longer trials: the highest load the reflector kept up with,
    so its core is as busy as it gets without loss and the busy fraction is least noisy."""
    return [t.capacity_pps for t in confirm if t.loss == 0]


def summary(
    searches: Sequence[Search],
    cpu: dict[str, list[Trial]],
    confirm: dict[str, list[Trial]],
    trials: Sequence[Trial],
) -> list[str]:
    """One line per reflector: NDR, 0.5 % rate, cost, capacity; then where loss happened."""
    names = list(dict.fromkeys(s.reflector for s in searches))
    lines = [
        "| reflector | NDR median (min-max) | rate at <= 0.5 % loss | core busy ns/pkt "
        "(CPU pass) | capacity at each search's NDR | capacity, loss-free 10 s trials "
        "| core busy in them |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in names:
        mine = [s for s in searches if s.reflector == name]
        busy_ns = [t.core_busy_ns_per_pkt for t in cpu.get(name, [])]
        long = [t for t in confirm.get(name, []) if t.loss == 0]
        cap = capacity_of(confirm.get(name, []))
        lines.append(
            f"| {name} | {spread([s.ndr_pps for s in mine])} "
            f"| {spread([s.pdr_pps for s in mine])} "
            f"| {statistics.median(busy_ns) if busy_ns else float('nan'):.0f} "
            f"| {spread([s.ndr_capacity_pps for s in mine])} "
            f"| {spread(cap) if cap else '-'} "
            f"| {' / '.join(f'{t.core_busy:.2f}' for t in long) or '-'} |"
        )
    kernel = capacity_of(confirm.get(KERNEL, []))
    peer = [s.ndr_pps for s in searches if s.reflector == STAMP_SUITE]
    if kernel and peer:
        ratio = statistics.median(kernel) / statistics.median(peer)
        lines += ["", f"{KERNEL} capacity / {STAMP_SUITE} NDR (medians): {ratio:.2f}"]
    lines += [
        "",
        "| reflector | trials | with loss | highest offered | lost | reflector backlog "
        "| reflector rcvbuf | generator backlog | generator rcvbuf | program (all trials) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        mine = [t for t in trials if t.reflector == name]
        program: dict[str, int] = {}
        for t in mine:
            for k, v in t.program.items():
                program[k] = program.get(k, 0) + v
        lines.append(
            f"| {name} | {len(mine)} | {sum(t.loss > 0 for t in mine)} "
            f"| {max(t.offered_pps for t in mine) / 1e3:.1f}k "
            f"| {sum(t.sent - t.received for t in mine)} | {sum(t.backlog_drops for t in mine)} "
            f"| {sum(t.rcvbuf_errors for t in mine)} | {sum(t.gen_backlog_drops for t in mine)} "
            f"| {sum(t.gen_rcvbuf_errors for t in mine)} "
            f"| {', '.join(f'{k} {v}' for k, v in program.items()) or '-'} |"
        )
    return lines


def tables(
    searches: Sequence[Search],
    cpu: dict[str, list[Trial]],
    confirm: dict[str, list[Trial]],
    trials: Sequence[Trial],
) -> str:
    lines = [
        "| reflector | requested | offered (median) | reflected per search | loss per search |",
        "|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(s.reflector for s in searches):
        mine = [s for s in searches if s.reflector == name]
        rates = sorted({t.rate for s in mine for t in s.steps})
        for rate in rates:
            at = [next((t for t in s.steps if t.rate == rate), None) for s in mine]
            found = [t for t in at if t]
            offered = statistics.median(t.offered_pps for t in found)
            reflected = " / ".join(f"{t.reflected_pps / 1e3:.1f}k" if t else "-" for t in at)
            loss = " / ".join(f"{t.loss:.2%}" if t else "-" for t in at)
            lines.append(
                f"| {name} | {rate / 1e3:.0f}k | {offered / 1e3:.1f}k | {reflected} | {loss} |"
            )
    lines += [
        "",
        "| reflector | NDR median (min-max) | rate at <= 0.5 % loss | max reflected |",
        "|---|---|---|---|",
    ]
    for name in dict.fromkeys(s.reflector for s in searches):
        mine = [s for s in searches if s.reflector == name]
        lines.append(
            f"| {name} | {spread([s.ndr_pps for s in mine])} | {spread([s.pdr_pps for s in mine])} "
            f"| {spread([s.max_reflected_pps for s in mine])} |"
        )
    lines += [
        "",
        "| reflector | trial | requested | offered | loss | core busy | capacity "
        "| RTT p50 / p99 / max ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, mine in confirm.items():
        for t in mine:
            lines.append(
                f"| {name} | {t.duration_s:.0f} s | {t.rate / 1e3:.1f}k "
                f"| {t.offered_pps / 1e3:.1f}k | {t.loss:.3%} | {t.core_busy:.3f} "
                f"| {t.capacity_pps / 1e3:.0f}k "
                f"| {t.rtt_p50_us / 1e3:.2f} / {t.rtt_p99_us / 1e3:.2f} / "
                f"{t.rtt_max_us / 1e3:.1f} |"
            )
    lines += [
        "",
        "| reflector | rate | process CPU ns/pkt | core busy ns/pkt | core busy | capacity |",
        "|---|---|---|---|---|---|",
    ]
    for name, mine in cpu.items():
        for t in mine:
            lines.append(
                f"| {name} | {t.offered_pps / 1e3:.1f}k | {t.refl_cpu_ns_per_pkt:.0f} "
                f"| {t.core_busy_ns_per_pkt:.0f} | {t.core_busy:.3f} "
                f"| {t.capacity_pps / 1e3:.0f}k |"
            )
    return "\n".join([*lines, "", *summary(searches, cpu, confirm, trials)])


# ---- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe-once", metavar="SOURCE", help=argparse.SUPPRESS)
    p.add_argument("--no-baseline", action="store_true", help="skip the bare Python loop baseline")
    p.add_argument(
        "--no-kernel",
        dest="kernel",
        action="store_false",
        help=f"skip the in-kernel reflector ({KERNEL}, tc eBPF)",
    )
    p.add_argument(
        "--bpf-root",
        type=Path,
        default=BPF_ROOT,
        help="bpffs directory; the in-kernel reflector is pinned in a new one under it "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--stamp-suite",
        type=Path,
        default=CACHE / "stamp-suite/bin/stamp-suite",
        help="stamp-suite binary, measured when it exists (default: %(default)s)",
    )
    p.add_argument("--no-stamp-suite", action="store_true", help="skip stamp-suite")
    p.add_argument("--address", default="::", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=PORT, help=argparse.SUPPRESS)
    p.add_argument(
        "--trial", type=float, default=3.0, help="seconds per rate (default: %(default)s)"
    )
    p.add_argument(
        "--drain", type=float, default=0.5, help="receive after sending, s (default: %(default)s)"
    )
    p.add_argument("--repeats", type=int, default=3, help="NDR searches (default: %(default)s)")
    p.add_argument(
        "--ladder", type=int, nargs="+", default=[*LADDER, *LADDER_TOP], help="rates, pps"
    )
    p.add_argument(
        "--cpu-rate", type=int, default=20_000, help="rate of the CPU pass (default: %(default)s)"
    )
    p.add_argument("--cpu-repeats", type=int, default=3, help="trials of 5 s in the CPU pass")
    p.add_argument("--confirm", type=float, default=10.0, help="longer trials at the median NDR, s")
    p.add_argument(
        "--confirm-repeats", type=int, default=2, help="loss-free ones needed (default: 2)"
    )
    p.add_argument(
        "--other",
        action="append",
        default=[],
        metavar="NAME=CMD",
        help="another reflector: CMD with {addr} and {port}",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    return p.parse_args(argv)


def measure(args: argparse.Namespace, stampgen: Path) -> dict[str, Any]:
    bench = Bench(stampgen, args.trial, args.drain)
    searches: list[Search] = []
    cpu: dict[str, list[Trial]] = {}
    confirm: dict[str, list[Trial]] = {}
    info: dict[str, Any] = {}
    side = PAIR.b
    candidates: list[tuple[str, Callable[[], ReflectorProcess]]] = [
        (OURS, lambda: ReflectorProcess.ours(side, REFL_CORE))
    ]
    if not args.no_baseline:
        candidates.append((BARE, lambda: ReflectorProcess.ours(side, REFL_CORE, bare=True)))
    others = [other.partition("=")[::2] for other in args.other]
    if not args.no_stamp_suite:
        if args.stamp_suite.exists():
            # its defaults: stateless and unauthenticated, as ours
            command = (
                f"{args.stamp_suite} --is-reflector --local-addr {{addr}} --local-port {{port}}"
            )
            others.insert(0, (STAMP_SUITE, command))
        else:
            print(f"{args.stamp_suite} is missing: stamp-suite not measured", file=sys.stderr)
    for name, command in others:
        candidates.append(
            (name, lambda n=name, c=command: ReflectorProcess.other(n, c, side, REFL_CORE))
        )
    if args.kernel:
        candidates.append(
            (KERNEL, lambda: ReflectorProcess.in_kernel(side, REFL_CORE, args.bpf_root))
        )
    for name, start in candidates:
        print(f"{name}:", flush=True)
        refl = start()
        netns0: dict[str, int] = {}
        try:
            netns0 = snmp6(refl.pid)
            refl.info["check"] = probe_check(PAIR.a, side)
            print(f"  check: {refl.info['check']}", flush=True)
            bench.trial(refl, 2000, duration_s=1.0)  # warm-up, not kept
            bench.trials.pop()
            cpu[name] = cpu_pass(bench, refl, args.cpu_rate, args.cpu_repeats)
            for rep in range(1, args.repeats + 1):
                s = search(bench, refl, rep, args.ladder)
                print(
                    f"  search {rep}: NDR {s.ndr_pps / 1e3:.1f}k pps, "
                    f"<= 0.5 % loss {s.pdr_pps / 1e3:.1f}k pps",
                    flush=True,
                )
                searches.append(s)
            ndr = statistics.median(s.ndr_pps for s in searches if s.reflector == name)
            confirm[name] = confirm_pass(bench, refl, ndr, args.confirm, args.confirm_repeats)
        finally:
            # the namespace's own counters over this reflector's trials: forwarded replies,
            # ICMPv6 sent (redirects), what reached a socket
            netns: dict[str, int] = {}
            with contextlib.suppress(OSError):
                netns = counter_deltas(netns0, snmp6(refl.pid))
            info[name] = {"start": refl.info, "final": refl.stop(), "netns_counters": netns}
    return {
        "settings": {
            **{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "packet_octets": PACKET_OCTETS,
        },
        "reflectors": info,
        "trials": [asdict(t) for t in bench.trials],
        "searches": [
            {k: v for k, v in asdict(s).items() if k != "steps"} | {"steps": len(s.steps)}
            for s in searches
        ],
        "cpu": {k: [asdict(t) for t in v] for k, v in cpu.items()},
        "confirm": {k: [asdict(t) for t in v] for k, v in confirm.items()},
        "table": tables(searches, cpu, confirm, bench.trials),
    }


def probe_check(gen: Side, refl: Side) -> dict[str, Any]:
    """A few probes from a plain socket in the generator's namespace (see probe_once)."""
    argv = ["ip", "netns", "exec", gen.netns, "taskset", "-c", str(GEN_CORE), sys.executable]
    argv += [str(Path(__file__).resolve()), "--probe-once", gen.address]
    argv += ["--address", refl.address, "--port", str(PORT)]
    return dict(json.loads(run(argv, timeout=60).stdout))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        return serve(args.address, args.port)
    if args.serve_bare:
        return serve_bare(args.address, args.port)
    if args.hold:
        return hold(args.address, args.port)
    if args.probe_once:
        return probe_once(args.probe_once, args.address, args.port)
    if os.geteuid() != 0:
        print("stamp_reflector.py needs root (namespaces)", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_on_signal)
    os.sched_setaffinity(0, {GEN_CORE})  # this script and what it starts stay off core 1
    started = time.time()
    try:
        stampgen = build_stampgen()
        with PAIR.running():
            result = measure(args, stampgen)
    except BenchError as e:
        print(f"stamp_reflector.py: {e}", file=sys.stderr)
        return 1
    result["environment"] = environment()
    result["wall_s"] = time.time() - started
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"stamp-reflector-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{result['table']}\n\nresults: {path}; wall time {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
