"""Where a policy's packets go, and whether policies and sessions make sense in the domain.

A segment list's path is its policy's head-end, then the node holding each SID in travel order
(RFC 8986: a SID is a route to one node's local behaviour). Those are the nodes that can count
the flow, so loss is localised to the segments between them. Each segment list of a policy is a
path of its own.
"""

from __future__ import annotations

from .errors import Conflict, Invalid
from .measured import check_measurement, legs, measurement, return_list
from .model import MAX_WEIGHT, Fleet, Policy, Profile, SegmentList, Session


def path(policy: Policy, fleet: Fleet, sl: SegmentList | None = None) -> tuple[str, ...]:
    """The nodes that can count a segment list's packets (default: the policy's first),
    head-end first."""
    nodes = [policy.head_node]
    for sid in (sl or policy.segment_lists[0]).segments:
        owner = fleet.sids[sid].node
        if owner != nodes[-1]:
            nodes.append(owner)
    return tuple(nodes)


def check_policy(policy: Policy, fleet: Fleet) -> None:
    """Raise Invalid / Conflict unless `policy` can be installed in `fleet` (others as they are)."""
    for role, node in (("head", policy.head_node), ("tail", policy.tail_node)):
        if node not in fleet.nodes:
            raise Invalid(f"{role} node {node!r} does not exist")
    if policy.head_node == policy.tail_node:
        raise Invalid("head and tail node are the same node")
    _check_lists(policy)
    for sl in policy.segment_lists:
        _check_segment_list(policy, sl, fleet)
    mine = {sl.segments: sl.name for sl in policy.segment_lists}
    for other in fleet.policies.values():
        if other.name == policy.name or other.head_node != policy.head_node:
            continue
        if other.prefix == policy.prefix and other.table == policy.table:
            raise Conflict(
                f"policy {other.name} already steers {policy.prefix} at {policy.head_node}"
            )
        for sl in other.segment_lists:
            if sl.segments in mine:
                raise Conflict(
                    f"policy {other.name} has the same SID list at {policy.head_node}"
                    f"{_which(policy, mine[sl.segments])}: a head-end tells monitored flows "
                    "apart by their SID list"
                )


def _which(policy: Policy, name: str) -> str:
    return f" (segment list {name})" if len(policy.segment_lists) > 1 else ""


def _check_lists(policy: Policy) -> None:
    """Several segment lists: each named once, each SID list once, weights in range, and an
    encapsulation the data plane can hash over (a multipath route of seg6 encaps)."""
    lists = policy.segment_lists
    if not lists:
        raise Invalid("a policy needs at least one segment list")
    names = [sl.name for sl in lists]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise Invalid(f"segment list names {', '.join(twice)} are given more than once")
    seen: dict[tuple[str, ...], str] = {}
    for sl in lists:
        if sl.segments in seen:
            raise Invalid(
                f"segment lists {seen[sl.segments]} and {sl.name} have the same SIDs: each "
                "segment list is a measured path of its own"
            )
        seen[sl.segments] = sl.name
        if not 1 <= sl.weight <= MAX_WEIGHT:
            raise Invalid(f"segment list {sl.name}: weight {sl.weight} is not 1 to {MAX_WEIGHT}")
    if len(lists) > 1 and not policy.encap_mode.encapsulates:
        raise Invalid(
            f"{policy.encap_mode.value} cannot hash flows over several segment lists: use "
            "encap or encap-red"
        )


