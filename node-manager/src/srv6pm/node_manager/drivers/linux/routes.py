"""SR policies (seg6 lwtunnel routes) and local SIDs (seg6local routes) through netlink.

Every route the node manager creates carries its own routing protocol number, RTPROT_SRV6PM; it
lists and deletes only routes with that number, so state it did not create is never touched.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.rtmsg import rtmsg
from srv6pm.common.srv6 import Behaviour, EncapMode

from ...domain.errors import FailedPrecondition
from ...domain.model import LocalSid, ProbeRoute, SegmentList, SrPolicy

log = logging.getLogger(__name__)

RTPROT_SRV6PM = 201  # unassigned in iproute2's rt_protos; shown by `ip route` as "proto 201"
MAIN_TABLE = 254
AF_INET6 = 10
RTN_LOCAL = 2
PROBE_TABLE = 0x5336  # private table used once at start to learn what the kernel accepts
LWTUNNEL_ENCAP_SEG6 = 5  # linux/lwtunnel.h
# Probe steering (ProbeRoute): routes and rules of their own protocol number; each mark is also
# its table's number. Rules just before main's: a guard sends unmarked packets past the
# sessions' rules to a no-op anchor.
RTPROT_SRV6PM_STEERING = 202
PROBE_GUARD_PRIORITY, PROBE_RULE_PRIORITY, PROBE_ANCHOR_PRIORITY = 32000, 32001, 32002
STEERING_MASK = 0xFFFE0000  # the 131072 marks from an aligned base
FR_ACT_GOTO, FR_ACT_NOP = 2, 3  # linux/fib_rules.h
FIB_RULE_INVERT = 0x2

# pyroute2 0.9 encodes only "encap" and "inline"; the kernel's uapi (linux/seg6_iptunnel.h)
# numbers the other head-end modes.
_SRH = rtmsg.seg6_encap_info.ipv6_sr_hdr
_SRH.encapmodes = {**_SRH.encapmodes, "l2encap": 2, "encap.red": 3}
_SRH.r_encapmodes = {v: k for k, v in _SRH.encapmodes.items()}
_ACTION_NAMES = {v: k for k, v in rtmsg.seg6local_encap_info.action.actions.items()}

# srv6pm's head-end modes and behaviours by the kernel's names (iproute2's): the kernel says
# "encap.red" for H.Encaps.Red; its seg6local action names are the RFC's.
KERNEL_MODES = {
    EncapMode.ENCAP: "encap",
    EncapMode.ENCAP_RED: "encap.red",
    EncapMode.INLINE: "inline",
    EncapMode.L2ENCAP: "l2encap",
}
KERNEL_ACTIONS = {b: b.value for b in Behaviour}
_MODES = {v: k for k, v in KERNEL_MODES.items()}
_BEHAVIOURS = {v: k for k, v in KERNEL_ACTIONS.items()}


def _table(table: int) -> int:
    return table or MAIN_TABLE


class Routes:
    """Policies and local SIDs of one network namespace."""

    def __init__(self, ipr: IPRoute) -> None:
        self._ipr = ipr

    def ifindex(self, name: str) -> int:
        found = self._ipr.link_lookup(ifname=name)
        if not found:
            raise FailedPrecondition(f"interface {name!r} does not exist on this node")
        return int(found[0])

    def interfaces(self) -> frozenset[str]:
        return frozenset(self._ifnames().values())

    def _ifnames(self) -> dict[int, str]:
        """Interface names by index, from one link dump."""
        return {int(link["index"]): str(link.get("ifname")) for link in self._ipr.get_links()}

    def _owned(self) -> Iterator[Any]:
        yield from self._ipr.get_routes(family=AF_INET6, proto=RTPROT_SRV6PM, table=None)

    # ---- policies ----------------------------------------------------------------------------

    def policies(self) -> list[SrPolicy]:
        found = []
        names = self._ifnames()
        for route in self._owned():
            prefix = f"{route.get('dst')}/{route['dst_len']}"
            table = _canon_table(route.get("table"))
            hops = route.get("multipath")
            if hops:
                lists = [_srh(h.get_attr("RTA_ENCAP"), h["hops"] + 1) for h in hops]
                held = [sl for sl in lists if sl is not None]
                if held and len(held) == len(lists):
                    found.append(
                        SrPolicy(
                            name="",
                            prefix=prefix,
                            segments=(),
                            mode=held[0][0],
                            table=table,
                            segment_lists=tuple(SegmentList("", s, w) for _, s, w in held),
                        )
                    )
                continue
            single = _srh(route.get("encap"), 1)
            if single is None:
                continue
            mode, segs, _ = single
            found.append(
                SrPolicy(
                    name="",
                    prefix=prefix,
                    segments=segs,
                    mode=mode,
                    device=names.get(int(route.get("oif")), ""),
                    table=table,
                )
            )
        return found

    def add_policy(self, p: SrPolicy) -> None:
        if p.segment_lists:
            self._route(
                "replace",
                dst=p.prefix,
                table=_table(p.table),
                multipath=[self._hop(sl, p.mode) for sl in p.segment_lists],
            )
            return
        self._route(
            "replace",
            dst=p.prefix,
            oif=self.ifindex(p.device) if p.device else self._toward(p.segments[0]),
            table=_table(p.table),
            encap=_seg6(p.mode, p.segments),
        )

    def _hop(self, sl: SegmentList, mode: EncapMode) -> dict[str, Any]:
        """One next hop of a multipath policy. The kernel wants a gateway for each (it has no
        multipath of device routes in IPv6), though the encapsulated packet is routed again
        by its new destination: the gateway toward the first SID is the honest one."""
        gateway, oif = self._gateway_toward(sl.segments[0])
        encap = _seg6(mode, sl.segments)
        return {
            "oif": oif,
            "hops": sl.weight - 1,
            "attrs": [
                ["RTA_GATEWAY", gateway],
                ["RTA_ENCAP_TYPE", LWTUNNEL_ENCAP_SEG6],
                # pyroute2 0.9 encodes a next hop's encapsulation only for MPLS: given raw
                ["RTA_ENCAP", {"attrs": [["SEG6_IPTUNNEL_SRH", encap]]}],
            ],
        }

    def remove_policy(self, p: SrPolicy) -> None:
        self._delete(dst=p.prefix, table=_table(p.table))

    # ---- probe steering ----------------------------------------------------------------------

    def probe_routes(self) -> list[ProbeRoute]:
        """The steering routes whose mark has its rule: one left without (a crash between the
        two) is not held, so the next apply makes both again."""
        ruled = self._rule_marks() | {0}
        return [r for r in self._steering_routes() if r.mark in ruled]

    def update_probe_routes(self, add: Iterable[ProbeRoute], remove: Iterable[ProbeRoute]) -> None:
        """Packets carrying mark M to an address take a SID list: a /128 route in table M, and
        a rule sending M there (mark 0: the route in table main, no rule). Other destinations
        fall through the table to the next rules, so only probes and replies are steered. One
        dump of routes and one of rules whatever the number of sessions."""
        for r in remove:
            try:
                self._steering_route("del", r)
            except NetlinkError as e:
                if e.code != errno.ESRCH:
                    raise
        for r in add:
            self._steering_route("replace", r, oif=self._toward(r.segments[0]))
        ruled = self._rule_marks()
        routed = {r.mark for r in self._steering_routes()} - {0}
        for mark in sorted(routed - ruled):
            self._guard(mark & STEERING_MASK)
            self._rule("add", fwmark=mark, fwmask=0xFFFFFFFF, table=mark)
        for mark in sorted(ruled - routed):
            with contextlib.suppress(NetlinkError):
                self._rule("del", fwmark=mark, fwmask=0xFFFFFFFF, table=mark)
        if not routed:  # the guard and its anchor go with the last session
            for rule in self._steering_rules():
                with contextlib.suppress(NetlinkError):
                    self._ipr.rule("del", family=AF_INET6, priority=rule.get("priority"))

    def _steering_route(self, command: str, r: ProbeRoute, **kwargs: Any) -> None:
        self._ipr.route(
            command,
            family=AF_INET6,
            proto=RTPROT_SRV6PM_STEERING,
            dst=f"{r.address}/128",
            table=_table(r.mark),
            encap=_seg6(EncapMode.ENCAP, r.segments),
            **kwargs,
        )

    def _steering_routes(self) -> list[ProbeRoute]:
        found = []
        routes = self._ipr.get_routes(family=AF_INET6, proto=RTPROT_SRV6PM_STEERING, table=None)
        for route in routes:
            single = _srh(route.get("encap"), 1)
            if single is not None:
                mark = _canon_table(route.get("table"))  # main (0): the unmarked route
                found.append(ProbeRoute(mark, str(route.get("dst")), single[1]))
        return found

    def _guard(self, base: int) -> None:
        """Packets without a steering mark (every data packet) skip the session rules in one
        step: a goto past them to a no-op anchor, so forwarding never pays for their number."""
        held = {rule.get("priority") for rule in self._steering_rules()}
        if PROBE_ANCHOR_PRIORITY not in held:
            self._rule("add", priority=PROBE_ANCHOR_PRIORITY, action=FR_ACT_NOP)
        if PROBE_GUARD_PRIORITY not in held:
            self._rule(
                "add",
                priority=PROBE_GUARD_PRIORITY,
                action=FR_ACT_GOTO,
                goto=PROBE_ANCHOR_PRIORITY,
                fwmark=base,
                fwmask=STEERING_MASK,
                flags=FIB_RULE_INVERT,
            )

    def _rule(self, command: str, **kwargs: Any) -> None:
        kwargs.setdefault("priority", PROBE_RULE_PRIORITY)
        self._ipr.rule(command, family=AF_INET6, protocol=RTPROT_SRV6PM_STEERING, **kwargs)

    def _steering_rules(self) -> list[Any]:
        return [
            rule
            for rule in self._ipr.get_rules(family=AF_INET6)
            if rule.get("protocol") == RTPROT_SRV6PM_STEERING
        ]

    def _rule_marks(self) -> set[int]:
        return {
            int(rule.get("fwmark"))
            for rule in self._steering_rules()
            if rule.get("priority") == PROBE_RULE_PRIORITY
        }

    # ---- local SIDs --------------------------------------------------------------------------

    def local_sids(self) -> list[LocalSid]:
        found = []
        names = self._ifnames()
        for route in self._owned():
            encap = route.get("encap")
            action = encap.get("SEG6_LOCAL_ACTION") if encap else None
            if action is None:
                continue
            behaviour = _BEHAVIOURS[_ACTION_NAMES[action]]
            nexthop = encap.get("SEG6_LOCAL_NH6") or encap.get("SEG6_LOCAL_NH4") or ""
            lookup = encap.get("SEG6_LOCAL_TABLE") or encap.get("SEG6_LOCAL_VRFTABLE") or 0
            dev = names.get(int(route.get("oif")), "")
            found.append(
                LocalSid(
                    sid=str(route.get("dst")),
                    behaviour=behaviour,
                    nexthop=str(nexthop),
                    lookup_table=int(lookup),
                    device=dev,
                    table=_canon_table(route.get("table")),
                )
            )
        return found

    def add_local_sid(self, s: LocalSid) -> None:
        self._route(
            "replace",
            dst=f"{s.sid}/128",
            oif=self.ifindex(s.device) if s.device else self._any_interface(),
            table=_table(s.table),
            encap=_seg6local(s),
        )

    def remove_local_sid(self, s: LocalSid) -> None:
        self._delete(dst=f"{s.sid}/128", table=_table(s.table))

    def _toward(self, address: str) -> int:
        """The interface the kernel would send to `address` through."""
        return self._gateway_toward(address)[1]

    def _gateway_toward(self, address: str) -> tuple[str, int]:
        """The next hop (gateway, or `address` itself on a link) and interface toward it."""
        try:
            route = self._ipr.route("get", dst=address)[0]
        except NetlinkError:
            raise FailedPrecondition(
                f"no route to the first SID {address}: name a device"
            ) from None
        return str(route.get("gateway") or address), int(route.get("oif"))

    def _any_interface(self) -> int:
        """A route via the loopback device is a reject route in IPv6: pick an up interface."""
        for link in sorted(self._ipr.get_links(), key=lambda link: int(link["index"])):
            if link.get("ifname") != "lo" and link.get("operstate") == "UP":
                return int(link["index"])
        raise FailedPrecondition("no interface is up to hold local SID routes: name a device")

    # ---- local delivery ----------------------------------------------------------------------

    def local_addresses(self) -> set[str]:
        """Our `local` routes in table main: End.DT6 (table main) decapsulates and looks the
        inner destination up there only, never in the local table, so an address a STAMP
        endpoint listens on needs one to be delivered."""
        return {
            str(r.get("dst"))
            for r in self._owned()
            if r["type"] == RTN_LOCAL and _canon_table(r.get("table")) == 0
        }

    def add_local_address(self, address: str) -> None:
        self._route(
            "replace",
            dst=f"{address}/128",
            type=RTN_LOCAL,
            oif=self.ifindex("lo"),
            table=MAIN_TABLE,
        )

    def remove_local_address(self, address: str) -> None:
        self._delete(dst=f"{address}/128", type=RTN_LOCAL, table=MAIN_TABLE)

    # ---- capability probe --------------------------------------------------------------------

    def probe(self) -> tuple[frozenset[Behaviour], frozenset[EncapMode]]:
        """Which behaviours and modes this kernel accepts, tried in a private table."""
        behaviours = set()
        for i, b in enumerate(Behaviour):
            sid = LocalSid(f"fc00:ffff:ffff::{i + 1:x}", b, *_probe_args(b), table=PROBE_TABLE)
            if self._try(lambda s=sid: self.add_local_sid(s)):
                behaviours.add(b)
                self.remove_local_sid(sid)
        modes = set()
        for i, m in enumerate(EncapMode):
            pol = SrPolicy(
                "", f"fc00:ffff:fffe:{i + 1:x}::/64", ("fc00:ffff::1",), m, "lo", PROBE_TABLE
            )  # only probed, never used: lo is fine here
            if self._try(lambda p=pol: self.add_policy(p)):
                modes.add(m)
                self.remove_policy(pol)
        return frozenset(behaviours), frozenset(modes)

    @staticmethod
    def _try(action: Any) -> bool:
        """Does the kernel accept `action`? A refusal for lack of memory or buffers says nothing
        of support (seen when many node managers start at once): it is retried, not taken as
        "unsupported" for the node manager's whole life."""
        for attempt in range(PROBE_ATTEMPTS):
            try:
                action()
            except NetlinkError as e:
                if e.code in TRANSIENT_ERRNOS and attempt + 1 < PROBE_ATTEMPTS:
                    time.sleep(0.05 * 2**attempt)
                    continue
                log.info("kernel refused probe: %s", e)
                return False
            return True
        return False

    # ---- netlink -----------------------------------------------------------------------------

    def _route(self, command: str, **kwargs: Any) -> None:
        self._ipr.route(command, family=AF_INET6, proto=RTPROT_SRV6PM, **kwargs)

    def _delete(self, **kwargs: Any) -> None:
        try:
            self._route("del", **kwargs)
        except NetlinkError as e:
            if e.code != errno.ESRCH:
                raise


