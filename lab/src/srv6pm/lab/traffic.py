"""UDP/IPv6 test traffic: the program run inside a lab namespace, and its driver on the host
(:func:`send_udp`, :func:`receive_udp`: ``Lab.send_udp`` / ``Lab.receive_udp``).

Send exactly N datagrams::

    python -m srv6pm.lab.traffic --dst ADDR --count N [--port P] [--size BYTES]
                                 [--at UNIX_TIME] [--interval SECONDS] [--tclass TC]

prints ``{"sent": N, "first": T0, "last": T1, ...}`` (wall-clock send times of the first and last
datagram). The payload is ``seq`` (u64, from 0) and the send time in ns (u64), zero padded.

Count received datagrams::

    python -m srv6pm.lab.traffic --listen [--port P] [--idle SECONDS] [--timeout SECONDS]

prints ``{"ready": true, ...}`` once bound, then, after ``--idle`` seconds without traffic (once
something arrived), ``--timeout`` seconds overall or SIGTERM, ``{"received": N, "unique": U,
"missing": [...], ...}`` where ``missing`` lists the sequence numbers below the highest one seen
that never arrived.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from ipaddress import IPv6Address
from types import FrameType
from typing import TYPE_CHECKING

from .errors import LabError
from .programs import module_argv, readline, report

if TYPE_CHECKING:
    from .network import Network

HEADER = struct.Struct("!QQ")  # sequence number, send time (ns since the epoch)
DEFAULT_PORT = 9000
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux value; Python lacks the name


@dataclass(frozen=True)
class SendResult:
    """What the sender reports."""

    sent: int
    first: float | None
    last: float | None
    dst: str = ""
    port: int = DEFAULT_PORT
    size: int = HEADER.size


@dataclass(frozen=True)
class ReceiveResult:
    """What the receiver reports."""

    received: int
    unique: int
    first: float | None
    last: float | None
    missing: list[int] = field(default_factory=list)
    port: int = DEFAULT_PORT


def send(
    dst: str,
    count: int,
    *,
    port: int = DEFAULT_PORT,
    size: int = 64,
    at: float | None = None,
    interval: float = 0.001,
    tclass: int = 0,
) -> SendResult:
    """Send ``count`` datagrams to ``[dst]:port``, paced every ``interval`` s, from time ``at``."""
    size = max(size, HEADER.size)
    padding = bytes(size - HEADER.size)
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tclass)  # the customer's DSCP/ECN
    if at is not None:
        _sleep_until(at)
    first = last = None
    start = time.monotonic()
    with sock:
        for seq in range(count):
            if interval > 0:
                _sleep_mono(start + seq * interval)
            now = time.time_ns()
            # sendto on an unconnected socket: an ICMP error for one datagram must not abort
            sock.sendto(HEADER.pack(seq, now) + padding, (dst, port))
            last = now / 1e9
            if first is None:
                first = last
    return SendResult(sent=count, first=first, last=last, dst=dst, port=port, size=size)


def receive(
    *, port: int = DEFAULT_PORT, idle: float = 1.0, timeout: float = 60.0, ready: bool = True
) -> ReceiveResult:
    """Count datagrams on ``[::]:port`` until ``idle`` s of silence, ``timeout`` or SIGTERM."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:  # a slow Python reader must not lose datagrams to a full socket buffer
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.bind(("::", port))
    stop = False

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    if ready:
        print(json.dumps({"ready": True, "port": port}), flush=True)
    received = 0
    seqs: set[int] = set()
    first = last = None
    deadline = time.monotonic() + timeout
    with sock:
        while not stop:
            now = time.monotonic()
            wait = deadline - now
            if received:
                wait = min(wait, idle)
            if wait <= 0:
                break
            sock.settimeout(min(wait, 0.2))  # wake up regularly to notice SIGTERM
            try:
                data = sock.recv(65535)
            except TimeoutError:
                if received and time.time() - (last or 0) >= idle:
                    break
                continue
            received += 1
            last = time.time()
            if first is None:
                first = last
            if len(data) >= HEADER.size:
                seqs.add(HEADER.unpack_from(data)[0])
    missing = sorted(set(range(max(seqs) + 1)) - seqs) if seqs else []
    return ReceiveResult(
        received=received, unique=len(seqs), first=first, last=last, missing=missing, port=port
    )


