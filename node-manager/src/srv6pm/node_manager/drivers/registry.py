"""The data plane drivers by name. The node manager's `driver` setting picks one, and only that
driver's module is imported: a Linux router needs no VPP client, a VPP one no pyroute2 or
bpftool. Each module defines `open_driver(settings) -> DataPlaneDriver`."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ..domain.errors import NodeManagerError
from .base import DataPlaneDriver, DriverSettings

DEFAULT = "linux"
DRIVERS: Mapping[str, str] = {
    "linux": "srv6pm.node_manager.drivers.linux.driver",  # netlink routes, eBPF on tc
    "vpp": "srv6pm.node_manager.drivers.vpp.driver",  # VPP's binary API, srv6pm's VPP plugin
}


class UnknownDriver(NodeManagerError):
    """No data plane driver has this name."""


def check(name: str) -> str:
    """`name` if a driver has it; :class:`UnknownDriver` naming the known ones otherwise."""
    if name not in DRIVERS:
        raise UnknownDriver(
            f"unknown data plane driver {name!r}: the known drivers are "
            f"{', '.join(sorted(DRIVERS))}"
        )
    return name


def open_driver(name: str, settings: DriverSettings) -> DataPlaneDriver:
    """Import the driver `name` and open it on this router."""
    module = importlib.import_module(DRIVERS[check(name)])
    driver: DataPlaneDriver = module.open_driver(settings)
    return driver
