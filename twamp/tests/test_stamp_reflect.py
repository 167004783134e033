"""What a Session-Reflector returns for the sender's TLVs (RFC 8972 section 4)."""

from __future__ import annotations

import dataclasses

from srv6pm.twamp import codec


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


BASE = codec.encode_sender(codec.SenderPacket(1, 2, 3, 4))


def test_known_tlvs_come_back_unchanged() -> None:
    tlvs: tuple[codec.Tlv, ...] = (
        codec.DirectMeasurement(5, 0, 0),
        codec.ClassOfService(46),
        codec.ExtraPadding(8),
        codec.ReturnPath(("2001:db8::1",), None, None),
        codec.Hmac(bytes(16)),
    )
    assert codec.reflect_tlvs(tlvs) == tlvs


def test_unknown_tlv_gets_U() -> None:
    got = codec.reflect_tlvs((codec.UnknownTlv(7, b"\x01\x02", 0),))
    assert got == (codec.UnknownTlv(7, b"\x01\x02", codec.FLAG_U),)


def test_malformed_tlv_gets_M_and_keeps_its_octets() -> None:
    packet = codec.decode_sender(BASE + h("00 04 0002 abcd"))  # CoS needs 4 octets
    (tlv,) = codec.reflect_tlvs(packet.tlvs)
    assert isinstance(tlv, codec.MalformedTlv)
    assert tlv.flags == codec.FLAG_M
    assert codec.encode_tlv(tlv) == h("40 04 0002 abcd")


def test_malformed_fragment_shorter_than_a_header() -> None:
    packet = codec.decode_sender(BASE + h("01 05"))
    (tlv,) = codec.reflect_tlvs(packet.tlvs)
    assert codec.encode_tlv(tlv) == h("41 05")


def test_reflector_fills_counters_with_replace() -> None:
    probe = codec.decode_sender(
        codec.encode_sender(codec.SenderPacket(1, 2, 3, 4, (codec.DirectMeasurement(100, 0, 0),)))
    )
    filled = tuple(
        dataclasses.replace(t, r_rxc=99, r_txc=50) if isinstance(t, codec.DirectMeasurement) else t
        for t in codec.reflect_tlvs(probe.tlvs)
    )
    answer = codec.make_reflection(
        probe, seq=1, timestamp=5, error_estimate=3, receive_timestamp=4, sender_ttl=64, tlvs=filled
    )
    back = codec.decode_reflector(codec.encode_reflector(answer))
    assert back.tlvs == (codec.DirectMeasurement(100, 99, 50),)


def test_received_flags_are_kept_and_added_to() -> None:
    got = codec.reflect_tlvs((codec.UnknownTlv(9, b"", codec.FLAG_I),))
    assert got[0].flags == codec.FLAG_I | codec.FLAG_U
