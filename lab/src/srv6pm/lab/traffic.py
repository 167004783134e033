"""UDP/IPv6 test traffic, run inside a lab namespace (``Lab.send_udp`` / ``Lab.receive_udp``).

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
import json
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from ipaddress import IPv6Address
from types import FrameType

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
