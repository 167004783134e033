"""Local SIDs (VPP's "localsids"): each behaviour as VPP's sr_behavior, with its interface,
next hop or lookup table.

VPP keys a localsid by its address alone. The driver owns the ones it created, listed in its
state file before VPP is asked; it never changes or removes another (an operator's, or one a
restarted VPP was configured with at startup).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from srv6pm.common.srv6 import Behaviour

from ...domain.errors import FailedPrecondition, InvalidArgument
from ...domain.model import LocalSid
from .api import NO_INDEX, VppApi
from .fib import Fib, ip, ip6
from .state import StateFile

log = logging.getLogger(__name__)

# vl_api_sr_behavior_t (sr_types.api). VPP has no End.DT46.
BEHAVIOURS = {
    Behaviour.END: 1,
    Behaviour.END_X: 2,
    Behaviour.END_T: 3,
    Behaviour.END_DX6: 6,
    Behaviour.END_DX4: 7,
    Behaviour.END_DT6: 8,
    Behaviour.END_DT4: 9,
}
_BY_NUMBER = {v: k for k, v in BEHAVIOURS.items()}
CROSS_CONNECTS = frozenset({Behaviour.END_X, Behaviour.END_DX6, Behaviour.END_DX4})
LOOKUPS = frozenset({Behaviour.END_T, Behaviour.END_DT6, Behaviour.END_DT4})
MAIN_TABLE = 254  # the domain's name for the main table in a lookup (VPP's table 0)


def vpp_lookup_table(table: int) -> int:
    return 0 if table == MAIN_TABLE else table


class LocalSids:
    def __init__(self, api: VppApi, fib: Fib, state: StateFile) -> None:
        self._api = api
        self._fib = fib
        self._state = state

    def _held(self) -> dict[str, Any]:
        """VPP's localsids by address, whoever made them."""
        return {str(d.addr): d for d in self._api.dump("sr_localsids_dump")}

    def local_sids(self) -> list[LocalSid]:
        ours = self._state.current.local_sids
        names = self._fib.names()
        return [
            sid
            for address, d in self._held().items()
            if address in ours and (sid := _local_sid(d, names)) is not None
        ]

    def add(self, s: LocalSid) -> None:
        self._check(s)
        held = self._held().get(s.sid)
        ours = self._state.current.local_sids
        if held is not None:
            if s.sid not in ours:
                raise FailedPrecondition(
                    f"local SID {s.sid} already exists in VPP and srv6pm did not create it"
                )
            have = _local_sid(held, self._fib.names())
            if have is not None and replace(s, device=s.device or have.device) == have:
                return
            self._delete(s.sid)  # VPP cannot replace a localsid in place
        sw_if_index = NO_INDEX
        if s.behaviour in CROSS_CONNECTS:
            sw_if_index = self._fib.index(s.device) if s.device else self._fib.toward(s.nexthop)
        elif s.behaviour in LOOKUPS:
            sw_if_index = vpp_lookup_table(s.lookup_table)  # VPP carries the table there
        self._state.update(local_sids=ours | {s.sid})  # ours before VPP holds it
        self._api.call(
            "sr_localsid_add_del",
            is_del=False,
            localsid=ip6(s.sid),
            end_psp=False,
            behavior=BEHAVIOURS[s.behaviour],
            sw_if_index=sw_if_index,
            vlan_index=0,
            fib_table=s.table,
            nh_addr=ip(s.nexthop) if s.nexthop else ip6("::"),
        )
        log.info("local SID added sid=%s behaviour=%s", s.sid, s.behaviour.value)

    def remove(self, s: LocalSid) -> None:
        ours = self._state.current.local_sids
        if s.sid not in ours:
            return  # never one we did not create
        if s.sid in self._held():
            self._delete(s.sid)
        self._state.update(local_sids=ours - {s.sid})
        log.info("local SID removed sid=%s", s.sid)

    def forget_all(self) -> None:
        """A restarted VPP holds none of ours: whatever it holds now is someone else's."""
        if self._state.current.local_sids:
            self._state.update(local_sids=frozenset())

    def _delete(self, sid: str) -> None:
        self._api.call("sr_localsid_add_del", is_del=True, localsid=ip6(sid), sw_if_index=NO_INDEX)

    def _check(self, s: LocalSid) -> None:
        if s.behaviour not in BEHAVIOURS:
            raise FailedPrecondition(
                f"local SID {s.sid}: VPP has no {s.behaviour.value} (it has "
                f"{', '.join(sorted(b.value for b in BEHAVIOURS))})"
            )
        if s.device and s.behaviour not in CROSS_CONNECTS:
            raise InvalidArgument(
                f"local SID {s.sid}: VPP's {s.behaviour.value} takes no device "
                f"({s.device!r}); only End.X, End.DX4 and End.DX6 send through one"
            )
        self._fib.check_table(s.table)
        if s.behaviour in LOOKUPS:
            ipv6 = s.behaviour is not Behaviour.END_DT4
            self._fib.check_table(vpp_lookup_table(s.lookup_table), ipv6)


def _local_sid(d: Any, names: dict[int, str]) -> LocalSid | None:
    behaviour = _BY_NUMBER.get(int(d.behavior))
    if behaviour is None:
        return None  # a behaviour srv6pm does not speak of (End.DX2, uN, ...)
    nexthop, lookup, device = "", 0, ""
    if behaviour in CROSS_CONNECTS:
        nexthop = str(d.xconnect_nh_addr)
        device = names.get(int(d.xconnect_iface_or_vrf_table), "")
    elif behaviour in LOOKUPS:
        lookup = int(d.xconnect_iface_or_vrf_table) or MAIN_TABLE
    return LocalSid(str(d.addr), behaviour, nexthop, lookup, device, int(d.fib_table))
