"""STAMP Session-Senders on a VPP node (base.ProbeEndpoints): the node manager's sender code runs
as on Linux, and the plugin carries its packets (vpp-plugin/srv6pm/sender.c). A probe goes to
VPP in one API request and leaves from VPP itself, into the session's SR policy (its probe
route), T1 written as it goes; replies to the sender's UDP port are queued in VPP with T4 and
read here. So T1 and T4 are VPP's, as T2 and T3 are the reflector's, and no packet crosses
into a Linux socket.

The endpoints have their own API connection (and lock): a long apply on the driver's never
holds a probe back. One thread reads the replies of every endpoint and hands each to its
session on the session's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from ipaddress import IPv6Address
from pathlib import Path

from srv6pm.twamp.transport import Datagram

from ...domain.errors import FailedPrecondition
from .api import VppApi, VppRefused
from .fib import Fib

log = logging.getLogger(__name__)
PORTS = range(49500, 53596)  # the senders' UDP ports in VPP: one per session
RECEIVE_MAX = 64  # packets per srv6pm_stamp_receive reply
POLL_S = 0.002  # between reads while the queue is empty
T1_KEEP, T1_NTP = 0, 1  # vl_api_srv6pm_t1_format_t
CLIENT_NAME = "srv6pm-stamp-senders"
UDP_PORT_TAKEN = -164  # VNET_API_ERROR_UDP_PORT_TAKEN


class VppProbeEndpoint:
    def __init__(
        self, owner: VppProbeEndpoints, address: IPv6Address, port: int, ssid: int, stamps: bool
    ) -> None:
        self._owner = owner
        self.address = address
        self.port = port
        self._ssid = ssid
        self.stamps_t1 = stamps  # authenticated probes keep theirs: the HMAC covers T1
        self._handler: Callable[[Datagram], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def serve(self, handler: Callable[[Datagram], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._handler = handler

    def deliver(self, datagram: Datagram) -> None:
        if self._loop is not None and self._handler is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: the session is gone
                self._loop.call_soon_threadsafe(self._handler, datagram)

    def send(
        self,
        data: bytes,
        destination: tuple[str, int],
        traffic_class: int | None = None,
        ifindex: int | None = None,
        mark: int | None = None,
    ) -> bool:
        """False when VPP refused it or is away: the probe is lost, as a full socket's."""
        try:
            self._owner.api.call(
                "srv6pm_stamp_send",
                source=self.address,
                destination=IPv6Address(destination[0]),
                source_port=self.port,
                destination_port=destination[1],
                ssid=self._ssid,
                traffic_class=traffic_class or 0,
                t1_format=T1_NTP if self.stamps_t1 else T1_KEEP,
                len=len(data),
                data=data,
            )
        except (FailedPrecondition, OSError):
            return False
        return True

    def close(self) -> None:
        self._owner.closed(self)


class VppProbeEndpoints:
    def __init__(self, api_socket: Path, api_files: Iterable[Path], fib: Fib) -> None:
        self.api = VppApi(api_socket, api_files, CLIENT_NAME)
        self.api.on_connect = self._on_connect
        self._fib = fib
        self._lock = threading.Lock()
        self._by_port: dict[int, VppProbeEndpoint] = {}
        self._reader: threading.Thread | None = None
        self._dropped = 0

    def open(
        self, address: str, ssid: int, reflector: str, authenticated: bool
    ) -> VppProbeEndpoint:
        source = IPv6Address(address) if address else self._fib.source_toward(reflector)
        if source is None:
            raise FailedPrecondition(
                f"session SSID {ssid}: no source address toward {reflector}: name one"
            )
        with self._lock:
            for port in PORTS:
                if port in self._by_port:
                    continue
                try:
                    self.api.call("srv6pm_sender_port_add_del", is_add=True, port=port)
                except VppRefused as e:
                    if e.retval == UDP_PORT_TAKEN:
                        continue  # VPP uses it for something else
                    raise
                endpoint = VppProbeEndpoint(self, source, port, ssid, not authenticated)
                self._by_port[port] = endpoint
                if self._reader is None:
                    self._reader = threading.Thread(
                        target=self._read, name="vpp-stamp", daemon=True
                    )
                    self._reader.start()
                return endpoint
        raise FailedPrecondition(
            f"every sender port of VPP ({PORTS.start}-{PORTS.stop - 1}) in use"
        )

    def closed(self, endpoint: VppProbeEndpoint) -> None:
        with self._lock:
            if self._by_port.pop(endpoint.port, None) is not None:
                with contextlib.suppress(FailedPrecondition, OSError):
                    self.api.call("srv6pm_sender_port_add_del", is_add=False, port=endpoint.port)

    def _on_connect(self) -> None:
        """A restarted VPP listens on no port: every open endpoint's again."""
        for port in list(self._by_port):
            self.api.call("srv6pm_sender_port_add_del", is_add=True, port=port)

    def _read(self) -> None:
        while True:
            with self._lock:
                if not self._by_port:
                    self._reader = None
                    return
            try:
                reply = self.api.call("srv6pm_stamp_receive", max=RECEIVE_MAX)
            except (FailedPrecondition, OSError) as e:
                log.warning("reading STAMP replies from VPP: %s", e)
                time.sleep(0.5)
                continue
            if reply.dropped != self._dropped:
                log.warning("VPP dropped %d STAMP replies", reply.dropped - self._dropped)
                self._dropped = reply.dropped
            for p in reply.packets[: reply.n_packets]:
                endpoint = self._by_port.get(int(p.destination_port))
                if endpoint is not None:
                    endpoint.deliver(
                        Datagram(
                            bytes(p.data[: p.len]),
                            (str(p.source), int(p.source_port)),
                            int(p.received_ns),
                            int(p.hop_limit),
                            int(p.traffic_class),
                            str(p.destination),
                        )
                    )
            if reply.n_packets < RECEIVE_MAX:
                time.sleep(POLL_S)

    def close(self) -> None:
        with self._lock:
            self._by_port.clear()
        self.api.close()
