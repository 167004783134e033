"""The data plane driver interface. The rest of the node manager only sees this module.

`DataPlaneDriver` is what every data plane does. What only some can do is an optional
capability, a Protocol of its own that a driver offers through an accessor (None: not here, or
not on this host): the node manager works without each, and a driver that lacks one defines
nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from srv6pm.common.srv6 import Behaviour, EncapMode
from srv6pm.twamp.transport import Datagram

from ..domain.model import (
    KernelReflection,
    LocalSid,
    Marking,
    MonitoredFlow,
    ProbeRoute,
    SrPolicy,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Capabilities:
    driver: str
    behaviours: frozenset[Behaviour]
    encap_modes: frozenset[EncapMode]
    max_flows: int
    counter_width_bits: int


@dataclass(frozen=True)
class ColourCount:
    packets: int
    bytes: int


FlowCounters = tuple[ColourCount, ColourCount]  # index = colour


@dataclass(frozen=True)
class PacketStats:
    """What the node's programs saw, in packets as on the wire, cumulative over all hooks."""

    counted: int = 0
    not_srv6: int = 0
    unmarked: int = 0
    no_flow: int = 0
    parse_error: int = 0
    foreign_mark: int = 0
    mark_failed: int = 0


class DataPlaneDriver(Protocol):
    """What the node manager needs from a data plane. Every call is idempotent where it can be;
    the driver owns only what it created and never touches anything else."""

    def capabilities(self) -> Capabilities: ...

    def interfaces(self) -> frozenset[str]: ...

    def policies(self) -> list[SrPolicy]: ...

    def add_policy(self, policy: SrPolicy) -> None: ...

    def remove_policy(self, policy: SrPolicy) -> None: ...

    def probe_routes(self) -> list[ProbeRoute]:
        """Steering of STAMP packets into the segment list they measure (by mark)."""
        ...

    def update_probe_routes(
        self, add: Iterable[ProbeRoute], remove: Iterable[ProbeRoute]
    ) -> None: ...

    def local_sids(self) -> list[LocalSid]: ...

    def add_local_sid(self, sid: LocalSid) -> None: ...

    def remove_local_sid(self, sid: LocalSid) -> None: ...

    def local_addresses(self) -> set[str]:
        """Addresses we made deliverable to this node from SRv6 decapsulation lookups."""
        ...

    def add_local_address(self, address: str) -> None: ...

    def remove_local_address(self, address: str) -> None: ...

    def flows(self) -> list[MonitoredFlow]: ...

    def flow_names(self) -> AbstractSet[str]: ...

    def update_flows(
        self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]
    ) -> None: ...

    def marking(self) -> Marking: ...

    def set_marking(self, marking: Marking) -> None: ...

    def read_counters(self, flows: Iterable[str]) -> Mapping[str, FlowCounters]: ...

    def read_stats(self) -> PacketStats: ...

    def close(self) -> None: ...


class DriverSettings(Protocol):
    """What a driver is opened with: the node manager's settings (each driver reads its own)."""

    @property
    def state_dir(self) -> Path: ...

    @property
    def period_ns(self) -> int: ...


# ---- optional capabilities ---------------------------------------------------------------------


class KernelReflector(Protocol):
    """A STAMP Session-Reflector in the data plane itself (Linux: eBPF on tc; VPP: the plugin's
    srv6pm-reflect). Without one the userspace reflector answers every probe."""

    @property
    def answers_all(self) -> bool:
        """It answers every probe (no userspace reflector runs), else only some."""
        ...

    def apply(self, reflection: KernelReflection | None) -> None:
        """Answer these probes in the data plane (None: none; the userspace reflector does)."""
        ...

    def refresh(self) -> None:
        """Bring what it reads of the clock (the TAI-UTC offset) up to date, and take in the
        interfaces that appeared since it was applied. Called once per block."""
        ...

    def publish_block(self, block: int, counts: Mapping[int, tuple[int, int]]) -> None:
        """The sessions' counts of a closed block: SSID -> (forward, reverse)."""
        ...

    def next_sequence(self, sender: str, ssid: int) -> int | None:
        """Its next stateful sequence number of (sender, SSID), which the userspace reflector
        shares; None if it has none."""
        ...

    def stats(self) -> Mapping[str, int]:
        """What it did (the proto's KernelReflectorStats fields)."""
        ...


class ProbeEndpoint(Protocol):
    """Where one STAMP Session-Sender sends its probes and gets its replies, when the data plane
    carries them itself (twamp.transport.Endpoint's methods)."""

    @property
    def stamps_t1(self) -> bool:
        """It writes T1 into each probe as it sends it: the sender reads T1 back from replies."""
        ...

    def serve(self, handler: Callable[[Datagram], None]) -> None:
        """Hand each reply to `handler` on the calling asyncio loop's thread."""
        ...

    def send(
        self,
        data: bytes,
        destination: tuple[str, int],
        traffic_class: int | None = None,
        ifindex: int | None = None,
        mark: int | None = None,
    ) -> bool: ...

    def close(self) -> None: ...


class ProbeEndpoints(Protocol):
    """The data plane sends and receives STAMP senders' packets itself (VPP: the plugin), into
    the session's SID list (its probe route). Without it, senders use UDP sockets of the node."""

    def open(self, address: str, ssid: int, reflector: str, authenticated: bool) -> ProbeEndpoint:
        """An endpoint for session `ssid` sending from `address` ("" : the node's address toward
        `reflector`); FailedPrecondition if it cannot be had."""
        ...


class NamespacedSockets(Protocol):
    """The data plane's sockets live in a network namespace of their own (Linux: the router's
    netns). Without it, STAMP sockets are opened where the node manager runs."""

    def in_netns(self, fn: Callable[[], T]) -> T:
        """`fn()` inside that namespace: sockets it opens belong there."""
        ...


class CounterEpoch(Protocol):
    """Counters that can begin again from zero while the node manager runs (VPP: a restart of
    VPP alone). Without it, counters only ever grow (modulo their width)."""

    def counter_epoch(self) -> int:
        """Which life of the counters is current: another value than before means every
        counter began again from zero in between, so no difference spans the two."""
        ...


@runtime_checkable
class OffersCounterEpoch(CounterEpoch, Protocol):
    """A driver whose counters have epochs."""


@runtime_checkable
class OffersKernelReflector(Protocol):
    def kernel_reflector(self) -> KernelReflector | None: ...


@runtime_checkable
class OffersNamespacedSockets(Protocol):
    def namespaced_sockets(self) -> NamespacedSockets | None: ...


@runtime_checkable
class OffersProbeEndpoints(Protocol):
    def probe_endpoints(self) -> ProbeEndpoints: ...


def counter_epoch(driver: DataPlaneDriver) -> int:
    """The epoch of the driver's counters: 0 for a driver whose counters never restart."""
    return driver.counter_epoch() if isinstance(driver, OffersCounterEpoch) else 0


def kernel_reflector(driver: DataPlaneDriver) -> KernelReflector | None:
    """The driver's in-kernel reflector, if it offers one and has it on this host."""
    return driver.kernel_reflector() if isinstance(driver, OffersKernelReflector) else None


def namespaced_sockets(driver: DataPlaneDriver) -> NamespacedSockets | None:
    """Where the driver's sockets live, if not where the node manager runs."""
    return driver.namespaced_sockets() if isinstance(driver, OffersNamespacedSockets) else None


def probe_endpoints(driver: DataPlaneDriver) -> ProbeEndpoints | None:
    """The driver's own STAMP sender endpoints, if it carries senders' packets itself."""
    return driver.probe_endpoints() if isinstance(driver, OffersProbeEndpoints) else None
