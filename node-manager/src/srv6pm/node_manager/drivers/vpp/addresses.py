"""The node's STAMP addresses in VPP (the reflector's, the senders'): local in table 0, so probes
VPP decapsulates with End.DT6 there are VPP's to answer. One an interface already has needs
nothing more; any other is a /128 on a loopback of the driver's own (`loop5336`, not one of the
node's interfaces). The state file lists them: those are the driver's."""

from __future__ import annotations

from ipaddress import IPv6Address

from .api import VppApi
from .fib import DRIVER_LOOPBACK, DRIVER_LOOPBACK_INSTANCE, Fib
from .state import StateFile

ADMIN_UP = 1  # IF_STATUS_API_FLAG_ADMIN_UP


class LocalAddresses:
    def __init__(self, api: VppApi, fib: Fib, state: StateFile) -> None:
        self._api = api
        self._fib = fib
        self._state = state

    def _loopback(self, create: bool) -> int | None:
        index = self._fib.interfaces(include_own=True).get(DRIVER_LOOPBACK)
        if index is None and create:
            reply = self._api.call(
                "create_loopback_instance",
                is_specified=True,
                user_instance=DRIVER_LOOPBACK_INSTANCE,
            )
            index = int(reply.sw_if_index)
            self._api.call("sw_interface_set_flags", sw_if_index=index, flags=ADMIN_UP)
        return index

    def _on(self, index: int) -> set[str]:
        return {
            str(d.prefix.ip)
            for d in self._api.dump("ip_address_dump", sw_if_index=index, is_ipv6=True)
        }

    def _local(self) -> set[str]:
        """Every address of every interface of VPP's."""
        return set().union(*(self._on(i) for i in self._fib.interfaces(include_own=True).values()))

    def addresses(self) -> set[str]:
        """The driver's addresses that are local in VPP (a restarted VPP has none)."""
        return set(self._state.current.local_addresses) & self._local()

    def add(self, address: str) -> None:
        address = str(IPv6Address(address))
        self._state.update(local_addresses=self._state.current.local_addresses | {address})
        if address not in self._local():
            self._change(True, address)

    def remove(self, address: str) -> None:
        address = str(IPv6Address(address))
        index = self._loopback(create=False)
        if index is not None and address in self._on(index):
            self._change(False, address)
        self._state.update(local_addresses=self._state.current.local_addresses - {address})

    def _change(self, is_add: bool, address: str) -> None:
        index = self._loopback(create=is_add)
        if index is not None:
            self._api.call(
                "sw_interface_add_del_address",
                sw_if_index=index,
                is_add=is_add,
                del_all=False,
                prefix=f"{address}/128",
            )
