"""Proto messages to domain objects and back. Enum values that the domain does not know are
refused here, with the field they came in."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role, proto_numbers
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2 as records

from ..domain.errors import InvalidArgument
from ..domain.model import (
    DEFAULT_DOWN_AFTER,
    STAMP_PORT,
    THRESHOLD_METRICS,
    Liveness,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SegmentList,
    SenderSession,
    SrPolicy,
    Thresholds,
)

E = TypeVar("E", bound=Enum)

MODE_TO_PB = proto_numbers(EncapMode, pb.EncapMode, "ENCAP_MODE_")
BEHAVIOUR_TO_PB = proto_numbers(Behaviour, pb.Behaviour, "BEHAVIOUR_")
ROLE_TO_PB = proto_numbers(Role, records.Role, "ROLE_")
MARKING_MODE_TO_PB = proto_numbers(MarkingMode, pb.MarkingMode, "MARKING_MODE_")
_MODES = {number: member for member, number in MODE_TO_PB.items()}
_BEHAVIOURS = {number: member for member, number in BEHAVIOUR_TO_PB.items()}
_ROLES = {number: member for member, number in ROLE_TO_PB.items()}
_MARKING_MODES = {number: member for member, number in MARKING_MODE_TO_PB.items()}
# The domain's metric names are the enum's (THRESHOLD_METRIC_TWO_WAY_MEAN: two_way_mean).
METRIC_TO_PB = {
    m: pb.ThresholdMetric.Value(f"THRESHOLD_METRIC_{m.upper()}") for m in THRESHOLD_METRICS
}
_METRICS = {number: name for name, number in METRIC_TO_PB.items()}
_METRICS[pb.THRESHOLD_METRIC_UNSPECIFIED] = THRESHOLD_METRICS[0]


def _enum(table: Mapping[Any, E], value: int, what: str, enum_pb: Any) -> E:
    if value not in table:
        names = ", ".join(enum_pb.Name(k) for k in table)
        raise InvalidArgument(f"{what}: unknown value {value}; expected one of {names}")
    return table[value]


def _liveness(msg: pb.Liveness) -> Liveness:
    return Liveness(
        enabled=msg.enabled,
        down_after=msg.down_after or DEFAULT_DOWN_AFTER,
        up_after=msg.up_after or 1,
        timeout_ms=msg.timeout_ms,
    )


def _thresholds(msg: pb.Thresholds, session: str) -> Thresholds:
    return Thresholds(
        percent=msg.percent,
        absolute_us=msg.absolute_us,
        check_each_burst=msg.check_each_burst,
        min_report_interval_ms=msg.min_report_interval_ms,
        metrics=tuple(_metric(m, f"session {session!r} threshold metric") for m in msg.metrics),
    )


def _metric(value: int, what: str) -> str:
    if value not in _METRICS:
        names = ", ".join(pb.ThresholdMetric.Name(k) for k in _METRICS)
        raise InvalidArgument(f"{what}: unknown value {value}; expected one of {names}")
    return _METRICS[value]


def _thresholds_pb(t: Thresholds) -> pb.Thresholds:
    return pb.Thresholds(
        percent=t.percent,
        absolute_us=t.absolute_us,
        check_each_burst=t.check_each_burst,
        min_report_interval_ms=t.min_report_interval_ms,
        metrics=[METRIC_TO_PB[m] for m in t.metrics],
    )


def node_state(msg: pb.NodeState) -> NodeState:
    policies = tuple(
        SrPolicy(
            name=p.name,
            prefix=p.prefix,
            segments=tuple(p.segments),
            mode=_enum(
                _MODES, p.mode or pb.ENCAP_MODE_ENCAP, f"policy {p.name!r} mode", pb.EncapMode
            ),
            device=p.device,
            table=p.table,
            segment_lists=tuple(
                SegmentList(sl.name, tuple(sl.segments), sl.weight) for sl in p.segment_lists
            ),
            protection=p.protection,
        )
        for p in msg.policies
    )
    sids = tuple(
        LocalSid(
            sid=s.sid,
            behaviour=_enum(
                _BEHAVIOURS, s.behaviour, f"local SID {s.sid!r} behaviour", pb.Behaviour
            ),
            nexthop=s.nexthop,
            lookup_table=s.lookup_table,
            device=s.device,
            table=s.table,
        )
        for s in msg.local_sids
    )
    flows = tuple(
        MonitoredFlow(
            name=f.name,
            segments=tuple(f.segments),
            role=_enum(_ROLES, f.role, f"flow {f.name!r} role", records.Role),
            interfaces=tuple(f.interfaces),
            flowmon_id=f.flow_mon_id,
        )
        for f in msg.flows
    )
    r = msg.reflector
    reflector = Reflector(
        enabled=r.enabled,
        address=r.address or "::",
        port=r.port or STAMP_PORT,
        stateful=r.stateful,
        hmac_key=r.hmac_key,
        sessions=tuple(
            ReflectorSession(
                s.ssid,
                s.forward_flow,
                s.reverse_flow,
                tuple(ReturnPath(p.sender_address, tuple(p.segments)) for p in s.return_paths),
            )
            for s in r.sessions
        ),
        allowed_dscp=tuple(r.allowed_dscp),
    )
    sessions = tuple(
        SenderSession(
            name=s.name,
            ssid=s.ssid,
            reflector_address=s.reflector_address,
            forward_flow=s.forward_flow,
            reverse_flow=s.reverse_flow,
            reflector_port=s.reflector_port or STAMP_PORT,
            source_address=s.source_address,
            direct_segments=tuple(s.direct_segments),
            return_segments=tuple(s.return_segments),
            delay_interval_ms=s.delay_interval_ms,
            hmac_key=s.hmac_key,
            policy=s.policy,
            reflector_node=s.reflector_node,
            segment_list=s.segment_list,
            liveness=_liveness(s.liveness),
            histogram_edges_us=tuple(s.histogram_edges_us),
            burst_size=s.burst_size or 1,
            computation_interval_ms=s.computation_interval_ms,
            thresholds=_thresholds(s.thresholds, s.name),
        )
        for s in msg.sessions
    )
    m = msg.marking
    marking = Marking(
        mode=_enum(
            _MARKING_MODES, m.mode or pb.MARKING_MODE_ALTMARK, "marking mode", pb.MarkingMode
        ),
        monitored_bit=m.monitored_bit or Marking().monitored_bit,
        colour_bit=m.colour_bit or Marking().colour_bit,
        boundary_interfaces=tuple(m.boundary_interfaces),
    )
    return NodeState(marking, policies, sids, flows, reflector, sessions)


def node_state_pb(state: NodeState) -> pb.NodeState:
    return pb.NodeState(
        marking=pb.MarkingSettings(
            mode=MARKING_MODE_TO_PB[state.marking.mode],
            monitored_bit=state.marking.monitored_bit,
            colour_bit=state.marking.colour_bit,
            boundary_interfaces=state.marking.boundary_interfaces,
        ),
        policies=[
            pb.SrPolicy(
                name=p.name,
                prefix=p.prefix,
                segments=p.segments,
                mode=MODE_TO_PB[p.mode],
                device=p.device,
                table=p.table,
                segment_lists=[
                    pb.SegmentList(name=sl.name, segments=sl.segments, weight=sl.weight)
                    for sl in p.segment_lists
                ],
                protection=p.protection,
            )
            for p in state.policies
        ],
        local_sids=[
            pb.LocalSid(
                sid=s.sid,
                behaviour=BEHAVIOUR_TO_PB[s.behaviour],
                nexthop=s.nexthop,
                lookup_table=s.lookup_table,
                device=s.device,
                table=s.table,
            )
            for s in state.local_sids
        ],
        reflector=pb.ReflectorSettings(
            enabled=state.reflector.enabled,
            address=state.reflector.address,
            port=state.reflector.port,
            stateful=state.reflector.stateful,
            hmac_key=state.reflector.hmac_key,
            sessions=[
                pb.ReflectorSession(
                    ssid=s.ssid,
                    forward_flow=s.forward_flow,
                    reverse_flow=s.reverse_flow,
                    return_paths=[
                        pb.ReturnPath(sender_address=p.sender_address, segments=p.segments)
                        for p in s.return_paths
                    ],
                )
                for s in state.reflector.sessions
            ],
            allowed_dscp=state.reflector.allowed_dscp,
        ),
        sessions=[
            pb.SenderSession(
                name=s.name,
                ssid=s.ssid,
                reflector_address=s.reflector_address,
                reflector_port=s.reflector_port,
                source_address=s.source_address,
                direct_segments=s.direct_segments,
                return_segments=s.return_segments,
                forward_flow=s.forward_flow,
                reverse_flow=s.reverse_flow,
                delay_interval_ms=s.delay_interval_ms,
                hmac_key=s.hmac_key,
                policy=s.policy,
                reflector_node=s.reflector_node,
                segment_list=s.segment_list,
                liveness=pb.Liveness(
                    enabled=s.liveness.enabled,
                    down_after=s.liveness.down_after,
                    up_after=s.liveness.up_after,
                    timeout_ms=s.liveness.timeout_ms,
                ),
                histogram_edges_us=s.histogram_edges_us,
                burst_size=s.burst_size,
                computation_interval_ms=s.computation_interval_ms,
                thresholds=_thresholds_pb(s.thresholds),
            )
            for s in state.sessions
        ],
        flows=[
            pb.MonitoredFlow(
                name=f.name,
                segments=f.segments,
                role=ROLE_TO_PB[f.role],
                interfaces=f.interfaces,
                flow_mon_id=f.flowmon_id,
            )
            for f in state.flows
        ],
    )
