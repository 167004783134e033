"""SR policies as VPP holds them: a policy (its segment lists, weighted; a per-flow hash over
them) under a binding SID, and an L3 steering entry sending an IPv6 prefix of a FIB table to
that BSID.

Ownership: the policies whose BSID is in the lower half of the driver's BSID range
(`vpp_bsid_prefix`) are srv6pm's, and so are the steering entries pointing to them (the upper
half is the STAMP probe routes', probes.py). Nothing else is listed, changed or
removed. A policy of ours that nothing steers into (a crash between the two requests) is
removed the next time a policy is added.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from ipaddress import IPv6Address, IPv6Network
from typing import Any

from srv6pm.common.srv6 import EncapMode

from ...domain.errors import FailedPrecondition, InvalidArgument
from ...domain.model import MAX_SEGMENTS, SegmentList, SrPolicy
from .api import NO_INDEX, VppApi
from .fib import Fib, ip6

log = logging.getLogger(__name__)

MODES = frozenset({EncapMode.ENCAP, EncapMode.INLINE})  # is_encap true / false
POLICY_TYPE_DEFAULT = 0  # SR_API_POLICY_TYPE_DEFAULT: weighted per-flow hash over the lists
SR_POLICY_OP_ADD = 1
STEER_IPV6 = 6  # SR_STEER_API_IPV6
BSID_TABLE = 0  # where VPP installs our BSIDs


def bsid_halves(bsids: IPv6Network) -> tuple[range, range]:
    """The SR policies' BSIDs (as integers) and the probe routes' ones: each half of the range,
    without its first address."""
    base, size = int(bsids.network_address), bsids.num_addresses
    return range(base + 1, base + size // 2), range(base + size // 2, base + size)


def free_bsid(api: VppApi, among: range, bsids: IPv6Network) -> IPv6Address:
    """The lowest address of `among` no policy has (every policy's BSID counts, ours or not)."""
    used = {int(d.bsid) for d in api.dump("sr_policies_v2_dump")}
    for value in among:
        if value not in used:
            return IPv6Address(value)
    raise FailedPrecondition(f"the BSID range {bsids} is full")


def sid_list(segments: tuple[str, ...], weight: int = 1) -> dict[str, Any]:
    sids = [ip6(s) for s in segments]
    padding = [IPv6Address("::")] * (MAX_SEGMENTS - len(sids))
    return {"num_sids": len(sids), "weight": weight, "sids": sids + padding}


@dataclass(frozen=True)
class Held:
    """One of our policies and what steers into it."""

    bsid: IPv6Address
    policy: SrPolicy


class Policies:
    def __init__(self, api: VppApi, fib: Fib, bsids: IPv6Network, encap_source: str) -> None:
        self._api = api
        self._fib = fib
        self._bsids = bsids
        self._range = bsid_halves(bsids)[0]
        self._encap_source = encap_source

    def ours(self, bsid: IPv6Address) -> bool:
        return int(bsid) in self._range

    # ---- reading -----------------------------------------------------------------------------

    def _lists(self) -> dict[IPv6Address, Any]:
        """Every policy of ours by BSID (the dump's details)."""
        return {d.bsid: d for d in self._api.dump("sr_policies_v2_dump") if self.ours(d.bsid)}

    def held(self) -> dict[tuple[str, int], Held]:
        """Our policies by (prefix, table), from one dump of each kind."""
        lists = self._lists()
        found = {}
        for steer in self._api.dump("sr_steering_pol_dump"):
            if steer.traffic_type != STEER_IPV6 or steer.bsid not in lists:
                continue
            prefix, table = str(steer.prefix), int(steer.fib_table)
            found[(prefix, table)] = Held(steer.bsid, _policy(prefix, table, lists[steer.bsid]))
        return found

    def policies(self) -> list[SrPolicy]:
        return [h.policy for h in self.held().values()]

    # ---- changing ----------------------------------------------------------------------------

    def add(self, p: SrPolicy) -> None:
        """Steer `p.prefix` into a new policy, then remove the one it replaces: traffic is never
        left unsteered. Nothing changes if VPP already holds the same."""
        if p.device:
            raise InvalidArgument(
                f"policy {p.name or p.prefix!r}: VPP sends an encapsulated packet by its first "
                f"SID's route, it takes no device ({p.device!r}): name none"
            )
        if p.mode not in MODES:
            raise FailedPrecondition(
                f"policy {p.name or p.prefix!r}: VPP has no {p.mode.value} head-end mode "
                f"(it has {', '.join(sorted(m.value for m in MODES))})"
            )
        self._fib.check_table(p.table)
        key = (p.prefix, p.table)
        held = self.held()
        old = held.get(key)
        if old is None:
            self._check_not_steered_elsewhere(p)
        elif old.policy.routed() == replace(p, name="").routed():
            return
        self._remove_orphans({h.bsid for h in held.values()})
        bsid = self._free_bsid()
        self._create(bsid, p)
        self._api.call(
            "sr_steering_add_del",
            is_del=False,
            bsid_addr=bsid,
            sr_policy_index=NO_INDEX,
            table_id=p.table,
            prefix=p.prefix,
            sw_if_index=NO_INDEX,
            traffic_type=STEER_IPV6,
        )
        if old is not None:
            self._api.call("sr_policy_del", bsid_addr=old.bsid, sr_policy_index=NO_INDEX)
        log.info("policy added prefix=%s table=%s bsid=%s", p.prefix, p.table, bsid)

    def remove(self, p: SrPolicy) -> None:
        held = self.held().get((p.prefix, p.table))
        if held is None:
            return
        self._api.call(
            "sr_steering_add_del",
            is_del=True,
            bsid_addr=held.bsid,
            sr_policy_index=NO_INDEX,
            table_id=p.table,
            prefix=p.prefix,
            sw_if_index=NO_INDEX,
            traffic_type=STEER_IPV6,
        )
        self._api.call("sr_policy_del", bsid_addr=held.bsid, sr_policy_index=NO_INDEX)
        log.info("policy removed prefix=%s table=%s bsid=%s", p.prefix, p.table, held.bsid)

    def _create(self, bsid: IPv6Address, p: SrPolicy) -> None:
        first, *others = p.paths()
        source = self.source(first.segments[0])
        self._api.call(
            "sr_policy_add_v2",
            bsid_addr=bsid,
            weight=first.weight,
            is_encap=p.mode is EncapMode.ENCAP,
            type=POLICY_TYPE_DEFAULT,
            fib_table=BSID_TABLE,
            sids=sid_list(first.segments, first.weight),
            encap_src=source,
        )
        for sl in others:
            self._api.call(
                "sr_policy_mod_v2",
                bsid_addr=bsid,
                sr_policy_index=NO_INDEX,
                fib_table=BSID_TABLE,
                operation=SR_POLICY_OP_ADD,
                sl_index=NO_INDEX,
                weight=sl.weight,
                sids=sid_list(sl.segments, sl.weight),
                encap_src=source,
            )

    def source(self, first_sid: str) -> IPv6Address:
        """The outer source address: the setting, else VPP's own (`set sr encaps source`, as
        the kernel's `ip sr tunsrc`), else an address of the interface toward the first SID
        (as the kernel picks one). :: leaves it to VPP."""
        if self._encap_source:
            return ip6(self._encap_source)
        if self._fib.encaps_source() is not None:
            return IPv6Address("::")
        return self._fib.source_toward(first_sid) or IPv6Address("::")

    def _check_not_steered_elsewhere(self, p: SrPolicy) -> None:
        for steer in self._api.dump("sr_steering_pol_dump"):
            if (
                steer.traffic_type == STEER_IPV6
                and str(steer.prefix) == p.prefix
                and int(steer.fib_table) == p.table
            ):
                raise FailedPrecondition(
                    f"policy {p.name or p.prefix!r}: VPP already steers {p.prefix} (table "
                    f"{p.table}) into BSID {steer.bsid}, which srv6pm did not create"
                )

    def _remove_orphans(self, steered: set[IPv6Address]) -> None:
        for bsid in set(self._lists()) - steered:
            log.warning("removing policy bsid=%s: nothing steers into it", bsid)
            self._api.call("sr_policy_del", bsid_addr=bsid, sr_policy_index=NO_INDEX)

    def _free_bsid(self) -> IPv6Address:
        return free_bsid(self._api, self._range, self._bsids)


def _policy(prefix: str, table: int, details: Any) -> SrPolicy:
    mode = EncapMode.ENCAP if details.is_encap else EncapMode.INLINE
    lists = tuple(
        SegmentList("", tuple(str(s) for s in sl.sids[: sl.num_sids]), int(sl.weight))
        for sl in details.sid_lists[: details.num_sid_lists]
    )
    if len(lists) == 1:
        return SrPolicy("", prefix, lists[0].segments, mode, table=table)
    return SrPolicy("", prefix, (), mode, table=table, segment_lists=lists)