def _sleep_until(wall: float) -> None:
    _sleep_mono(time.monotonic() + (wall - time.time()))


def _sleep_mono(target: float) -> None:
    while (left := target - time.monotonic()) > 0:
        time.sleep(left)


# --- from the host: the program run in a lab node ----------------------------------------


def send_udp(
    network: Network,
    node: str,
    dst: str,
    count: int,
    *,
    port: int = DEFAULT_PORT,
    size: int = 64,
    at: float | None = None,
    interval: float = 0.001,
    timeout: float | None = None,
    tclass: int = 0,
) -> SendResult:
    """Send exactly ``count`` UDP datagrams from ``node`` (this module, run in its namespace)."""
    argv = module_argv(
        "traffic",
        "--dst",
        dst,
        "--count",
        str(count),
        "--port",
        str(port),
        "--size",
        str(size),
        "--interval",
        str(interval),
        "--tclass",
        str(tclass),
    )
    if at is not None:
        argv += ["--at", repr(at)]
    r = network.exec(node, argv, capture_output=True, text=True, timeout=timeout, check=False)
    if r.returncode != 0:
        raise LabError(f"traffic sender in {node} failed: {r.stderr.strip()}")
    return report(SendResult, r.stdout.strip().splitlines()[-1])


class UdpReceiver:
    """A ``srv6pm.lab.traffic --listen`` process; see :meth:`Lab.receive_udp`."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the receiver has bound its socket."""
        line = readline(self.proc, timeout)
        if '"ready"' not in line:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise LabError(f"UDP receiver did not start: {err.strip() or line}")

    def result(self, timeout: float = 60.0) -> ReceiveResult:
        """Wait for the receiver to finish (idle/timeout) and return what it counted."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            out, err = self.proc.communicate()
        if self.proc.returncode != 0 or not out.strip():
            raise LabError(f"UDP receiver failed: {err.strip()}")
        return report(ReceiveResult, out.strip().splitlines()[-1])

    def close(self) -> None:
        """Stop the receiver if still running."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@contextlib.contextmanager
def receive_udp(
    network: Network,
    node: str,
    *,
    port: int = DEFAULT_PORT,
    idle: float = 1.0,
    timeout: float = 60.0,
) -> Iterator[UdpReceiver]:
    """Context manager: a UDP receiver listening in ``node``; call ``.result()`` in it."""
    argv = module_argv(
        "traffic", "--listen", "--port", str(port), "--idle", str(idle), "--timeout", str(timeout)
    )
    proc = network.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    receiver = UdpReceiver(proc)
    try:
        receiver.wait_ready()
        yield receiver
    finally:
        receiver.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    p = argparse.ArgumentParser(
        prog="python -m srv6pm.lab.traffic",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dst", help="destination IPv6 address (send mode)")
    p.add_argument("--count", type=int, help="number of datagrams to send")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--size", type=int, default=64, help="UDP payload bytes (min 16)")
    p.add_argument("--at", type=float, help="start sending at this UNIX time")
    p.add_argument("--interval", type=float, default=0.001, help="seconds between datagrams")
    p.add_argument("--tclass", type=lambda v: int(v, 0), default=0, help="IPv6 Traffic Class")
    p.add_argument("--listen", action="store_true", help="receive mode")
    p.add_argument("--idle", type=float, default=1.0, help="receive: stop after this silence")
    p.add_argument("--timeout", type=float, default=60.0, help="receive: stop after this long")
    args = p.parse_args(argv)
    if args.listen:
        result: SendResult | ReceiveResult = receive(
            port=args.port, idle=args.idle, timeout=args.timeout
        )
    else:
        if args.dst is None or args.count is None or args.count < 0:
            p.error("send mode needs --dst and --count >= 0")
        try:
            IPv6Address(args.dst)
        except ValueError:
            p.error(f"--dst: not an IPv6 address: {args.dst!r}")
        result = send(
            args.dst,
            args.count,
            port=args.port,
            size=args.size,
            at=args.at,
            interval=args.interval,
            tclass=args.tclass,
        )
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
