"""STAMP packets steered into their SID list in VPP (domain.ProbeRoute): each SID list is an SR
policy of its own under a BSID of the upper half of the driver's range, shared by every route
that takes it.

- A reply route (a reflector's replies to a sender for one session, on its declared return
  path) is the plugin's steering entry for (sender, SSID): srv6pm-reflect sends those replies
  into the policy, whatever the sender's address is routed by.
- A probe route (a sender's probes to a reflector for one session) is the plugin's steering
  entry for (reflector, SSID): srv6pm-stamp-send sends the session's probes into the policy.
- An unmarked route (mark 0) is VPP's L3 steering of the address's /128 in table 0, as the
  kernel's /128 route in table main.

The routes live in the driver's state file, written before VPP is changed; a VPP restart holds
none of them (the node service installs them again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from ipaddress import IPv6Address, IPv6Network

from ...domain.model import ProbeRoute
from .api import NO_INDEX, VppApi
from .policies import (
    BSID_TABLE,
    POLICY_TYPE_DEFAULT,
    STEER_IPV6,
    Policies,
    bsid_halves,
    free_bsid,
    sid_list,
)
from .state import StateFile

log = logging.getLogger(__name__)
STEER_REPLY, STEER_PROBE = 1, 2  # vl_api_srv6pm_steer_kind_t


class ProbeRoutes:
    def __init__(
        self, api: VppApi, policies: Policies, state: StateFile, bsids: IPv6Network
    ) -> None:
        self._api = api
        self._policies = policies
        self._state = state
        self._bsids = bsids
        self._range = bsid_halves(bsids)[1]

    def routes(self) -> list[ProbeRoute]:
        """The routes of the state file that VPP holds (one it lost, or never took, is added
        again by the next apply)."""
        held = self._steered()
        return [r for r in self._state.current.probe_routes if _key(r) in held]

    def _steered(self) -> set[tuple[int, str, int]]:
        """(kind, address, SSID) of what steers into our probe policies (kind 0: L3 steering)."""
        ours = set(self._policies_by_list().values())
        steered = {
            (int(d.kind), str(d.address), int(d.ssid))
            for d in self._api.dump("srv6pm_steer_dump")
            if d.bsid in ours
        }
        for d in self._api.dump("sr_steering_pol_dump"):
            if d.traffic_type == STEER_IPV6 and d.bsid in ours and d.prefix.prefixlen == 128:
                steered.add((0, str(d.prefix.network_address), 0))
        return steered

    def forget_all(self) -> None:
        """A restarted VPP holds none."""
        self._state.update(probe_routes=())

    def update(self, add: Iterable[ProbeRoute], remove: Iterable[ProbeRoute]) -> None:
        held = set(self._state.current.probe_routes)
        for r in remove:
            if r in held:
                self._steer(False, r, self._policy_of(r.segments))
                held.discard(r)
                self._state.update(probe_routes=tuple(sorted(held, key=_order)))
        for r in add:
            bsid = self._policy_of(r.segments) or self._create(r.segments)
            held.add(r)
            self._state.update(probe_routes=tuple(sorted(held, key=_order)))
            self._steer(True, r, bsid)
        self._remove_unused({r.segments for r in held})

    # ---- VPP ---------------------------------------------------------------------------------

    def _policies_by_list(self) -> dict[tuple[str, ...], IPv6Address]:
        found = {}
        for d in self._api.dump("sr_policies_v2_dump"):
            if int(d.bsid) in self._range and d.num_sid_lists == 1:
                sl = d.sid_lists[0]
                found[tuple(str(s) for s in sl.sids[: sl.num_sids])] = d.bsid
        return found

    def _policy_of(self, segments: tuple[str, ...]) -> IPv6Address | None:
        return self._policies_by_list().get(tuple(str(IPv6Address(s)) for s in segments))

    def _create(self, segments: tuple[str, ...]) -> IPv6Address:
        bsid = free_bsid(self._api, self._range, self._bsids)
        self._api.call(
            "sr_policy_add_v2",
            bsid_addr=bsid,
            weight=1,
            is_encap=True,
            type=POLICY_TYPE_DEFAULT,
            fib_table=BSID_TABLE,
            sids=sid_list(segments),
            encap_src=self._policies.source(segments[0]),
        )
        log.info("probe policy added bsid=%s segments=%s", bsid, ",".join(segments))
        return bsid

    def _steer(self, is_add: bool, r: ProbeRoute, bsid: IPv6Address | None) -> None:
        if bsid is None:
            return  # its policy is gone (VPP restarted): nothing steers into it
        if r.mark == 0:
            self._api.call(
                "sr_steering_add_del",
                is_del=not is_add,
                bsid_addr=bsid,
                sr_policy_index=NO_INDEX,
                table_id=0,
                prefix=f"{IPv6Address(r.address)}/128",
                sw_if_index=NO_INDEX,
                traffic_type=STEER_IPV6,
            )
            return
        self._api.call(
            "srv6pm_steer_add_del",
            is_add=is_add,
            kind=STEER_REPLY if r.is_reply else STEER_PROBE,
            address=IPv6Address(r.address),
            ssid=r.ssid,
            bsid=bsid,
        )

    def _remove_unused(self, used: set[tuple[str, ...]]) -> None:
        wanted = {tuple(str(IPv6Address(s)) for s in segments) for segments in used}
        for segments, bsid in self._policies_by_list().items():
            if segments not in wanted:
                self._api.call("sr_policy_del", bsid_addr=bsid, sr_policy_index=NO_INDEX)
                log.info("probe policy removed bsid=%s", bsid)


def _key(r: ProbeRoute) -> tuple[int, str, int]:
    if r.mark == 0:
        return (0, str(IPv6Address(r.address)), 0)
    return (STEER_REPLY if r.is_reply else STEER_PROBE, str(IPv6Address(r.address)), r.ssid)


def _order(r: ProbeRoute) -> tuple[int, str, tuple[str, ...]]:
    return (r.mark, r.address, r.segments)
