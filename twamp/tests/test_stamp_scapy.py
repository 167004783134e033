"""The scapy layers and the fast codec agree octet for octet, for every packet type and TLV."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from scapy.packet import Packet
from srv6pm.twamp import codec
from srv6pm.twamp.scapy_packets import (
    StampReflector,
    StampReflectorAuth,
    StampSender,
    StampSenderAuth,
    error_estimate_layer,
)
from srv6pm.twamp.scapy_tlv import (
    ReturnPathAddress,
    ReturnPathControlCode,
    ReturnPathSrv6SegmentList,
    ReturnPathSubTlv,
    StampSubTlv,
    StampTlv,
    StampTlvAccessReport,
    StampTlvClassOfService,
    StampTlvDestinationNodeAddress,
    StampTlvDirectMeasurement,
    StampTlvExtraPadding,
    StampTlvHmac,
    StampTlvLocation,
    StampTlvReturnPath,
    StampTlvTimestampInformation,
)
from stamp_strategies import reflector, sender, tlv

KEY = b"scapy and codec share this key.."
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sub(s: codec.SubTlv) -> Packet:
    return StampSubTlv(flags=s.flags, type=s.type, value=s.value)


def to_scapy(t: codec.Tlv) -> Packet:
    """The scapy layer a codec TLV corresponds to, built field by field."""
    match t:
        case codec.ExtraPadding():
            return StampTlvExtraPadding(flags=t.flags, padding=bytes(t.length))
        case codec.Location():
            return StampTlvLocation(
                flags=t.flags,
                dport=t.dst_port,
                sport=t.src_port,
                sub_tlvs=[sub(s) for s in t.sub_tlvs],
            )
        case codec.TimestampInformation():
            return StampTlvTimestampInformation(
                flags=t.flags,
                sync_src_in=t.sync_src_in,
                timestamp_in=t.timestamp_in,
                sync_src_out=t.sync_src_out,
                timestamp_out=t.timestamp_out,
                sub_tlvs=[sub(s) for s in t.sub_tlvs],
            )
        case codec.ClassOfService():
            return StampTlvClassOfService(
                flags=t.flags, dscp1=t.dscp1, dscp2=t.dscp2, ecn=t.ecn, rp=t.rp
            )
        case codec.DirectMeasurement():
            return StampTlvDirectMeasurement(
                flags=t.flags, s_txc=t.s_txc, r_rxc=t.r_rxc, r_txc=t.r_txc
            )
        case codec.AccessReport():
            return StampTlvAccessReport(
                flags=t.flags, access_id=t.access_id, return_code=t.return_code
            )
        case codec.Hmac():
            return StampTlvHmac(flags=t.flags, hmac=t.digest)
        case codec.DestinationNodeAddress():
            return StampTlvDestinationNodeAddress(flags=t.flags, address=t.address)
        case codec.ReturnPath():
            subs: list[Packet] = []
            if t.control_code is not None:
                subs.append(ReturnPathControlCode(control_code=t.control_code))
            if t.address is not None:
                subs.append(ReturnPathAddress(address=t.address))
            if t.segments is not None:
                subs.append(ReturnPathSrv6SegmentList(segments=list(t.segments)))
            subs += [ReturnPathSubTlv(flags=s.flags, type=s.type, value=s.value) for s in t.other]
            return StampTlvReturnPath(flags=t.flags, sub_tlvs=subs)
        case codec.UnknownTlv():
            return StampTlv(flags=t.flags, type=t.type, value=t.value)
    raise AssertionError(t)


def scapy_sender(p: codec.SenderPacket, cls: Any = StampSender) -> Packet:
    return cls(
        seq=p.seq,
        ts=p.timestamp,
        err_estimate=error_estimate_layer(p.error_estimate),
        ssid=p.ssid,
        tlv_objects=[to_scapy(t) for t in p.tlvs],
    )


def scapy_reflector(p: codec.ReflectorPacket, cls: Any = StampReflector) -> Packet:
    return cls(
        seq=p.seq,
        ts=p.timestamp,
        err_estimate=error_estimate_layer(p.error_estimate),
        ssid=p.ssid,
        ts_rx=p.receive_timestamp,
        seq_sender=p.sender_seq,
        ts_sender=p.sender_timestamp,
        err_estimate_sender=error_estimate_layer(p.sender_error_estimate),
        ttl_sender=p.sender_ttl,
        tlv_objects=[to_scapy(t) for t in p.tlvs],
    )


TYPED = {
    codec.ExtraPadding: StampTlvExtraPadding,
    codec.Location: StampTlvLocation,
    codec.TimestampInformation: StampTlvTimestampInformation,
    codec.ClassOfService: StampTlvClassOfService,
    codec.DirectMeasurement: StampTlvDirectMeasurement,
    codec.AccessReport: StampTlvAccessReport,
    codec.Hmac: StampTlvHmac,
    codec.DestinationNodeAddress: StampTlvDestinationNodeAddress,
    codec.ReturnPath: StampTlvReturnPath,
    codec.UnknownTlv: StampTlv,
}

EXAMPLES: list[codec.Tlv] = [
    codec.ExtraPadding(3),
    codec.Location(862, 49152, (codec.SubTlv(9, bytes(16)), codec.SubTlv(1, bytes(8), 0x80))),
    codec.TimestampInformation(1, 1, 2, 3),
    codec.ClassOfService(46, 0, 2, 1, flags=0x40),
    codec.DirectMeasurement(1, 2, 3),
    codec.AccessReport(2, 1),
    codec.Hmac(bytes(range(16))),
    codec.DestinationNodeAddress("192.0.2.7"),
    codec.DestinationNodeAddress("fc00::7"),
    codec.ReturnPath(
        ("fc00::1", "fc00::2"), "fc00::99", 1, (codec.SubTlv(3, b"\x00\x01\x01\x40"),)
    ),
    codec.ReturnPath(None, "198.51.100.1", None),
    codec.UnknownTlv(7, b"\x01\x02\x03", 0x80),
]


@pytest.mark.parametrize("t", EXAMPLES, ids=lambda t: type(t).__name__)
def test_each_tlv_agrees(t: codec.Tlv) -> None:
    wire = codec.encode_tlv(t)
    assert bytes(to_scapy(t)) == wire
    dissected = StampTlv(wire)
    assert type(dissected) is TYPED[type(t)]
    assert bytes(dissected) == wire


def test_flags_are_in_rfc_bit_order() -> None:
    assert bytes(StampTlvDirectMeasurement(flags="U"))[0] == codec.FLAG_U
    assert bytes(StampTlvDirectMeasurement(flags="M"))[0] == codec.FLAG_M
    assert bytes(StampTlvDirectMeasurement(flags="I"))[0] == codec.FLAG_I


def test_dissected_fields_match_the_codec() -> None:
    p = codec.ReflectorPacket(
        1, 2, 0x8101, 3, 4, 5, 6, 0x4102, 64, (codec.DirectMeasurement(7, 8, 9, codec.FLAG_U),)
    )
    s = StampReflector(codec.encode_reflector(p))
    assert (s.seq, s.ts, s.ssid, s.ts_rx, s.seq_sender, s.ts_sender, s.ttl_sender) == (
        1,
        2,
        3,
        4,
        5,
        6,
        64,
    )
    assert bytes(s.err_estimate) == b"\x81\x01"
    assert bytes(s.err_estimate_sender) == b"\x41\x02"
    dm = s.tlv_objects[0]
    assert (dm.s_txc, dm.r_rxc, dm.r_txc, int(dm.flags)) == (7, 8, 9, codec.FLAG_U)


@SLOW
@given(sender)
def test_sender_agrees(p: codec.SenderPacket) -> None:
    wire = codec.encode_sender(p)
    assert bytes(scapy_sender(p)) == wire
    assert bytes(StampSender(wire)) == wire


@SLOW
@given(reflector)
def test_reflector_agrees(p: codec.ReflectorPacket) -> None:
    wire = codec.encode_reflector(p)
    assert bytes(scapy_reflector(p)) == wire
    assert bytes(StampReflector(wire)) == wire


@SLOW
@given(sender.filter(lambda p: not any(isinstance(t, codec.Hmac) for t in p.tlvs)))
def test_authenticated_sender_agrees(p: codec.SenderPacket) -> None:
    layer = scapy_sender(p, StampSenderAuth)
    if p.tlvs:
        layer.tlv_objects = [*layer.tlv_objects, StampTlvHmac()]
    wire = codec.encode_sender(p, KEY)
    assert bytes(layer.sign(KEY)) == wire
    assert bytes(StampSenderAuth(wire)) == wire


@SLOW
@given(reflector.filter(lambda p: not any(isinstance(t, codec.Hmac) for t in p.tlvs)))
def test_authenticated_reflector_agrees(p: codec.ReflectorPacket) -> None:
    layer = scapy_reflector(p, StampReflectorAuth)
    if p.tlvs:
        layer.tlv_objects = [*layer.tlv_objects, StampTlvHmac()]
    wire = codec.encode_reflector(p, KEY)
    assert bytes(layer.sign(KEY)) == wire
    assert bytes(StampReflectorAuth(wire)) == wire


@SLOW
@given(tlv)
def test_any_tlv_agrees(t: codec.Tlv) -> None:
    wire = codec.encode_tlv(t)
    assert bytes(to_scapy(t)) == wire
    assert bytes(StampTlv(wire)) == wire
