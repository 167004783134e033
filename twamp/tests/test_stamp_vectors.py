"""Byte-exact vectors, written by hand from the RFC layouts (RFC 8762 4.2/4.3, RFC 8972 3-4,
RFC 9503 4), independent of the encoder: each is checked both ways (encode and decode)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

import pytest
from srv6pm.twamp import codec
from srv6pm.twamp.codec import (
    AccessReport,
    ClassOfService,
    DestinationNodeAddress,
    DirectMeasurement,
    ExtraPadding,
    Hmac,
    Location,
    MalformedTlv,
    ReflectorPacket,
    ReturnPath,
    SenderPacket,
    SubTlv,
    TimestampInformation,
    UnknownTlv,
)


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


KEY = b"0123456789abcdef0123456789abcdef"

SEQ, TS, EE, SSID = 0x01020304, 0x1122334455667788, 0x8101, 0xABCD
SENDER = SenderPacket(SEQ, TS, EE, SSID)
SENDER_BYTES = h(
    "01020304"  # Sequence Number
    "1122334455667788"  # Timestamp
    "8101"  # Error Estimate: S=1 Z=0 Scale=1 Multiplier=1
    "abcd" + "00" * 28  # SSID  # MBZ
)

REFLECTOR = ReflectorPacket(
    0x0A0B0C0D, 0x2122232425262728, 0x4203, SSID, 0x3132333435363738, SEQ, TS, EE, 0x40
)
REFLECTOR_BYTES = h(
    "0a0b0c0d"  # Sequence Number
    "2122232425262728"  # Timestamp (T3)
    "4203"  # Error Estimate: S=0 Z=1 Scale=2 Multiplier=3
    "abcd"  # SSID
    "3132333435363738"  # Receive Timestamp (T2)
    "01020304"  # Session-Sender Sequence Number
    "1122334455667788"  # Session-Sender Timestamp
    "8101"  # Session-Sender Error Estimate
    "0000"  # MBZ
    "40"  # Session-Sender TTL
    "000000"  # MBZ
)

SENDER_AUTH_HEAD = h("01020304" + "00" * 12 + "1122334455667788 8101 abcd" + "00" * 68)
REFLECTOR_AUTH_HEAD = h(
    "0a0b0c0d"
    + "00" * 12
    + "2122232425262728 4203 abcd"
    + "00" * 4
    + "3132333435363738"
    + "00" * 8
    + "01020304"
    + "00" * 12
    + "1122334455667788 8101"
    + "00" * 6
    + "40"
    + "00" * 15
)


def mac(*parts: bytes) -> bytes:
    """HMAC-SHA-256 truncated to 16 octets, straight from hashlib (not the package's helper)."""
    return hmac.new(KEY, b"".join(parts), hashlib.sha256).digest()[:16]


def test_base_lengths_are_the_rfc_ones() -> None:
    assert len(SENDER_BYTES) == 44
    assert len(REFLECTOR_BYTES) == 44
    assert len(SENDER_AUTH_HEAD) == 96
    assert len(REFLECTOR_AUTH_HEAD) == 96


def test_sender_unauthenticated() -> None:
    assert codec.encode_sender(SENDER) == SENDER_BYTES
    assert codec.decode_sender(SENDER_BYTES) == SENDER


def test_reflector_unauthenticated() -> None:
    assert codec.encode_reflector(REFLECTOR) == REFLECTOR_BYTES
    assert codec.decode_reflector(REFLECTOR_BYTES) == REFLECTOR


def test_sender_authenticated() -> None:
    wire = SENDER_AUTH_HEAD + mac(SENDER_AUTH_HEAD)
    assert codec.encode_sender(SENDER, KEY) == wire
    assert codec.decode_sender(wire, KEY) == SENDER


def test_reflector_authenticated() -> None:
    wire = REFLECTOR_AUTH_HEAD + mac(REFLECTOR_AUTH_HEAD)
    assert codec.encode_reflector(REFLECTOR, KEY) == wire
    assert codec.decode_reflector(wire, KEY) == REFLECTOR


V6_A = "2001:db8::1"
V6_A_HEX = "20010db8000000000000000000000001"
V6_B_HEX = "20010db8000000000000000000000002"
V6_9_HEX = "20010db8000000000000000000000009"

TLV_VECTORS = [
    pytest.param(ExtraPadding(5), "00 01 0005 0000000000", id="extra-padding"),
    pytest.param(
        Location(862, 40000, (SubTlv(6, h("fc000000000000000000000000000001")),)),
        "00 02 0018 035e 9c40  00 06 0010 fc000000000000000000000000000001",
        id="location",
    ),
    pytest.param(TimestampInformation(1, 2, 1, 1), "00 03 0004 01 02 01 01", id="timestamp-info"),
    # DSCP1=46 (101110) DSCP2=10 (001010) ECN=3 (11) RP=1 (01): 1011 1000 1010 1101 = b8ad.
    pytest.param(ClassOfService(46, 10, 3, 1), "00 04 0004 b8ad 0000", id="class-of-service"),
    pytest.param(
        DirectMeasurement(1, 2, 0xFFFFFFFF, flags=0x80),
        "80 05 000c 00000001 00000002 ffffffff",
        id="direct-measurement-U",
    ),
    pytest.param(AccessReport(1, 2), "00 06 0004 10 02 0000", id="access-report"),
    pytest.param(
        Hmac(bytes(range(16)), flags=0x20),
        "20 08 0010 000102030405060708090a0b0c0d0e0f",
        id="hmac-I",
    ),
    pytest.param(DestinationNodeAddress("192.0.2.1"), "00 09 0004 c0000201", id="dest-node-v4"),
    pytest.param(DestinationNodeAddress(V6_A), "00 09 0010 " + V6_A_HEX, id="dest-node-v6"),
    pytest.param(
        ReturnPath((V6_A, "2001:db8::2"), "2001:db8::9", 1),
        "00 0a 0040"
        " 00 01 0004 00000001"  # Control Code
        " 00 02 0010 " + V6_9_HEX + " 00 04 0020 " + V6_A_HEX + V6_B_HEX,  # Address, SID list
        id="return-path",
    ),
    pytest.param(
        ReturnPath(None, "198.51.100.7", None, (SubTlv(3, h("00010140"), 0),)),
        "00 0a 0010  00 02 0004 c6336407  00 03 0004 00010140",
        id="return-path-v4-mpls",
    ),
    pytest.param(UnknownTlv(200, b"\xde\xad", flags=0x40), "40 c8 0002 dead", id="unknown"),
]


@pytest.mark.parametrize(("tlv", "wire"), TLV_VECTORS)
def test_tlv_vectors(tlv: codec.Tlv, wire: str) -> None:
    assert codec.encode_tlv(tlv) == h(wire)
    packet = codec.decode_sender(SENDER_BYTES + h(wire))
    assert packet.tlvs == (tlv,)


def test_sender_with_direct_measurement() -> None:
    wire = SENDER_BYTES + h("00 05 000c 0000000a 00000000 00000000")
    p = SenderPacket(SEQ, TS, EE, SSID, (DirectMeasurement(10, 0, 0),))
    assert codec.encode_sender(p) == wire
    assert codec.decode_sender(wire) == p


def test_authenticated_sender_with_tlvs_ends_with_hmac_tlv() -> None:
    dm = h("00 05 000c 0000000a 00000000 00000000")
    head = SENDER_AUTH_HEAD
    # RFC 8972 4.8: HMAC TLV over the Sequence Number and the TLVs before it.
    wire = head + mac(head) + dm + h("00 08 0010") + mac(h("01020304"), dm)
    p = SenderPacket(SEQ, TS, EE, SSID, (DirectMeasurement(10, 0, 0),))
    assert codec.encode_sender(p, KEY) == wire
    decoded = codec.decode_sender(wire, KEY)
    assert decoded.tlvs == (DirectMeasurement(10, 0, 0), Hmac(mac(h("01020304"), dm)))


def test_value_of_wrong_length_is_malformed_and_keeps_raw_octets() -> None:
    raw = h("00 05 0004 00000001")  # Direct Measurement needs 12 octets
    after = h("00 c8 0001 ff")
    packet = codec.decode_sender(SENDER_BYTES + raw + after)
    assert packet.tlvs == (MalformedTlv(raw, 0), UnknownTlv(200, b"\xff"))
    reflected = codec.reflect_tlvs(packet.tlvs)
    assert codec.encode_tlv(reflected[0]) == h("40 05 0004 00000001")


def test_tlv_running_past_the_end_is_malformed() -> None:
    raw = h("00 05 000c 0000")
    packet = codec.decode_sender(SENDER_BYTES + raw)
    assert packet.tlvs == (MalformedTlv(raw, 0),)
    assert codec.encode_tlv(codec.reflect_tlvs(packet.tlvs)[0]) == h("40 05 000c 0000")


def test_trailing_zeros_are_mbz_padding() -> None:
    wire = SENDER_BYTES + h("00 05 000c 0000000a 00000000 00000000") + bytes(20)
    p = codec.decode_sender(wire)
    assert p.tlvs == (DirectMeasurement(10, 0, 0),)
    assert p.pad_to == len(wire)
    assert codec.encode_sender(p) == wire


def test_twamp_light_sender_packets_decode() -> None:
    # RFC 5357 4.1.2: Sequence Number, Timestamp, Error Estimate, then Packet Padding (here the
    # 27 octets RFC 5357 recommends, so the reflector's 41-octet answer fits).
    bare = h("00000007 83aa7e8000000000 0001")
    assert codec.decode_sender(bare) == SenderPacket(7, 0x83AA7E8000000000, 1, 0)
    padded = bare + bytes(27)
    assert codec.decode_sender(padded) == SenderPacket(7, 0x83AA7E8000000000, 1, 0)


def test_twamp_light_reflector_packet_decodes() -> None:
    wire = REFLECTOR_BYTES[:41]  # TWAMP-Light: no 3 MBZ octets after the TTL
    assert codec.decode_reflector(wire) == REFLECTOR


def test_twamp_light_replies_cut_short_keep_every_timestamp() -> None:
    # Responders that stop after the last field they fill (38 octets: no MBZ, no TTL) or after
    # the Sender Timestamp (36): what is missing is unknown (None), not malformed.
    assert codec.decode_reflector(REFLECTOR_BYTES[:38]) == dataclasses.replace(
        REFLECTOR, sender_ttl=None
    )
    assert codec.decode_reflector(REFLECTOR_BYTES[:36]) == dataclasses.replace(
        REFLECTOR, sender_ttl=None, sender_error_estimate=None
    )


def test_too_short_is_malformed() -> None:
    with pytest.raises(codec.MalformedPacket):
        codec.decode_sender(bytes(13))
    with pytest.raises(codec.MalformedPacket):
        codec.decode_reflector(bytes(35))
    with pytest.raises(codec.MalformedPacket):
        codec.decode_sender(bytes(111), KEY)
    with pytest.raises(codec.MalformedPacket):
        codec.decode_reflector(bytes(111), KEY)