def _check_segment_list(policy: Policy, sl: SegmentList, fleet: Fleet) -> None:
    at = f" in segment list {sl.name}" if len(policy.segment_lists) > 1 else ""
    unknown = [s for s in sl.segments if s not in fleet.sids]
    if unknown:
        raise Invalid(
            f"SIDs {', '.join(unknown)}{at} are not local SIDs of any node: add them "
            "(/v1/local-sids) so the controller knows which node each one reaches"
        )
    last = fleet.sids[sl.segments[-1]]
    if last.node != policy.tail_node:
        raise Invalid(
            f"the last SID {last.sid}{at} is on node {last.node}, not on the tail node "
            f"{policy.tail_node}"
        )
    if policy.encap_mode.encapsulates and not last.behaviour.decapsulates:
        raise Invalid(
            f"the last SID {last.sid}{at} is {last.behaviour.value} on {last.node}: an "
            "encapsulating policy must end at a decapsulating SID (End.DT4/DT6/DT46/DX4/DX6) "
            "of its tail node"
        )
    for sid in sl.segments[:-1]:
        if fleet.sids[sid].behaviour.decapsulates:
            raise Invalid(
                f"SID {sid}{at} ({fleet.sids[sid].behaviour.value}) decapsulates before the end "
                "of the SID list: the SIDs after it would never be visited"
            )
    nodes = path(policy, fleet, sl)
    twice = sorted({n for n in nodes if nodes.count(n) > 1})
    if twice:
        raise Invalid(
            f"the path {' -> '.join(nodes)}{at} visits {', '.join(twice)} more than once: a "
            "node holds one role per monitored flow"
        )


def check_profile(profile: Profile) -> None:
    """Raise Invalid unless a profile's settings make sense together (the sessions naming it
    are checked with their own overrides and their nodes' block periods)."""
    check_measurement(profile.measurement, f"profile {profile.name}")


def check_settings(session: Session, fleet: Fleet) -> None:
    """Raise Invalid unless the session's settings in effect (its own, else its profile's) are
    what its sender's node manager accepts, block period included."""
    info = fleet.nodes[fleet.policies[session.policy].head_node].info
    check_measurement(
        measurement(session, fleet),
        f"session {session.name}" + (f" (profile {session.profile})" if session.profile else ""),
        info.period_ns if info and info.period_ns else None,
    )


def check_session(session: Session, fleet: Fleet) -> None:
    """Raise Invalid / Conflict unless `session` can run in `fleet` (others as they are).

    Probes and replies are steered into their segment list by a mark per SSID on the node
    managers, so any number of sessions may run between the same two nodes, on any policies."""
    for what in (session.policy, session.return_policy):
        if what not in fleet.policies:
            raise Invalid(f"policy {what!r} does not exist")
    if session.profile and session.profile not in fleet.profiles:
        raise Invalid(f"profile {session.profile!r} does not exist")
    forward = fleet.policies[session.policy]
    back = fleet.policies[session.return_policy]
    if (back.head_node, back.tail_node) != (forward.tail_node, forward.head_node):
        raise Invalid(
            f"return policy {back.name} goes {back.head_node} -> {back.tail_node}: it must go "
            f"back from {forward.tail_node} to {forward.head_node}"
        )
    probed = {leg.segment_list.name for leg in legs(session, fleet)}
    return_list(session, fleet)
    for node in (forward.head_node, forward.tail_node):
        if not fleet.nodes[node].probe_address:
            raise Invalid(
                f"node {node} has no probe_address: STAMP needs one at both ends of a session"
            )
    check_settings(session, fleet)
    for other in fleet.sessions.values():
        if other.name == session.name:
            continue
        if other.policy == session.policy:
            # one sender per segment list: two would report the same flow's loss twice
            theirs = {leg.segment_list.name for leg in legs(other, fleet)}
            both = sorted(probed & theirs)
            if both:
                what = (
                    f"segment list {', '.join(both)} of policy {session.policy}"
                    if len(forward.segment_lists) > 1
                    else f"policy {session.policy}"
                )
                raise Conflict(f"session {other.name} already measures {what}")
        reflector = fleet.policies[other.policy].tail_node
        if reflector == forward.tail_node and other.hmac_key != session.hmac_key:
            raise Invalid(
                f"session {other.name} is reflected by {reflector} with "
                f"{'another' if other.hmac_key else 'no'} HMAC key: a node's Session-Reflector "
                "has one key, so every session it reflects must use the same"
            )
