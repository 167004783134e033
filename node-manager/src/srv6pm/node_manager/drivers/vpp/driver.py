"""The VPP driver: SR policies, steering and local SIDs through VPP's binary API, marking and
counting through srv6pm's VPP plugin (docs/VPP.md, "The vpp driver").

Every call goes to VPP through one connection (api.py). When VPP has gone away, the next call
connects again; a VPP that does not hold what the state file lists (a restart: another plugin
instance id) gets the flows, marking and hooks again, and holds none of the driver's local SIDs
or policies any more (the node service adds them again through its next apply).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from importlib import resources
from ipaddress import IPv6Network
from pathlib import Path
from typing import Protocol

from ...domain.errors import FailedPrecondition
from ...domain.model import LocalSid, Marking, MonitoredFlow, ProbeRoute, SrPolicy
from ..base import (
    Capabilities,
    DataPlaneDriver,
    DriverSettings,
    FlowCounters,
    OffersCounterEpoch,
    OffersKernelReflector,
    OffersProbeEndpoints,
    PacketStats,
)
from .addresses import LocalAddresses
from .api import VppApi
from .fib import Fib
from .localsids import BEHAVIOURS, LocalSids
from .monitor import Monitor
from .policies import MODES, Policies
from .probes import ProbeRoutes
from .reflector import VppReflector
from .senders import VppProbeEndpoints
from .state import StateFile

log = logging.getLogger(__name__)

COUNTER_WIDTH_BITS = 64


def plugin_dir() -> Path:
    """Where `make vpp-plugin` puts srv6pm_plugin.so and srv6pm.api.json."""
    return Path(str(resources.files("srv6pm.node_manager") / "drivers" / "vpp" / "plugin"))


def api_files(vpp_api_dir: Path) -> list[Path]:
    """VPP's own API files and the plugin's (the package's when built, else one installed
    with VPP's), each name once."""
    files = {f.name: f for f in sorted(vpp_api_dir.glob("**/*.api.json"))}
    if not files:
        raise FailedPrecondition(f"no VPP API files (*.api.json) in {vpp_api_dir}")
    files |= {f.name: f for f in sorted(plugin_dir().glob("*.api.json"))}
    return list(files.values())


class VppDriver:
    """Programs the VPP answering on `api_socket`."""

    def __init__(
        self,
        api_socket: Path,
        state_dir: Path,
        period_ns: int,
        bsid_prefix: IPv6Network,
        encap_source: str = "",
        vpp_api_dir: Path = Path("/opt/vpp/share/vpp/api"),
    ) -> None:
        files = api_files(vpp_api_dir)
        self._api = VppApi(api_socket, files)
        self._state = StateFile(state_dir)
        self._fib = Fib(self._api)
        self._policies = Policies(self._api, self._fib, bsid_prefix, encap_source)
        self._sids = LocalSids(self._api, self._fib, self._state)
        self._monitor = Monitor(self._api, self._fib, self._state, period_ns)
        self._probes = ProbeRoutes(self._api, self._policies, self._state, bsid_prefix)
        self._addresses = LocalAddresses(self._api, self._fib, self._state)
        self._reflector = VppReflector(self._api)
        self._senders = VppProbeEndpoints(api_socket, files, self._fib)
        self._api.on_connect = self._on_connect
        self._api.connect()

    def _on_connect(self) -> None:
        boot = self._monitor.boot()
        held = self._state.current.boot
        if boot == held:
            self._monitor.recover()
            return
        if held:
            log.warning("VPP restarted (%s, before %s): installing its flows again", boot, held)
        self._sids.forget_all()
        self._probes.forget_all()
        self._monitor.reinstall()
        self._reflector.reinstall()
        self._state.update(boot=boot)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            "vpp",
            frozenset(BEHAVIOURS),
            frozenset(MODES),
            self._monitor.max_flows(),
            COUNTER_WIDTH_BITS,
        )

    def interfaces(self) -> frozenset[str]:
        return frozenset(self._fib.interfaces())

    def policies(self) -> list[SrPolicy]:
        return self._policies.policies()

    def add_policy(self, policy: SrPolicy) -> None:
        with self._api.lock:
            self._policies.add(policy)

    def remove_policy(self, policy: SrPolicy) -> None:
        with self._api.lock:
            self._policies.remove(policy)

    def probe_routes(self) -> list[ProbeRoute]:
        return self._probes.routes()

    def update_probe_routes(self, add: Iterable[ProbeRoute], remove: Iterable[ProbeRoute]) -> None:
        with self._api.lock:
            self._probes.update(add, remove)

    def local_sids(self) -> list[LocalSid]:
        return self._sids.local_sids()

    def add_local_sid(self, sid: LocalSid) -> None:
        with self._api.lock:
            self._sids.add(sid)

    def remove_local_sid(self, sid: LocalSid) -> None:
        with self._api.lock:
            self._sids.remove(sid)

    def local_addresses(self) -> set[str]:
        return self._addresses.addresses()

    def add_local_address(self, address: str) -> None:
        with self._api.lock:
            self._addresses.add(address)

    def remove_local_address(self, address: str) -> None:
        with self._api.lock:
            self._addresses.remove(address)

    def kernel_reflector(self) -> VppReflector:
        return self._reflector

    def probe_endpoints(self) -> VppProbeEndpoints:
        return self._senders

    def flows(self) -> list[MonitoredFlow]:
        return self._monitor.flows()

    def flow_names(self) -> AbstractSet[str]:
        return self._monitor.flow_names()

    def update_flows(self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]) -> None:
        with self._api.lock:
            self._monitor.update_flows(add, remove)

    def marking(self) -> Marking:
        return self._monitor.marking()

    def set_marking(self, marking: Marking) -> None:
        with self._api.lock:
            self._monitor.set_marking(marking)

    def read_counters(self, flows: Iterable[str]) -> Mapping[str, FlowCounters]:
        return self._monitor.read_counters(flows)

    def read_stats(self) -> PacketStats:
        return self._monitor.read_stats()

    def counter_epoch(self) -> int:
        """The plugin's instance id: another value means VPP restarted and every counter began
        again from zero (0 without the plugin: no counters)."""
        return self._monitor.instance()

    def close(self) -> None:
        self._senders.close()
        self._api.close()


class VppSettings(DriverSettings, Protocol):
    """The settings the vpp driver reads."""

    @property
    def vpp_api_socket(self) -> Path: ...

    @property
    def vpp_api_dir(self) -> Path: ...

    @property
    def vpp_bsid_prefix(self) -> str: ...

    @property
    def vpp_encap_source(self) -> str: ...


def open_driver(settings: VppSettings) -> DataPlaneDriver:
    """The registry's entry point (drivers/registry.py)."""
    return VppDriver(
        settings.vpp_api_socket,
        settings.state_dir,
        settings.period_ns,
        IPv6Network(settings.vpp_bsid_prefix),
        settings.vpp_encap_source,
        settings.vpp_api_dir,
    )


# for mypy: the driver offers these optional capabilities (open_driver checks the base protocol)
_offers: tuple[
    type[OffersCounterEpoch], type[OffersKernelReflector], type[OffersProbeEndpoints]
] = (VppDriver, VppDriver, VppDriver)
