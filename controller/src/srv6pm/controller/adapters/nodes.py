"""gRPC clients of the node managers (the proto/ contract), over mTLS when configured.

The rest of the controller speaks domain values (domain/state.py, srv6pm.common.srv6): this module
alone turns them into protobuf messages and back. Enums are mapped by name (``Behaviour.END_X`` is
``BEHAVIOUR_END_X``), which controller/tests/test_contract_enums.py checks both ways.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role, proto_numbers
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc
from srv6pm.proto.v1 import records_pb2

from ..domain.model import THRESHOLD_METRICS, DelayThresholds, LocalSid, NodeInfo, Policy
from ..domain.state import (
    Changes,
    MonitoredFlow,
    NodeState,
    Reflector,
    SenderSession,
    StateDiff,
)

MAX_MESSAGE = 64 * 1024 * 1024  # the node manager's own limit: 10,000+ flows in one state


# ---- enums, by name -----------------------------------------------------------------------------


_BEHAVIOURS = proto_numbers(Behaviour, pb.Behaviour, "BEHAVIOUR_")
_ENCAP_MODES = proto_numbers(EncapMode, pb.EncapMode, "ENCAP_MODE_")
_MARKING_MODES = proto_numbers(MarkingMode, pb.MarkingMode, "MARKING_MODE_")
_ROLES = proto_numbers(Role, records_pb2.Role, "ROLE_")
# the domain's metric names are the proto's without the prefix, lower case
_METRICS: dict[str, pb.ThresholdMetric] = {
    m: pb.ThresholdMetric.Value(f"THRESHOLD_METRIC_{m.upper()}") for m in THRESHOLD_METRICS
}
_BEHAVIOUR_OF: dict[int, Behaviour] = {number: member for member, number in _BEHAVIOURS.items()}
_ENCAP_MODE_OF: dict[int, EncapMode] = {number: member for member, number in _ENCAP_MODES.items()}


def behaviour_to_proto(behaviour: Behaviour) -> pb.Behaviour:
    return _BEHAVIOURS[behaviour]


def metric_to_proto(metric: str) -> pb.ThresholdMetric:
    return _METRICS[metric]


def encap_mode_to_proto(mode: EncapMode) -> pb.EncapMode:
    return _ENCAP_MODES[mode]


def marking_mode_to_proto(mode: MarkingMode) -> pb.MarkingMode:
    return _MARKING_MODES[mode]


def role_to_proto(role: Role) -> records_pb2.Role:
    return _ROLES[role]


def behaviour_of(value: int) -> Behaviour | None:
    """The behaviour a proto value names; None for UNSPECIFIED or one newer than this code."""
    return _BEHAVIOUR_OF.get(value)


def encap_mode_of(value: int) -> EncapMode | None:
    """The encapsulation mode a proto value names; None as for ``behaviour_of``."""
    return _ENCAP_MODE_OF.get(value)


# ---- desired state and its diff -----------------------------------------------------------------


def state_to_proto(state: NodeState) -> pb.NodeState:
    """The ApplyState message of a node's desired state."""
    message = pb.NodeState(
        marking=pb.MarkingSettings(
            mode=marking_mode_to_proto(state.marking.mode),
            boundary_interfaces=state.marking.boundary_interfaces,
        ),
        policies=[_policy(p) for p in state.policies],
        local_sids=[_local_sid(s) for s in state.local_sids],
        flows=[_flow(f) for f in state.flows],
        sessions=[_sender(s) for s in state.sessions],
    )
    if state.reflector is not None:
        message.reflector.CopyFrom(_reflector(state.reflector))
    return message


def _local_sid(sid: LocalSid) -> pb.LocalSid:
    return pb.LocalSid(
        sid=sid.sid,
        behaviour=behaviour_to_proto(sid.behaviour),
        nexthop=sid.nexthop,
        lookup_table=sid.lookup_table,
        device=sid.device,
        table=sid.table,
    )


def _policy(policy: Policy) -> pb.SrPolicy:
    """One segment list goes as `segments` (the form every node manager knows, and what it
    reads back); several as weighted `segment_lists`."""
    lists = policy.segment_lists
    return pb.SrPolicy(
        name=policy.name,
        prefix=policy.prefix,
        segments=lists[0].segments if len(lists) == 1 else (),
        segment_lists=[
            pb.SegmentList(name=sl.name, segments=sl.segments, weight=sl.weight)
            for sl in (lists if len(lists) > 1 else ())
        ],
        mode=encap_mode_to_proto(policy.encap_mode),
        device=policy.device,
        table=policy.table,
        protection=policy.protection,
    )


def _flow(flow: MonitoredFlow) -> pb.MonitoredFlow:
    return pb.MonitoredFlow(
        name=flow.name,
        segments=flow.segments,
        role=role_to_proto(flow.role),
        interfaces=flow.interfaces,
        flow_mon_id=flow.flow_mon_id,
    )


def _sender(session: SenderSession) -> pb.SenderSession:
    return pb.SenderSession(
        name=session.name,
        ssid=session.ssid,
        reflector_address=session.reflector_address,
        source_address=session.source_address,
        direct_segments=session.direct_segments,
        return_segments=session.return_segments,
        forward_flow=session.forward_flow,
        reverse_flow=session.reverse_flow,
        delay_interval_ms=session.delay_interval_ms,
        hmac_key=session.hmac_key,
        policy=session.policy,
        reflector_node=session.reflector_node,
        segment_list=session.segment_list,
        liveness=pb.Liveness(
            enabled=session.liveness.enabled,
            down_after=session.liveness.down_after,
            up_after=session.liveness.up_after,
            timeout_ms=session.liveness.timeout_ms,
        )
        if session.liveness.enabled
        else None,
        histogram_edges_us=session.histogram_edges_us,
        burst_size=session.burst_size,
        computation_interval_ms=session.computation_interval_ms,
        thresholds=_thresholds(session.thresholds) if session.thresholds.enabled else None,
    )


