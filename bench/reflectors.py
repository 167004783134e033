#!/usr/bin/env python3
"""The STAMP Session-Reflectors the STAMP benchmarks measure, and how each is started.

- srv6pm.twamp: our engine (``srv6pm.twamp`` Reflector, stateless, unauthenticated, on one
  asyncio loop): ``python3 bench/reflectors.py --serve``;
- python-bare-loop: the least a Python reflector does per packet (``--serve-bare``), a
  baseline for what Python costs on this machine;
- srv6pm.bpf: the in-kernel reflector (node-manager/bpf/reflector.c, program srv6pm_reflect on
  the veth's tc ingress, pinned in a bpffs directory of its own), with a process holding the
  port (``--hold``);
- any other command (stamp-suite's binary, ``{addr}`` and ``{port}`` replaced), ready once its
  port shows in /proc/net/udp6.

``--probe-once SOURCE`` sends a few probes from a plain socket and prints what came back
(run in the generator's namespace). Used by bench/stamp_reflector.py and
bench/stamp_sessions.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/reflectors.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import contextlib
import dataclasses
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
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, NoReturn, TypedDict

from bench.harness import provenance
from bench.harness.meters import process_cpu_ns, udp6_ports, udp6_rx_queue
from bench.harness.pinning import taskset
from bench.harness.run import BenchError, progress, run
from bench.harness.topology import Side

if TYPE_CHECKING:
    from srv6pm.node_manager.drivers.linux.kernel_reflector import KernelReflector

SCRIPT = Path(__file__).resolve()
PORT = 862
GEN_PORT = 50000
PACKET_OCTETS = 44
OURS = "srv6pm.twamp"
BARE = "python-bare-loop"
KERNEL = "srv6pm.bpf"
STAMP_SUITE = "stamp-suite"
BPF_ROOT = Path("/sys/fs/bpf/srv6pm")
TC_PRIO = 10


class ProbeCheck(TypedDict):
    """What --probe-once prints."""

    sent: int
    answered: int
    hop_limit_on_arrival: list[int]
    sender_ttl: list[int]
    error_estimate: list[str]  # hexadecimal
    t3_minus_t2_ns_median: float | None


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
    answered = 0
    hop_limits: set[int] = set()
    ttls: set[int] = set()
    estimates: set[str] = set()
    t3_t2_ns: list[float] = []
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
    out: ProbeCheck = {
        "sent": count,
        "answered": answered,
        "hop_limit_on_arrival": sorted(hop_limits),
        "sender_ttl": sorted(ttls),
        "error_estimate": sorted(estimates),
        "t3_minus_t2_ns_median": statistics.median(t3_t2_ns) if t3_t2_ns else None,
    }
    print(json.dumps(out), flush=True)
    return 0


class ReflectorProcess:
    """A reflector running in a namespace, pinned to one core."""

    def __init__(self, name: str, argv: Sequence[str], side: Side, core: int) -> None:
        self.name = name
        self.info: dict[str, object] = {}
        self.kernel: KernelPath | None = None  # the in-kernel reflector this process stands by
        full = ["ip", "netns", "exec", side.netns, *taskset(core, argv)]
        # `ip netns exec` and `taskset` both exec(): the child's pid is the reflector's.
        # stderr to a file: a chatty reflector must never block on a full pipe
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.pid = self.proc.pid

    @classmethod
    def ours(cls, side: Side, core: int, port: int = PORT, bare: bool = False) -> ReflectorProcess:
        """Our engine (--serve), or the bare Python baseline (--serve-bare)."""
        argv = [sys.executable, str(SCRIPT)]
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
        argv = [sys.executable, str(SCRIPT), "--hold"]
        try:
            kernel.attach()
            r = cls(KERNEL, [*argv, "--address", side.address, "--port", str(PORT)], side, core)
        except BaseException:
            for problem in kernel.detach():
                progress(f"teardown: {problem}")
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
                if PORT in udp6_ports(r.pid):
                    return r
            time.sleep(0.2)
        r.stop()
        raise BenchError(f"{name} did not open port {PORT}")

    def read_json(self, timeout_s: float) -> dict[str, object]:
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

    def stop(self) -> dict[str, object]:
        """SIGTERM (ours prints its final stats), SIGKILL if it does not go."""
        final: dict[str, object] = {}
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


class KernelPath:
    """srv6pm_reflect loaded into a bpffs directory of its own and attached to the reflector
    veth's tc ingress. detach() undoes exactly what attach() did, in reverse."""

    def __init__(self, side: Side, bpf_root: Path) -> None:
        self.side = side
        self.bpf_root = bpf_root
        self.bpf_dir = bpf_root / f"bench-stamp-reflector-{os.getpid()}-{time.time_ns()}"
        self.info: dict[str, object] = {}
        # each step's return value, if any, is not looked at
        self._undo: list[tuple[str, Callable[[], object]]] = []
        self._reflector: KernelReflector | None = None

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
            reflector = KernelReflector(self.bpf_dir)
            self._reflector = reflector
            reflector.configure(config)
        except FailedPrecondition as e:
            raise BenchError(f"in-kernel reflector: {e}") from e
        program = reflector.program
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
            "object_sha256": provenance.sha256(default_object()),
            **provenance.source_revision(provenance.ROOT / "node-manager/bpf/reflector.c"),
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--serve", action="store_true", help="our reflector")
    what.add_argument("--serve-bare", action="store_true", help="the bare Python loop")
    what.add_argument("--hold", action="store_true", help="hold the port (in-kernel reflector)")
    what.add_argument("--probe-once", metavar="SOURCE", help="check a reflector from SOURCE")
    p.add_argument("--address", default="::", help="address to bind / of the reflector")
    p.add_argument("--port", type=int, default=PORT)
    args = p.parse_args(argv)
    if args.serve:
        return serve(args.address, args.port)
    if args.serve_bare:
        return serve_bare(args.address, args.port)
    if args.hold:
        return hold(args.address, args.port)
    return probe_once(args.probe_once, args.address, args.port)


if __name__ == "__main__":
    sys.exit(main())
