"""UDP/IPv6 endpoints for STAMP with kernel receive timestamps (RFC 8762 section 4: T2 and T4
are taken as the packet arrives, so they must come from the kernel, not from the reader).

The socket asks for SO_TIMESTAMPNS (receive time, CLOCK_REALTIME, nanoseconds), the hop limit
(the reflector reports the sender's TTL, RFC 8762 section 4.3.1), the Traffic Class (the
Class of Service TLV reports the DSCP and ECN received, RFC 8972 section 4.4) and the packet
info (the address the probe was sent to and the interface it came in on, RFC 9503 sections 3
and 4.1.1). A reply can be sent with its own Traffic Class and pinned to an interface.
Transmit timestamps are taken immediately before sendmsg(), as late as userspace can.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

SO_TIMESTAMPNS = 35  # linux/asm-generic/socket.h; Python has no name for it
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")
_INT = struct.Struct("@i")
_UINT = struct.Struct("@I")
_PKTINFO = struct.Struct("@16sI")  # struct in6_pktinfo: address, interface index
RECV_BUFFER = 65535
ANCILLARY_BUFFER = 256


@dataclass(frozen=True)
class Datagram:
    data: bytes
    source: tuple[str, int]
    received_ns: int  # kernel receive time, unix ns
    hop_limit: int | None
    traffic_class: int | None
    destination: str | None = None  # the local address the datagram was sent to
    ifindex: int | None = None  # the interface it arrived on


def open_socket(address: str, port: int, traffic_class: int = 0, mark: int = 0) -> socket.socket:
    """A non-blocking UDP/IPv6 socket bound to [address]:port with receive metadata enabled;
    what it sends carries `mark` (policy routing picks the segment list by it: CAP_NET_ADMIN)."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        if mark:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
        if traffic_class:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, traffic_class)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((address, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def receive(sock: socket.socket) -> Datagram | None:
    """One datagram with its metadata, or None when the socket has nothing to read."""
    try:
        data, ancillary, _flags, source = sock.recvmsg(RECV_BUFFER, ANCILLARY_BUFFER)
    except (BlockingIOError, InterruptedError):
        return None
    received_ns = hop_limit = traffic_class = ifindex = None
    destination = None
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
            seconds, nanoseconds = _TIMESPEC.unpack_from(value)
            received_ns = seconds * 1_000_000_000 + nanoseconds
        elif level == socket.IPPROTO_IPV6 and kind == socket.IPV6_HOPLIMIT:
            hop_limit = _INT.unpack_from(value)[0]
        elif level == socket.IPPROTO_IPV6 and kind == socket.IPV6_TCLASS:
            traffic_class = _INT.unpack_from(value)[0]
        elif level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
            packed, ifindex = _PKTINFO.unpack_from(value)
            destination = socket.inet_ntop(socket.AF_INET6, packed)
    return Datagram(
        data,
        (source[0], source[1]),
        received_ns or time.time_ns(),
        hop_limit,
        traffic_class,
        destination,
        ifindex,
    )


def ancillary(
    traffic_class: int | None, ifindex: int | None, mark: int | None = None
) -> list[tuple[int, int, bytes]]:
    """sendmsg() control data: this datagram's Traffic Class, the interface it must leave by
    (the kernel picks the source address and route on that interface), and its packet mark."""
    out = []
    if mark is not None:
        out.append((socket.SOL_SOCKET, socket.SO_MARK, _UINT.pack(mark)))
    if traffic_class is not None:
        out.append((socket.IPPROTO_IPV6, socket.IPV6_TCLASS, _INT.pack(traffic_class)))
    if ifindex is not None:
        out.append((socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, _PKTINFO.pack(bytes(16), ifindex)))
    return out


class Endpoint:
    """A socket served by the running asyncio loop once `serve` names who handles datagrams."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._loop = asyncio.get_running_loop()

    def serve(self, handler: Callable[[Datagram], None]) -> None:
        def readable() -> None:
            while (datagram := receive(self.sock)) is not None:
                handler(datagram)

        self._loop.add_reader(self.sock.fileno(), readable)

    def send(
        self,
        data: bytes,
        destination: tuple[str, int],
        traffic_class: int | None = None,
        ifindex: int | None = None,
        mark: int | None = None,
    ) -> bool:
        """False when the kernel refused it (full buffer, no route): the probe is lost."""
        try:
            if traffic_class is None and ifindex is None and mark is None:
                self.sock.sendto(data, destination)
            else:
                control = ancillary(traffic_class, ifindex, mark)
                self.sock.sendmsg([data], control, 0, destination)
        except OSError:
            return False
        return True

    def close(self) -> None:
        self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
