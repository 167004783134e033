"""VPP's interfaces and FIB tables, as the SRv6 parts need them: names and indices, which
tables exist, and the interface (and its address) toward an address."""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address

from ...domain.errors import FailedPrecondition
from .api import NO_INDEX, VppApi

LOCAL0 = "local0"  # VPP's internal interface: never a router port
DRIVER_LOOPBACK_INSTANCE = 5336
DRIVER_LOOPBACK = f"loop{DRIVER_LOOPBACK_INSTANCE}"  # its STAMP addresses (addresses.py): no port


class Fib:
    def __init__(self, api: VppApi) -> None:
        self._api = api

    def interfaces(self, include_own: bool = False) -> dict[str, int]:
        """sw_if_index by VPP interface name (`host-r2-r1` for af_packet on veth r2-r1): the
        router's ports, and the driver's own interfaces if `include_own`."""
        return {
            str(d.interface_name): int(d.sw_if_index)
            for d in self._api.dump("sw_interface_dump", name_filter_valid=False)
            if d.interface_name != LOCAL0 and (include_own or d.interface_name != DRIVER_LOOPBACK)
        }

    def index(self, name: str) -> int:
        found = self.interfaces().get(name)
        if found is None:
            raise FailedPrecondition(f"interface {name!r} does not exist in this node's VPP")
        return found

    def names(self) -> dict[int, str]:
        return {i: n for n, i in self.interfaces().items()}

    def check_table(self, table: int, ipv6: bool = True) -> None:
        """VPP crashes when told to use a table it lacks (sr steer into one, seen in 26.06):
        FailedPrecondition instead."""
        held = {
            int(d.table.table_id) for d in self._api.dump("ip_table_dump") if d.table.is_ip6 == ipv6
        }
        if table not in held:
            family, command = ("IPv6", "ip6 table add") if ipv6 else ("IPv4", "ip table add")
            raise FailedPrecondition(
                f"VPP has no {family} table {table}: create it first (vppctl {command} {table})"
            )

    def toward(self, address: str) -> int:
        """The interface VPP sends packets to `address` through, from table 0."""
        addr = ipaddress.ip_address(address)
        reply = self._api.call(
            "ip_route_lookup", table_id=0, exact=0, prefix=f"{addr}/{addr.max_prefixlen}"
        )
        for path in reply.route.paths:
            if int(path.sw_if_index) != NO_INDEX:
                return int(path.sw_if_index)
        raise FailedPrecondition(
            f"VPP has no route to {address} through an interface: name a device"
        )

    def encaps_source(self) -> IPv6Address | None:
        """VPP's own outer source (`set sr encaps source addr`), if one is set: the binary API
        has no request for it, the CLI shows it."""
        shown = str(self._api.call("cli_inband", cmd="show sr encaps source addr").reply)
        _, _, value = shown.partition("=")
        try:
            source = IPv6Address(value.strip())
        except ValueError:
            return None
        return None if source.is_unspecified else source

    def source_toward(self, address: str) -> IPv6Address | None:
        """An IPv6 address (not link-local) of the interface toward `address`, if it has one."""
        try:
            sw_if_index = self.toward(address)
        except FailedPrecondition:
            return None
        for d in self._api.dump("ip_address_dump", sw_if_index=sw_if_index, is_ipv6=True):
            ip = d.prefix.ip
            if isinstance(ip, IPv6Address) and not ip.is_link_local:
                return ip
        return None


def ip6(address: str) -> IPv6Address:
    return IPv6Address(address)


def ip(address: str) -> IPv4Address | IPv6Address:
    return ipaddress.ip_address(address)
