"""Results to srv6pm.v1 measurement records (proto/srv6pm/v1/records.proto): what the journal
stores, Kafka carries and ReadResults returns."""

from __future__ import annotations

from srv6pm.common.srv6 import Role, proto_numbers
from srv6pm.proto.v1 import records_pb2 as pb
from srv6pm.twamp.liveness import LivenessChange, State
from srv6pm.twamp.results import DelayBlock, DelayResult, DelayStats, DirectionLoss, LossResult
from srv6pm.twamp.thresholds import ThresholdEvent

from ..domain.blocks import FlowBlock
from ..domain.model import MonitoredFlow, SenderSession

ROLE_TO_PB = proto_numbers(Role, pb.Role, "ROLE_")
LIVENESS_TO_PB = {
    None: pb.LIVENESS_STATE_UNSPECIFIED,
    State.UP: pb.LIVENESS_STATE_UP,
    State.DOWN: pb.LIVENESS_STATE_DOWN,
}

# journal_id is the field a record gets last, when it is published (the journal assigns it).
_JOURNAL_ID_TAG = b"\x18"  # field 3, varint


def labels(s: SenderSession) -> pb.SessionLabels:
    return pb.SessionLabels(
        session=s.name,
        policy=s.policy_label,
        reflector_node=s.reflector_node,
        reflector_address=s.reflector_address,
        segments=s.direct_segments,
        return_segments=s.return_segments,
        forward_flow=s.forward_flow,
        reverse_flow=s.reverse_flow,
        segment_list=s.segment_list,
    )


def block_info(block: int, period_ns: int) -> pb.Block:
    return pb.Block(index=block, start_unix_ns=block * period_ns, period_ns=period_ns)


def _direction(d: DirectionLoss | None) -> pb.DirectionLoss | None:
    if d is None:
        return None
    return pb.DirectionLoss(tx=d.tx, rx=d.rx, lost=d.lost, loss_ratio=d.ratio or 0.0)


def loss(r: LossResult, session_labels: pb.SessionLabels, period_ns: int) -> pb.LossRecord:
    return pb.LossRecord(
        session=r.session,
        block=r.block,
        forward=_direction(r.forward),
        reverse=_direction(r.reverse),
        valid=r.valid,
        reason=r.reason,
        block_info=block_info(r.block, period_ns),
        labels=session_labels,
    )


def _stats(s: DelayStats | None) -> pb.DelayStats | None:
    if s is None:
        return None
    return pb.DelayStats(
        samples=s.samples,
        min_ns=s.min_ns,
        p50_ns=s.p50_ns,
        p90_ns=s.p90_ns,
        p99_ns=s.p99_ns,
        max_ns=s.max_ns,
        mean_ns=s.mean_ns,
        jitter_ns=s.jitter_ns,
        histogram=s.histogram,
    )


def delay(r: DelayBlock, session_labels: pb.SessionLabels, period_ns: int) -> pb.DelayRecord:
    return pb.DelayRecord(
        session=r.session,
        block=r.block,
        probes_sent=r.probes_sent,
        probes_lost=r.probes_lost,
        two_way=_stats(r.two_way),
        forward=_stats(r.forward),
        reverse=_stats(r.reverse),
        one_way_reason=r.one_way_reason,
        block_info=block_info(r.block, period_ns),
        labels=session_labels,
        histogram_edges_ns=r.histogram_edges_ns,
        interval_start_unix_ns=r.interval_start_ns,
        interval_ns=r.interval_ns,
    )


def probe(r: DelayResult, session_labels: pb.SessionLabels | None = None) -> pb.ProbeRecord:
    return pb.ProbeRecord(
        session=r.session,
        seq=r.seq,
        sent_unix_ns=r.sent_ns,
        two_way_ns=r.two_way_ns,
        one_way_valid=r.forward_ns is not None and r.reverse_ns is not None,
        forward_ns=r.forward_ns or 0,
        reverse_ns=r.reverse_ns or 0,
        labels=session_labels,
    )


def liveness(c: LivenessChange, session_labels: pb.SessionLabels) -> pb.LivenessEvent:
    return pb.LivenessEvent(
        session=c.session,
        state=LIVENESS_TO_PB[c.state],
        previous=LIVENESS_TO_PB[c.previous],
        at_unix_ns=c.at_ns,
        consecutive=c.consecutive,
        labels=session_labels,
    )


def threshold(e: ThresholdEvent, session_labels: pb.SessionLabels) -> pb.ThresholdEvent:
    return pb.ThresholdEvent(
        session=e.session,
        metric=e.metric.value,
        value_ns=e.value_ns,
        reference_ns=e.reference_ns,
        first=e.first,
        accelerated=e.accelerated,
        at_unix_ns=e.at_ns,
        labels=session_labels,
    )


def flow_block(r: FlowBlock, flow: MonitoredFlow, period_ns: int) -> pb.FlowBlockRecord:
    return pb.FlowBlockRecord(
        flow=r.flow,
        block=r.block,
        packets=r.packets,
        bytes=r.bytes,
        valid=r.valid,
        reason=r.reason,
        role=ROLE_TO_PB[flow.role],
        segments=flow.segments,
        flow_mon_id=flow.flowmon_id,
        block_info=block_info(r.block, period_ns),
    )


def with_journal_id(record: bytes, journal_id: int) -> bytes:
    """The stored record with its journal id: appending a field to a serialized message sets it
    (protobuf wire format), without parsing and serializing it again on the publish path."""
    return record + _JOURNAL_ID_TAG + _varint(journal_id)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
