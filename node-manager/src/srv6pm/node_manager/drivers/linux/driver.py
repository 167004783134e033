"""The Linux kernel driver: routes through netlink, monitoring through eBPF on tc."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pyroute2 import IPRoute
from pyroute2.netns import pushns

from ...domain.errors import FailedPrecondition
from ...domain.model import (
    KernelReflection,
    LocalSid,
    Marking,
    MonitoredFlow,
    ProbeRoute,
    SrPolicy,
)
from ..base import (
    Capabilities,
    DataPlaneDriver,
    DriverSettings,
    FlowCounters,
    OffersKernelReflector,
    OffersNamespacedSockets,
    PacketStats,
)
from .hooks import Hooks
from .kernel_reflector import KernelReflector as ReflectorProgram
from .maps import MAX_FLOWS
from .monitor import Monitor, tai_offset_ns
from .routes import Routes

log = logging.getLogger(__name__)

T = TypeVar("T")


class LinuxDriver:
    """Programs one network namespace (`netns`, or the node manager's own when empty)."""

    def __init__(
        self,
        bpf_dir: Path,
        state_dir: Path,
        period_ns: int,
        netns: str = "",
        bpf_object: Path | None = None,
    ) -> None:
        self._ipr = NetnsNetlink(netns)
        self._routes = Routes(self._ipr)
        behaviours, modes = self._routes.probe()
        self._caps = Capabilities("linux", behaviours, modes, MAX_FLOWS, 64)
        self._monitor = Monitor(bpf_dir, state_dir, Hooks(self._ipr), period_ns, bpf_object)
        self._monitor.sync_hooks()
        self._reflector: InKernelReflector | None = None
        try:
            program = ReflectorProgram(bpf_dir, hooks=Hooks(self._ipr))
            self._reflector = InKernelReflector(program, self._routes)
        except FailedPrecondition as e:  # the userspace reflector answers everything then
            log.warning("no in-kernel STAMP reflector: %s", e)

    def capabilities(self) -> Capabilities:
        return self._caps

    def interfaces(self) -> frozenset[str]:
        return self._routes.interfaces()

    def policies(self) -> list[SrPolicy]:
        return self._routes.policies()

    def add_policy(self, policy: SrPolicy) -> None:
        self._routes.add_policy(policy)

    def remove_policy(self, policy: SrPolicy) -> None:
        self._routes.remove_policy(policy)

    def probe_routes(self) -> list[ProbeRoute]:
        return self._routes.probe_routes()

    def update_probe_routes(self, add: Iterable[ProbeRoute], remove: Iterable[ProbeRoute]) -> None:
        self._routes.update_probe_routes(add, remove)

    def local_sids(self) -> list[LocalSid]:
        return self._routes.local_sids()

    def add_local_sid(self, sid: LocalSid) -> None:
        self._routes.add_local_sid(sid)

    def remove_local_sid(self, sid: LocalSid) -> None:
        self._routes.remove_local_sid(sid)

    def local_addresses(self) -> set[str]:
        return self._routes.local_addresses()

    def add_local_address(self, address: str) -> None:
        self._routes.add_local_address(address)

    def remove_local_address(self, address: str) -> None:
        self._routes.remove_local_address(address)

    def flows(self) -> list[MonitoredFlow]:
        return self._monitor.flows()

    def flow_names(self) -> AbstractSet[str]:
        return self._monitor.flow_names()

    def update_flows(self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]) -> None:
        self._monitor.update_flows(add, remove)

    def marking(self) -> Marking:
        return self._monitor.marking()

    def set_marking(self, marking: Marking) -> None:
        self._monitor.set_marking(marking)

    def read_counters(self, flows: Iterable[str]) -> Mapping[str, FlowCounters]:
        return self._monitor.read_counters(flows)

    def read_stats(self) -> PacketStats:
        return self._monitor.read_stats()

    def kernel_reflector(self) -> InKernelReflector | None:
        return self._reflector

    def namespaced_sockets(self) -> NetnsNetlink:
        return self._ipr

    def close(self) -> None:
        self._ipr.close()


class InKernelReflector:
    """The eBPF STAMP reflector (kernel_reflector.py) as the driver offers it
    (base.KernelReflector): hooked on every interface of the namespace."""

    answers_all = False  # authenticated probes, other TLVs: userspace

    def __init__(self, program: ReflectorProgram, routes: Routes) -> None:
        self._program = program
        self._routes = routes

    def apply(self, reflection: KernelReflection | None) -> None:
        if reflection and reflection.hmac_key:
            reflection = None  # the HMACs are computed in userspace
        self._program.apply(reflection, self._routes.interfaces(), tai_offset_ns())

    def refresh(self) -> None:
        self._program.refresh_offset(tai_offset_ns())
        self._program.hook(self._routes.interfaces())

    def publish_block(self, block: int, counts: Mapping[int, tuple[int, int]]) -> None:
        self._program.publish_block(block, counts)

    def next_sequence(self, sender: str, ssid: int) -> int | None:
        return self._program.next_sequence(sender, ssid)

    def stats(self) -> Mapping[str, int]:
        return self._program.stats()


class LinuxSettings(DriverSettings, Protocol):
    """The settings the linux driver reads."""

    @property
    def bpf_dir(self) -> Path: ...

    @property
    def netns(self) -> str: ...

    @property
    def bpf_object(self) -> Path | None: ...


def open_driver(settings: LinuxSettings) -> DataPlaneDriver:
    """The registry's entry point (drivers/registry.py)."""
    return LinuxDriver(
        settings.bpf_dir,
        settings.state_dir,
        settings.period_ns,
        settings.netns,
        settings.bpf_object,
    )


class NetnsNetlink:
    """An IPRoute that lives in `netns` ('' = ours) on a thread of its own.

    pyroute2 0.9 binds sockets per calling thread, and IPRoute(netns=...) serves requests from
    a forked helper (which crashed when forked next to gRPC's threads). So one worker thread
    enters the namespace once, owns the IPRoute, and runs every call; generators are drained
    there too, since iterating them does netlink I/O.
    """

    def __init__(self, netns: str) -> None:
        enter = (lambda: pushns(netns)) if netns else None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="netlink", initializer=enter)
        self._ipr = self._pool.submit(IPRoute).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._ipr, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            def run() -> Any:
                result = attr(*args, **kwargs)
                return list(result) if isinstance(result, Iterator) else result

            return self._pool.submit(run).result()

        return call

    def in_netns(self, fn: Callable[[], T]) -> T:
        """`fn()` on the namespace's thread: sockets it opens belong to the namespace."""
        return self._pool.submit(fn).result()

    def close(self) -> None:
        self._pool.submit(self._ipr.close).result()
        self._pool.shutdown()


# for mypy: the driver offers both optional capabilities (open_driver checks the base protocol)
_offers: tuple[type[OffersKernelReflector], type[OffersNamespacedSockets]] = (
    LinuxDriver,
    LinuxDriver,
)
