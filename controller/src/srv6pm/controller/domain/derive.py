"""Each node's NodeState (the node-manager contract) from the domain's desired state.

A policy that a session measures (forward or return) is a monitored flow named after the policy,
with the policy's FlowMonID: INGRESS at its head-end, TRANSIT at each SID's node, EGRESS at its
tail. The session's Session-Sender runs on the policy's head-end, its Session-Reflector on the
tail, which may steer replies only into the return policy's SID list (RFC 9503 Return Path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

from .model import Behaviour, EncapMode, Fleet, MarkingMode, Policy
from .paths import path

BEHAVIOURS = {b: getattr(pb, "BEHAVIOUR_" + b.name) for b in Behaviour}
ENCAP_MODES = {m: getattr(pb, "ENCAP_MODE_" + m.name) for m in EncapMode}
MARKING_MODES = {m: getattr(pb, "MARKING_MODE_" + m.name) for m in MarkingMode}


@dataclass
class Derived:
    """Every node's state, and why a node's flows could not be placed (it has no interfaces)."""

    states: dict[str, pb.NodeState] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


def monitored(fleet: Fleet) -> set[str]:
    """Names of the policies some session measures (forward or return)."""
    return {p for s in fleet.sessions.values() for p in (s.policy, s.return_policy)}


def node_states(fleet: Fleet) -> Derived:
    out = Derived()
    for node in fleet.nodes.values():
        state = pb.NodeState()
        state.marking.mode = MARKING_MODES[fleet.marking_mode]
        state.marking.boundary_interfaces.extend(node.boundary_interfaces)
        out.states[node.name] = state
    for sid in fleet.sids.values():
        out.states[sid.node].local_sids.append(
            pb.LocalSid(
                sid=sid.sid,
                behaviour=BEHAVIOURS[sid.behaviour],
                nexthop=sid.nexthop,
                lookup_table=sid.lookup_table,
                device=sid.device,
                table=sid.table,
            )
        )
    for policy in fleet.policies.values():
        out.states[policy.head_node].policies.append(
            pb.SrPolicy(
                name=policy.name,
                prefix=policy.prefix,
                segments=policy.segments,
                mode=ENCAP_MODES[policy.encap_mode],
                device=policy.device,
                table=policy.table,
            )
        )
    for name in sorted(monitored(fleet)):
        _place_flow(fleet.policies[name], fleet, out)
    _place_sessions(fleet, out)
    return out


def _place_flow(policy: Policy, fleet: Fleet, out: Derived) -> None:
    nodes = path(policy, fleet)
    for i, node in enumerate(nodes):
        role = (
            records_pb2.ROLE_INGRESS
            if i == 0
            else records_pb2.ROLE_EGRESS
            if i == len(nodes) - 1
            else records_pb2.ROLE_TRANSIT
        )
        interfaces = fleet.nodes[node].monitored_interfaces()
        if not interfaces:
            out.problems[node] = (
                "no interface to hook monitored flows on: set core_interfaces, or wait for "
                "the node manager to report its interfaces"
            )
            continue
        out.states[node].flows.append(
            pb.MonitoredFlow(
                name=policy.name,
                segments=policy.segments,
                role=role,
                interfaces=interfaces,
                flow_mon_id=policy.flow_mon_id,
            )
        )


def _place_sessions(fleet: Fleet, out: Derived) -> None:
    reflected: dict[str, list[pb.ReflectorSession]] = {}
    keys: dict[str, bytes] = {}
    for session in sorted(fleet.sessions.values(), key=lambda s: s.name):
        forward = fleet.policies[session.policy]
        back = fleet.policies[session.return_policy]
        sender = fleet.nodes[forward.head_node]
        reflector = fleet.nodes[forward.tail_node]
        out.states[sender.name].sessions.append(
            pb.SenderSession(
                name=session.name,
                ssid=session.ssid,
                reflector_address=reflector.probe_address,
                source_address=sender.probe_address,
                direct_segments=forward.segments,
                return_segments=back.segments,
                forward_flow=forward.name,
                reverse_flow=back.name,
                delay_interval_ms=session.delay_interval_ms,
                hmac_key=session.hmac_key,
                policy=forward.name,
                reflector_node=reflector.name,
            )
        )
        reflected.setdefault(reflector.name, []).append(
            pb.ReflectorSession(
                ssid=session.ssid,
                forward_flow=forward.name,
                reverse_flow=back.name,
                return_paths=[
                    pb.ReturnPath(sender_address=sender.probe_address, segments=back.segments)
                ],
            )
        )
        keys[reflector.name] = session.hmac_key
    for node, sessions in reflected.items():
        out.states[node].reflector.CopyFrom(
            pb.ReflectorSettings(
                enabled=True,
                address=fleet.nodes[node].probe_address,
                stateful=True,
                hmac_key=keys[node],
                sessions=sessions,
            )
        )
