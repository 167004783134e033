"""Domain values as response bodies, with where each object stands on its nodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..domain.measured import legs, measurement, return_list
from ..domain.model import (
    DelayThresholds,
    Fleet,
    LivenessSettings,
    LocalSid,
    Measurement,
    Node,
    Policy,
    Profile,
    Session,
)
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
    lists = [
        schemas.SegmentListOut(
            name=sl.name,
            segments=list(sl.segments),
            weight=sl.weight,
            flow_mon_id=sl.flow_mon_id,
            flow=p.flow_name(sl),
            path=list(path(p, fleet, sl)),
        )
        for sl in p.segment_lists
    ]
    only = lists[0] if len(lists) == 1 else None
    return schemas.PolicyOut(
        name=p.name,
        head_node=p.head_node,
        tail_node=p.tail_node,
        segments=only.segments if only else [],
        segment_lists=lists,
        prefix=p.prefix,
        encap_mode=p.encap_mode,
        device=p.device,
        table=p.table,
        protection=p.protection,
        flow_mon_id=only.flow_mon_id if only else None,
        path=lists[0].path,
        status=status((n for sl in lists for n in sl.path), revision, held),
    )


def liveness(settings: LivenessSettings) -> schemas.LivenessOut:
    return schemas.LivenessOut(**dataclasses.asdict(settings))


def thresholds(t: DelayThresholds) -> schemas.DelayThresholdsOut:
    return schemas.DelayThresholdsOut(**{**dataclasses.asdict(t), "metrics": list(t.metrics)})


def settings(m: Measurement) -> dict[str, Any]:
    """A measurement's fields as response fields (a profile's, or a session's in effect)."""
    return {
        "delay_interval_ms": m.delay_interval_ms,
        "liveness": liveness(m.liveness),
        "histogram_edges_us": list(m.histogram_edges_us),
        "burst_size": m.burst_size,
        "computation_interval_ms": m.computation_interval_ms,
        "thresholds": thresholds(m.thresholds),
        "loss": m.loss,
    }


def profile(p: Profile, revision: int, users: list[str]) -> schemas.ProfileOut:
    return schemas.ProfileOut(
        name=p.name, **settings(p.measurement), revision=revision, sessions=users
    )


def session(
    s: Session, revision: int, fleet: Fleet, held: Mapping[str, NodeStatus]
) -> schemas.SessionOut:
    forward, back = fleet.policies[s.policy], fleet.policies[s.return_policy]
    back_sl = return_list(s, fleet)
    reverse = list(path(back, fleet, back_sl))
    probed = [
        schemas.ProbedListOut(
            segment_list=leg.segment_list.name,
            ssid=leg.ssid,
            sender=leg.sender_name,
            flow_mon_ids={"forward": leg.segment_list.flow_mon_id, "reverse": back_sl.flow_mon_id},
            path={"forward": list(path(forward, fleet, leg.segment_list)), "reverse": reverse},
        )
        for leg in legs(s, fleet)
    ]
    only = probed[0] if len(probed) == 1 else None
    in_effect = measurement(s, fleet)
    info = fleet.nodes[forward.head_node].info
    nodes = [n for leg in probed for n in leg.path["forward"]] + reverse
    return schemas.SessionOut(
        name=s.name,
        policy=s.policy,
        segment_list=s.segment_list or None,
        return_policy=s.return_policy,
        return_segment_list=back_sl.name,
        profile=s.profile or None,
        **settings(in_effect),
        authenticated=bool(s.hmac_key),
        ssid=only.ssid if only else None,
        segment_lists=probed,
        sender_node=forward.head_node,
        reflector_node=forward.tail_node,
        flow_mon_ids=only.flow_mon_ids if only else None,
        path=only.path if only else None,
        marking_mode=fleet.marking_mode,
        period_s=info.period_ns / 1e9 if info else None,
        status=status(nodes, revision, held),
    )
