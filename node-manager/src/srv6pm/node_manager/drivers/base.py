"""The data plane driver interface. The rest of the node manager only sees this module."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol, TypeVar

from srv6pm.common.srv6 import Behaviour, EncapMode

from ..domain.model import (
    KernelReflection,
    LocalSid,
    Marking,
    MonitoredFlow,
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

    def set_kernel_reflector(self, reflection: KernelReflection | None) -> None:
        """Answer these probes in the kernel (None: none; the userspace reflector does)."""
        ...

    def refresh_kernel_reflector(self) -> None:
        """Bring what the in-kernel reflector reads of the clock (the TAI-UTC offset) up to date,
        and hook it on interfaces that appeared since it was set."""
        ...

    def publish_reflector_block(self, block: int, counts: Mapping[int, tuple[int, int]]) -> None:
        """Give the in-kernel reflector sessions' counts of a closed block: SSID -> (forward,
        reverse)."""
        ...

    def next_reflector_sequence(self, sender: str, ssid: int) -> int | None:
        """The in-kernel reflector's next stateful sequence number of (sender, SSID), which the
        userspace reflector shares; None without one."""
        ...

    def kernel_reflector_stats(self) -> Mapping[str, int]:
        """What the in-kernel reflector did ({} without one)."""
        ...

    def in_netns(self, fn: Callable[[], T]) -> T:
        """Run `fn` where the data plane's sockets live (the router's network namespace)."""
        ...

    def close(self) -> None: ...
