"""Each node's NodeState (domain/state.py) from the domain's desired state.

A policy that a session measures (forward or return) is a monitored flow named after the policy,
with the policy's FlowMonID: INGRESS at its head-end, TRANSIT at each SID's node, EGRESS at its
tail. The session's Session-Sender runs on the policy's head-end, its Session-Reflector on the
tail, which may steer replies only into the return policy's SID list (RFC 9503 Return Path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from srv6pm.common.srv6 import Role

from .model import Fleet, LocalSid, Policy
from .paths import path
from .state import (
    Marking,
    MonitoredFlow,
    NodeState,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SenderSession,
)


@dataclass
class Derived:
    """Every node's state, and why a node's flows could not be placed (it has no interfaces)."""

    states: dict[str, NodeState] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


@dataclass
class _Placed:
    """One node's state while it is being derived."""

    marking: Marking
    local_sids: list[LocalSid] = field(default_factory=list)
    policies: list[Policy] = field(default_factory=list)
    flows: list[MonitoredFlow] = field(default_factory=list)
    sessions: list[SenderSession] = field(default_factory=list)
    reflector: Reflector | None = None

    def state(self) -> NodeState:
        return NodeState(
            self.marking,
            tuple(self.local_sids),
            tuple(self.policies),
            tuple(self.flows),
            tuple(self.sessions),
            self.reflector,
        )


def monitored(fleet: Fleet) -> set[str]:
    """Names of the policies some session measures (forward or return)."""
    return {p for s in fleet.sessions.values() for p in (s.policy, s.return_policy)}


def node_states(fleet: Fleet) -> Derived:
    placed = {
        node.name: _Placed(Marking(fleet.marking_mode, node.boundary_interfaces))
        for node in fleet.nodes.values()
    }
    problems: dict[str, str] = {}
    for sid in fleet.sids.values():
        placed[sid.node].local_sids.append(sid)
    for policy in fleet.policies.values():
        placed[policy.head_node].policies.append(policy)
    for name in sorted(monitored(fleet)):
        _place_flow(fleet.policies[name], fleet, placed, problems)
    _place_sessions(fleet, placed)
    return Derived({name: p.state() for name, p in placed.items()}, problems)


def _place_flow(
    policy: Policy, fleet: Fleet, placed: dict[str, _Placed], problems: dict[str, str]
) -> None:
    nodes = path(policy, fleet)
    for i, node in enumerate(nodes):
        role = Role.INGRESS if i == 0 else Role.EGRESS if i == len(nodes) - 1 else Role.TRANSIT
        interfaces = fleet.nodes[node].monitored_interfaces()
        if not interfaces:
            problems[node] = (
                "no interface to hook monitored flows on: set core_interfaces, or wait for "
                "the node manager to report its interfaces"
            )
            continue
        placed[node].flows.append(
            MonitoredFlow(policy.name, policy.segments, role, interfaces, policy.flow_mon_id)
        )


def _place_sessions(fleet: Fleet, placed: dict[str, _Placed]) -> None:
    reflected: dict[str, list[ReflectorSession]] = {}
    keys: dict[str, bytes] = {}
    for session in sorted(fleet.sessions.values(), key=lambda s: s.name):
        forward = fleet.policies[session.policy]
        back = fleet.policies[session.return_policy]
        sender = fleet.nodes[forward.head_node]
        reflector = fleet.nodes[forward.tail_node]
        placed[sender.name].sessions.append(
            SenderSession(
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
            ReflectorSession(
                ssid=session.ssid,
                forward_flow=forward.name,
                reverse_flow=back.name,
                return_paths=(ReturnPath(sender.probe_address, back.segments),),
            )
        )
        keys[reflector.name] = session.hmac_key
    for node, sessions in reflected.items():
        placed[node].reflector = Reflector(
            address=fleet.nodes[node].probe_address,
            hmac_key=keys[node],
            sessions=tuple(sessions),
        )
