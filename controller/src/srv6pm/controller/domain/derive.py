"""Each node's NodeState (domain/state.py) from the domain's desired state.

Each segment list that a session measures (forward, or as its way back) is a monitored flow of its
own (Policy.flow_name), with the segment list's FlowMonID: INGRESS at the policy's head-end,
TRANSIT at each of its SIDs' nodes, EGRESS at the tail. A session has a Session-Sender per probed
segment list on the head-end, each with its own SSID and probes encapsulated in exactly that
segment list; the tail's Session-Reflector steers the replies of each SSID into the return
segment list (RFC 9503 Return Path).

A delay-only session (its settings' `loss` false) names no flows, at either end: its probes
carry no Direct Measurement TLV, it reports no loss, and the segment lists it probes are not
monitored flows for it (the data is neither marked nor counted, unless another session measures
loss on them). Its reflector sessions still steer its replies into the return segment list.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from srv6pm.common.srv6 import Role

from .measured import legs, measurement, return_list
from .model import Fleet, LocalSid, Policy, SegmentList
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
    """Names of the flows of the segment lists some session measures (forward or return)."""
    return set(_measured(fleet))


def _measured(fleet: Fleet) -> dict[str, tuple[Policy, SegmentList]]:
    out: dict[str, tuple[Policy, SegmentList]] = {}
    for session in fleet.sessions.values():
        if not measurement(session, fleet).loss:
            continue  # delay only: nothing to count
        forward = fleet.policies[session.policy]
        for leg in legs(session, fleet):
            out[forward.flow_name(leg.segment_list)] = (forward, leg.segment_list)
        back, back_sl = fleet.policies[session.return_policy], return_list(session, fleet)
        out[back.flow_name(back_sl)] = (back, back_sl)
    return out


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
    for name, (policy, sl) in sorted(_measured(fleet).items()):
        _place_flow(name, policy, sl, fleet, placed, problems)
    _place_sessions(fleet, placed)
    return Derived({name: p.state() for name, p in placed.items()}, problems)


def _place_flow(
    name: str,
    policy: Policy,
    sl: SegmentList,
    fleet: Fleet,
    placed: dict[str, _Placed],
    problems: dict[str, str],
) -> None:
    nodes = path(policy, fleet, sl)
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
            MonitoredFlow(name, sl.segments, role, interfaces, sl.flow_mon_id)
        )


def _place_sessions(fleet: Fleet, placed: dict[str, _Placed]) -> None:
    reflected: dict[str, list[ReflectorSession]] = {}
    keys: dict[str, bytes] = {}
    for session in sorted(fleet.sessions.values(), key=lambda s: s.name):
        forward = fleet.policies[session.policy]
        back = fleet.policies[session.return_policy]
        back_sl = return_list(session, fleet)
        sender = fleet.nodes[forward.head_node]
        reflector = fleet.nodes[forward.tail_node]
        settings = measurement(session, fleet)
        for leg in legs(session, fleet):
            flow = forward.flow_name(leg.segment_list)
            placed[sender.name].sessions.append(
                SenderSession(
                    name=leg.sender_name,
                    ssid=leg.ssid,
                    reflector_address=reflector.probe_address,
                    source_address=sender.probe_address,
                    direct_segments=leg.segment_list.segments,
                    return_segments=back_sl.segments,
                    forward_flow=flow if settings.loss else "",
                    reverse_flow=back.flow_name(back_sl) if settings.loss else "",
                    delay_interval_ms=settings.delay_interval_ms,
                    hmac_key=session.hmac_key,
                    policy=forward.name,
                    reflector_node=reflector.name,
                    # a label only where the policy has several (the records' segment_list tag)
                    segment_list=leg.segment_list.name if len(forward.segment_lists) > 1 else "",
                    liveness=settings.liveness,
                    histogram_edges_us=settings.histogram_edges_us,
                    burst_size=settings.burst_size,
                    computation_interval_ms=settings.computation_interval_ms,
                    thresholds=settings.thresholds.canonical(),
                )
            )
            reflected.setdefault(reflector.name, []).append(
                ReflectorSession(
                    ssid=leg.ssid,
                    forward_flow=flow if settings.loss else "",
                    reverse_flow=back.flow_name(back_sl) if settings.loss else "",
                    return_paths=(ReturnPath(sender.probe_address, back_sl.segments),),
                )
            )
        keys[reflector.name] = session.hmac_key
    for node, sessions in reflected.items():
        placed[node].reflector = Reflector(
            address=fleet.nodes[node].probe_address,
            hmac_key=keys[node],
            sessions=tuple(sessions),
        )