PROBE_ATTEMPTS = 6  # 0.05 s doubling: about 1.5 s in all
TRANSIENT_ERRNOS = frozenset({errno.ENOMEM, errno.ENOBUFS, errno.EAGAIN, errno.EBUSY})


def _seg6(mode: EncapMode, segments: tuple[str, ...]) -> dict[str, Any]:
    """seg6 encapsulation; pyroute2 packs the list as given, so in SRH order."""
    return {"type": "seg6", "mode": KERNEL_MODES[mode], "segs": list(reversed(segments))}


def _srh(encap: Any, weight: int) -> tuple[EncapMode, tuple[str, ...], int] | None:
    """(mode, SID list in travel order, weight) of a seg6 encapsulation, None if not one."""
    srh = encap.get("SEG6_IPTUNNEL_SRH") if encap else None
    if not srh:
        return None
    mode = _MODES[srh["mode"]]
    segs = [s for s in srh["segs"] if s != "::"] if mode is EncapMode.INLINE else srh["segs"]
    return mode, tuple(reversed(segs)), weight


def _canon_table(table: int | None) -> int:
    return 0 if table in (None, MAIN_TABLE) else int(table)


def _probe_args(b: Behaviour) -> tuple[str, int]:
    if b in (Behaviour.END_X, Behaviour.END_DX6):
        return "fc00:ffff::2", 0
    if b is Behaviour.END_DX4:
        return "192.0.2.1", 0
    if b in (Behaviour.END_T, Behaviour.END_DT4, Behaviour.END_DT6, Behaviour.END_DT46):
        return "", MAIN_TABLE
    return "", 0


def _seg6local(s: LocalSid) -> dict[str, Any]:
    encap: dict[str, Any] = {"type": "seg6local", "action": KERNEL_ACTIONS[s.behaviour]}
    if s.behaviour in (Behaviour.END_X, Behaviour.END_DX6):
        encap["nh6"] = s.nexthop
    elif s.behaviour is Behaviour.END_DX4:
        encap["nh4"] = s.nexthop
    elif s.behaviour in (Behaviour.END_T, Behaviour.END_DT6):
        encap["table"] = s.lookup_table
    elif s.behaviour in (Behaviour.END_DT4, Behaviour.END_DT46):
        encap["vrf_table"] = s.lookup_table  # the kernel decapsulates into a VRF for these
    return encap
