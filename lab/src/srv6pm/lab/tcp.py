"""Bulk TCP/IPv6 test traffic: the program run inside lab namespaces, and :func:`transfer`,
which runs both ends from the host (``Lab.tcp_transfer``).

Receive one connection, read it to the end::

    python -m srv6pm.lab.tcp --listen --port P

prints ``{"ready": true}`` once listening, then ``{"bytes": N, "segments": S, ...}``.

Send N bytes::

    python -m srv6pm.lab.tcp --connect ADDR --port P --bytes N

prints ``{"bytes": N, "segments": S, "first": T0, "last": T1}``.

``segments`` is what the kernel of that namespace sent as TCP segments during the transfer, on
the wire (``Tcp: OutSegs + RetransSegs`` of /proc/net/snmp: the kernel counts a GSO skb as its
segments; retransmissions are counted apart from OutSegs). Nothing else in a lab host speaks
TCP, so it is exactly the TCP packets that host put into its SR policy.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import LabError
from .programs import module_argv, readline, report

if TYPE_CHECKING:
    from .network import Network

DEFAULT_PORT = 9100
SETTLE_S = 0.3  # after close: the last ACKs and FINs of both sides have left
CHUNK = 1 << 20


@dataclass(frozen=True)
class TcpResult:
    bytes: int
    segments: int
    first: float
    last: float


def sent_segments() -> int:
    """TCP segments this network namespace has sent, new and retransmitted."""
    lines = [
        line.split()
        for line in Path("/proc/net/snmp").read_text().splitlines()
        if line.startswith("Tcp:")
    ]
    values = dict(zip(lines[0][1:], map(int, lines[1][1:]), strict=True))
    return values["OutSegs"] + values["RetransSegs"]


def receive(port: int) -> TcpResult:
    before = sent_segments()
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("::", port))
        listener.listen(1)
        print(json.dumps({"ready": True, "port": port}), flush=True)
        conn, _ = listener.accept()
        first = time.time()
        total = 0
        with conn:
            while data := conn.recv(CHUNK):
                total += len(data)
        last = time.time()
    time.sleep(SETTLE_S)
    return TcpResult(total, sent_segments() - before, first, last)


def send(dst: str, port: int, nbytes: int) -> TcpResult:
    before = sent_segments()
    payload = bytes(CHUNK)
    first = time.time()
    with socket.create_connection((dst, port), timeout=60) as conn:
        left = nbytes
        while left > 0:
            left -= conn.send(payload[: min(left, CHUNK)])
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(CHUNK):  # the receiver closes once it has read everything
            pass
    last = time.time()
    time.sleep(SETTLE_S)
    return TcpResult(nbytes, sent_segments() - before, first, last)


# --- from the host: both ends run in lab nodes --------------------------------------------


def transfer(
    network: Network, src: str, dst: str, dst_address: str, nbytes: int, port: int = DEFAULT_PORT
) -> tuple[TcpResult, TcpResult]:
    """Send ``nbytes`` over one TCP connection from host ``src`` to host ``dst`` (at
    ``dst_address``); what the sender and the receiver report."""
    receiver = network.popen(
        dst,
        module_argv("tcp", "--port", str(port), "--listen"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if '"ready"' not in readline(receiver, 10.0):
            raise LabError(f"TCP receiver in {dst} did not start")
        sent = network.exec(
            src,
            module_argv(
                "tcp", "--port", str(port), "--connect", dst_address, "--bytes", str(nbytes)
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if sent.returncode != 0:
            raise LabError(f"TCP sender in {src} failed: {sent.stderr.strip()}")
        out, err = receiver.communicate(timeout=30)
        if receiver.returncode != 0:
            raise LabError(f"TCP receiver in {dst} failed: {err.strip()}")
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.communicate()
    return report(TcpResult, sent.stdout.splitlines()[-1]), report(TcpResult, out.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m srv6pm.lab.tcp",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--listen", action="store_true", help="receive one connection")
    p.add_argument("--connect", help="send to this IPv6 address")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--bytes", type=int, default=0, help="how much to send")
    args = p.parse_args(argv)
    if args.listen:
        result = receive(args.port)
    elif args.connect and args.bytes > 0:
        result = send(args.connect, args.port, args.bytes)
    else:
        p.error("give --listen, or --connect ADDR with --bytes N > 0")
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
