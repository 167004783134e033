"""Domain values as response bodies, with where each object stands on its nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..domain.model import Fleet, LocalSid, Node, Policy, Session
from ..domain.paths import path
from ..service.fleet import NodeStatus
from . import schemas


def status(nodes: Iterable[str], revision: int, held: Mapping[str, NodeStatus]) -> schemas.Status:
    """Applied when every node took a state at least as new as the object; failed when one of
    the others failed (with its message); pending otherwise."""
    names = list(dict.fromkeys(nodes))
    states = {n: held[n].of(revision) if n in held else ("pending", "") for n in names}
    failed = [f"{n}: {message}" for n, (state, message) in states.items() if state == "failed"]
    if failed:
        return schemas.Status(
            state="failed", message="; ".join(failed), revision=revision, nodes=names
        )
    done = all(state == "applied" for state, _ in states.values())
    return schemas.Status(state="applied" if done else "pending", revision=revision, nodes=names)


def node(n: Node, revision: int, held: Mapping[str, NodeStatus]) -> schemas.NodeOut:
    info = n.info
    return schemas.NodeOut(
        name=n.name,
        endpoint=n.endpoint,
        probe_address=n.probe_address or None,
        core_interfaces=list(n.core_interfaces),
        boundary_interfaces=list(n.boundary_interfaces),
        reachable=held[n.name].reachable if n.name in held else None,
        info=schemas.NodeInfoOut(
            driver=info.driver,
            version=info.version,
            period_s=info.period_ns / 1e9,
            interfaces=list(info.interfaces),
            behaviours=list(info.behaviours),
            encap_modes=list(info.encap_modes),
            max_flows=info.max_flows,
            max_segments=info.max_segments,
            warnings=list(info.warnings),
        )
        if info
        else None,
        last_attempt=held[n.name].attempted_at if n.name in held else None,
        status=status([n.name], revision, held),
    )


def local_sid(s: LocalSid, revision: int, held: Mapping[str, NodeStatus]) -> schemas.LocalSidOut:
    return schemas.LocalSidOut(
        sid=s.sid,
        node=s.node,
        behaviour=s.behaviour,
        nexthop=s.nexthop or None,
        lookup_table=s.lookup_table,
        device=s.device,
        table=s.table,
        status=status([s.node], revision, held),
    )


def policy(
    p: Policy, revision: int, fleet: Fleet, held: Mapping[str, NodeStatus]
) -> schemas.PolicyOut:
    nodes = path(p, fleet)
    return schemas.PolicyOut(
        name=p.name,
        head_node=p.head_node,
        tail_node=p.tail_node,
        segments=list(p.segments),
        prefix=p.prefix,
        encap_mode=p.encap_mode,
        device=p.device,
        table=p.table,
        flow_mon_id=p.flow_mon_id,
        path=list(nodes),
        status=status(nodes, revision, held),
    )


def session(
    s: Session, revision: int, fleet: Fleet, held: Mapping[str, NodeStatus]
) -> schemas.SessionOut:
    forward, back = fleet.policies[s.policy], fleet.policies[s.return_policy]
    paths = {"forward": list(path(forward, fleet)), "reverse": list(path(back, fleet))}
    info = fleet.nodes[forward.head_node].info
    return schemas.SessionOut(
        name=s.name,
        policy=s.policy,
        return_policy=s.return_policy,
        delay_interval_ms=s.delay_interval_ms,
        authenticated=bool(s.hmac_key),
        ssid=s.ssid,
        sender_node=forward.head_node,
        reflector_node=forward.tail_node,
        flow_mon_ids={"forward": forward.flow_mon_id, "reverse": back.flow_mon_id},
        path=paths,
        marking_mode=fleet.marking_mode,
        period_s=info.period_ns / 1e9 if info else None,
        status=status(paths["forward"] + paths["reverse"], revision, held),
    )