def _thresholds(t: DelayThresholds) -> pb.Thresholds:
    return pb.Thresholds(
        percent=t.percent,
        absolute_us=t.absolute_us,
        check_each_burst=t.check_each_burst,
        min_report_interval_ms=t.min_report_interval_ms,
        metrics=[metric_to_proto(m) for m in t.metrics],
    )


def _reflector(reflector: Reflector) -> pb.ReflectorSettings:
    return pb.ReflectorSettings(
        enabled=True,
        address=reflector.address,
        stateful=reflector.stateful,
        hmac_key=reflector.hmac_key,
        sessions=[
            pb.ReflectorSession(
                ssid=s.ssid,
                forward_flow=s.forward_flow,
                reverse_flow=s.reverse_flow,
                return_paths=[
                    pb.ReturnPath(sender_address=r.sender_address, segments=r.segments)
                    for r in s.return_paths
                ],
            )
            for s in reflector.sessions
        ],
    )


def diff_of(reply: pb.ApplyStateResponse) -> StateDiff:
    """What an ApplyState reply says changed (or would change, for a dry run)."""

    def changes(c: pb.Changes) -> Changes:
        return Changes(c.added, c.removed, c.unchanged)

    return StateDiff(
        policies=changes(reply.policies),
        local_sids=changes(reply.local_sids),
        flows=changes(reply.flows),
        sessions=changes(reply.sessions),
        marking_changed=reply.marking_changed,
        reflector_changed=reply.reflector_changed,
    )


def info_of(reply: pb.NodeInfo) -> NodeInfo:
    behaviours = (behaviour_of(b) for b in reply.behaviours)
    encap_modes = (encap_mode_of(m) for m in reply.encap_modes)
    return NodeInfo(
        driver=reply.driver,
        version=reply.version,
        period_ns=reply.period_ns,
        interfaces=tuple(reply.interfaces),
        behaviours=tuple(b.value for b in behaviours if b is not None),
        encap_modes=tuple(m.value for m in encap_modes if m is not None),
        max_flows=reply.max_flows,
        max_segments=reply.max_segments,
        warnings=tuple(reply.warnings),
    )


# ---- clients ------------------------------------------------------------------------------------


class NodeUnavailable(Exception):
    """The node manager could not be reached, or refused the call; the message says why."""


@dataclass(frozen=True)
class Tls:
    """The controller's client identity and the CA that signs node managers' certificates."""

    ca: Path
    cert: Path
    key: Path

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca.read_bytes(),
            private_key=self.key.read_bytes(),
            certificate_chain=self.cert.read_bytes(),
        )


class NodeClients:
    """One channel per node-manager endpoint, kept while the endpoint stays the same."""

    def __init__(self, tls: Tls | None, timeout_s: float, server_name: str = "") -> None:
        self._credentials = tls.credentials() if tls else None
        self._server_name = server_name
        self._timeout = timeout_s
        self._channels: dict[str, tuple[str, grpc.Channel]] = {}
        self._lock = threading.Lock()

    def _stub(self, node: str, endpoint: str) -> pb_grpc.NodeManagerStub:
        with self._lock:
            known = self._channels.get(node)
            if known is None or known[0] != endpoint:
                if known is not None:
                    known[1].close()
                options: list[tuple[str, int | str]] = [
                    ("grpc.max_send_message_length", MAX_MESSAGE),
                    ("grpc.max_receive_message_length", MAX_MESSAGE),
                ]
                if self._server_name:
                    options.append(("grpc.ssl_target_name_override", self._server_name))
                channel = (
                    grpc.secure_channel(endpoint, self._credentials, options)
                    if self._credentials
                    else grpc.insecure_channel(endpoint, options)
                )
                self._channels[node] = known = (endpoint, channel)
            return pb_grpc.NodeManagerStub(known[1])

    def info(self, node: str, endpoint: str) -> NodeInfo:
        try:
            reply = self._stub(node, endpoint).GetInfo(pb.GetInfoRequest(), timeout=self._timeout)
        except grpc.RpcError as e:
            raise NodeUnavailable(_message(e)) from e
        return info_of(reply)

    def diff(self, node: str, endpoint: str, state: NodeState, timeout_s: float) -> StateDiff:
        """What applying ``state`` would change on the node (a dry run: nothing changes)."""
        return self._apply(node, endpoint, state, True, timeout_s)

    def apply(self, node: str, endpoint: str, state: NodeState, timeout_s: float) -> StateDiff:
        """Make the node hold ``state``; what it changed."""
        return self._apply(node, endpoint, state, False, timeout_s)

    def _apply(
        self, node: str, endpoint: str, state: NodeState, dry_run: bool, timeout_s: float
    ) -> StateDiff:
        request = pb.ApplyStateRequest(desired=state_to_proto(state), dry_run=dry_run)
        try:
            reply: pb.ApplyStateResponse = self._stub(node, endpoint).ApplyState(
                request, timeout=timeout_s
            )
        except grpc.RpcError as e:
            raise NodeUnavailable(_message(e)) from e
        return diff_of(reply)

    def forget(self, keep: set[str]) -> None:
        """Close the channels of nodes no longer in the fleet."""
        with self._lock:
            for node in set(self._channels) - keep:
                self._channels.pop(node)[1].close()

    def close(self) -> None:
        self.forget(set())


def _message(error: grpc.RpcError) -> str:
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    return f"{code.name if code else 'ERROR'}: {details}"
