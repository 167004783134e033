"""Where a policy's packets go, and whether policies and sessions make sense in the domain.

A policy's path is its head-end, then the node holding each SID in travel order (RFC 8986: a SID
is a route to one node's local behaviour). Those are the nodes that can count the flow, so loss is
localised to the segments between them.
"""

from __future__ import annotations

from .errors import Conflict, Invalid
from .model import Fleet, Policy, Session


def path(policy: Policy, fleet: Fleet) -> tuple[str, ...]:
    """The nodes a policy's packets visit that can count them, head-end first."""
    nodes = [policy.head_node]
    for sid in policy.segments:
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
    unknown = [s for s in policy.segments if s not in fleet.sids]
    if unknown:
        raise Invalid(
            f"SIDs {', '.join(unknown)} are not local SIDs of any node: add them "
            "(/v1/local-sids) so the controller knows which node each one reaches"
        )
    last = fleet.sids[policy.segments[-1]]
    if last.node != policy.tail_node:
        raise Invalid(
            f"the last SID {last.sid} is on node {last.node}, not on the tail node "
            f"{policy.tail_node}"
        )
    if policy.encap_mode.encapsulates and not last.behaviour.decapsulates:
        raise Invalid(
            f"the last SID {last.sid} is {last.behaviour.value} on {last.node}: an encapsulating "
            "policy must end at a decapsulating SID (End.DT4/DT6/DT46/DX4/DX6) of its tail node"
        )
    for sid in policy.segments[:-1]:
        if fleet.sids[sid].behaviour.decapsulates:
            raise Invalid(
                f"SID {sid} ({fleet.sids[sid].behaviour.value}) decapsulates before the end of "
                "the SID list: the SIDs after it would never be visited"
            )
    nodes = path(policy, fleet)
    twice = sorted({n for n in nodes if nodes.count(n) > 1})
    if twice:
        raise Invalid(
            f"the path {' -> '.join(nodes)} visits {', '.join(twice)} more than once: a node "
            "holds one role per monitored flow"
        )
    for other in fleet.policies.values():
        if other.name == policy.name or other.head_node != policy.head_node:
            continue
        if other.prefix == policy.prefix and other.table == policy.table:
            raise Conflict(
                f"policy {other.name} already steers {policy.prefix} at {policy.head_node}"
            )
        if other.segments == policy.segments:
            raise Conflict(
                f"policy {other.name} has the same SID list at {policy.head_node}: a head-end "
                "tells monitored flows apart by their SID list"
            )


def check_session(session: Session, fleet: Fleet) -> None:
    """Raise Invalid / Conflict unless `session` can run in `fleet` (others as they are)."""
    for what in (session.policy, session.return_policy):
        if what not in fleet.policies:
            raise Invalid(f"policy {what!r} does not exist")
    forward = fleet.policies[session.policy]
    back = fleet.policies[session.return_policy]
    if (back.head_node, back.tail_node) != (forward.tail_node, forward.head_node):
        raise Invalid(
            f"return policy {back.name} goes {back.head_node} -> {back.tail_node}: it must go "
            f"back from {forward.tail_node} to {forward.head_node}"
        )
    for node in (forward.head_node, forward.tail_node):
        if not fleet.nodes[node].probe_address:
            raise Invalid(
                f"node {node} has no probe_address: STAMP needs one at both ends of a session"
            )
    routes = dict(stamp_routes(session, fleet))
    for other in fleet.sessions.values():
        if other.name == session.name:
            continue
        for (node, address), segments in stamp_routes(other, fleet):
            if routes.get((node, address), segments) != segments:
                raise Conflict(
                    f"session {other.name} already steers STAMP traffic from {node} to "
                    f"{address} into another SID list: probes and replies are routed by "
                    "destination, so sessions between the same two nodes must use the same "
                    "policies"
                )
        if other.policy == session.policy:
            raise Conflict(f"session {other.name} already measures policy {session.policy}")
        reflector = fleet.policies[other.policy].tail_node
        if reflector == forward.tail_node and other.hmac_key != session.hmac_key:
            raise Invalid(
                f"session {other.name} is reflected by {reflector} with "
                f"{'another' if other.hmac_key else 'no'} HMAC key: a node's Session-Reflector "
                "has one key, so every session it reflects must use the same"
            )


def stamp_routes(session: Session, fleet: Fleet) -> list[tuple[tuple[str, str], tuple[str, ...]]]:
    """The /128 routes a session needs: ((node, destination), SID list) for its probes at the
    sender and its replies at the reflector."""
    forward = fleet.policies[session.policy]
    back = fleet.policies[session.return_policy]
    sender, reflector = fleet.nodes[forward.head_node], fleet.nodes[forward.tail_node]
    return [
        ((sender.name, reflector.probe_address), forward.segments),
        ((reflector.name, sender.probe_address), back.segments),
    ]
