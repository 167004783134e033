"""Desired state against what the data plane holds: what to add, remove or keep, and what the
node cannot do. Pure functions of the state, the driver's view and its capabilities."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from ..domain.errors import FailedPrecondition
from ..domain.model import (
    REPLY_MARKS,
    Changes,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    ProbeRoute,
    SrPolicy,
)
from ..drivers.base import Capabilities

T = TypeVar("T")


def policy_key(p: SrPolicy) -> Hashable:
    return (p.prefix, p.table)


def _sid_key(s: LocalSid) -> Hashable:
    return (s.sid, s.table)


def _same_policy(want: SrPolicy, have: SrPolicy) -> bool:
    """The same route; no device asked for means any device will do."""
    return replace(want, device=want.device or have.device).routed() == have.routed()


def _same_sid(want: LocalSid, have: LocalSid) -> bool:
    return replace(want, device=want.device or have.device) == have


def _diff(
    desired: Sequence[T],
    actual: Sequence[T],
    key: Callable[[T], Hashable],
    same: Callable[[T, T], bool],
) -> tuple[list[T], list[T], int]:
    """(to add or replace, to remove, unchanged) to turn `actual` into `desired`."""
    have = {key(a): a for a in actual}
    want = {key(d): d for d in desired}
    add = [d for k, d in want.items() if k not in have or not same(d, have[k])]
    remove = [a for k, a in have.items() if k not in want]
    return add, remove, len(want) - len(add)


@dataclass(frozen=True)
class Diff:
    """What turns the data plane's policies, SIDs and flows into the desired ones."""

    pol_add: list[SrPolicy]
    pol_del: list[SrPolicy]
    sid_add: list[LocalSid]
    sid_del: list[LocalSid]
    flow_add: list[MonitoredFlow]
    flow_del: list[MonitoredFlow]
    changes: tuple[Changes, Changes, Changes]  # policies, local SIDs, flows
    route_add: list[ProbeRoute]
    route_del: list[ProbeRoute]


def diff(
    state: NodeState,
    policies: Sequence[SrPolicy],
    sids: Sequence[LocalSid],
    flows: Sequence[MonitoredFlow],
    marking: Marking,
    routes: Sequence[ProbeRoute] = (),
    held_routes: Sequence[ProbeRoute] = (),
) -> Diff:
    """`state` (and the probe steering `routes`) against the policies, SIDs, flows, marking
    (and probe steering) the data plane holds."""
    pol_add, pol_del, pol_same = _diff(state.policies, policies, policy_key, _same_policy)
    sid_add, sid_del, sid_same = _diff(state.local_sids, sids, _sid_key, _same_sid)
    flow_add, flow_del, flow_same = _diff(state.flows, flows, lambda f: f.name, lambda a, b: a == b)
    # A changed flow is removed and added again: its counters start from zero. So is every
    # flow when the marking mode changes: the data plane finds them differently.
    if state.marking.mode != marking.mode:
        flow_add, flow_del, flow_same = list(state.flows), list(flows), 0
    changed = {a.name for a in flow_add}
    flow_del += [f for f in flows if f.name in changed and f not in flow_del]
    route_add, route_del, _ = _diff(
        routes, held_routes, lambda r: (r.mark, r.address), lambda a, b: a == b
    )
    return Diff(
        pol_add,
        pol_del,
        sid_add,
        sid_del,
        flow_add,
        flow_del,
        (
            Changes(len(pol_add), len(pol_del), pol_same),
            Changes(len(sid_add), len(sid_del), sid_same),
            Changes(len(flow_add), len(flow_del), flow_same),
        ),
        route_add,
        route_del,
    )


# Probe steering marks: a range of 2 x 65536 values, configurable (steering_mark_base) so it
# stays clear of other users of packet marks on the host.
DEFAULT_STEERING_MARK_BASE = 0x53520000


def probe_routes(state: NodeState, mark_base: int) -> tuple[ProbeRoute, ...]:
    """STAMP packets share the data's fate: each session's probes are steered into its
    direct SID list, and the replies to each declared sender into its return path (RFC 9503),
    by a mark of their own (`mark_base` + SSID for probes, + 65536 + SSID for replies), so
    any number of segment lists may join the same two addresses. Only declared state makes
    routes: nothing a probe carries does.

    Where every session to (or declared for) a peer address agrees on one SID list, packets
    to it without a mark take that list too (mark 0: a /128 route in table main): a session
    without a SID list of its own, or a third-party sender's SSID, still reaches the peer as
    before several segment lists could join the same addresses."""
    direct = [
        ProbeRoute(mark_base + s.ssid, s.reflector_address, s.direct_segments)
        for s in state.sessions
        if s.direct_segments
    ]
    sessions = state.reflector.sessions if state.reflector.enabled else ()
    back = [
        ProbeRoute(mark_base + REPLY_MARKS + s.ssid, r.sender_address, r.segments)
        for s in sessions
        for r in s.return_paths
    ]
    lists: dict[str, set[tuple[str, ...]]] = {}
    for route in (*direct, *back):
        lists.setdefault(route.address, set()).add(route.segments)
    unmarked = [
        ProbeRoute(0, address, next(iter(agreed)))
        for address, agreed in sorted(lists.items())
        if len(agreed) == 1
    ]
    return (*direct, *back, *unmarked)


def reply_mark(mark_base: int, ssid: int) -> int:
    return mark_base + REPLY_MARKS + ssid


def local_addresses(state: NodeState) -> set[str]:
    """STAMP endpoints' addresses: they must be deliverable after End.DT6 decapsulation."""
    wanted = {s.source_address for s in state.sessions if s.source_address}
    if state.reflector.enabled and state.reflector.address != "::":
        wanted.add(state.reflector.address)
    return wanted


def check_preconditions(state: NodeState, caps: Capabilities, interfaces: frozenset[str]) -> None:
    """FailedPrecondition listing everything in `state` this node cannot do."""
    problems = []
    for p in state.policies:
        if p.mode not in caps.encap_modes:
            problems.append(
                f"policy {p.name!r}: this node's {caps.driver} data plane does not support "
                f"{p.mode.value} encapsulation"
            )
        if p.device and p.device not in interfaces:
            problems.append(f"policy {p.name!r}: interface {p.device!r} does not exist")
    for s in state.local_sids:
        if s.behaviour not in caps.behaviours:
            problems.append(
                f"local SID {s.sid}: this node's {caps.driver} data plane does not support "
                f"{s.behaviour.value} (supported: "
                f"{', '.join(sorted(b.value for b in caps.behaviours))})"
            )
        if s.device and s.device not in interfaces:
            problems.append(f"local SID {s.sid}: interface {s.device!r} does not exist")
    missing = sorted(set(state.marking.boundary_interfaces) - interfaces)
    if missing:
        problems.append(f"boundary interface(s) {', '.join(missing)} do not exist")
    for f in state.flows:
        missing = sorted(set(f.interfaces) - interfaces)
        if missing:
            problems.append(f"flow {f.name!r}: interface(s) {', '.join(missing)} do not exist")
    if len(state.flows) > caps.max_flows:
        problems.append(f"{len(state.flows)} flows exceed this node's {caps.max_flows}")
    if problems:
        raise FailedPrecondition("; ".join(problems))
