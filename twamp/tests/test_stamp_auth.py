"""Authenticated mode (RFC 8762 4.2.2 / 4.3.2 base HMAC, RFC 8972 4.8 HMAC TLV)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from srv6pm.twamp import auth, codec
from srv6pm.twamp.codec import AuthenticationFailed

Decode = Callable[..., Any]
KEY = b"right key, 32 octets long......."
WRONG = b"wrong key, 32 octets long......."
TLVS: tuple[codec.Tlv, ...] = (
    codec.DirectMeasurement(100, 0, 0),
    codec.ClassOfService(46),
    codec.UnknownTlv(200, b"abc"),
)
SENDER = codec.SenderPacket(7, 0x1122334455667788, 0x8101, 3, TLVS)
REFLECTOR = codec.ReflectorPacket(8, 9, 0x0101, 3, 10, 7, 0x1122334455667788, 0x8101, 64, TLVS)


@pytest.fixture(params=["sender", "reflector"])
def signed(request: pytest.FixtureRequest) -> tuple[bytes, Decode]:
    if request.param == "sender":
        return codec.encode_sender(SENDER, KEY), codec.decode_sender
    return codec.encode_reflector(REFLECTOR, KEY), codec.decode_reflector


def test_right_key_verifies(signed: tuple[bytes, Decode]) -> None:
    wire, decode = signed
    packet = decode(wire, KEY)
    assert packet.tlvs[:3] == TLVS
    assert isinstance(packet.tlvs[3], codec.Hmac)


def test_wrong_key_fails(signed: tuple[bytes, Decode]) -> None:
    wire, decode = signed
    with pytest.raises(AuthenticationFailed):
        decode(wire, WRONG)


def test_every_flipped_bit_fails(signed: tuple[bytes, Decode]) -> None:
    wire, decode = signed
    hmac_tlv_flags = len(wire) - 20  # not covered by any HMAC, see the next test
    for octet in range(len(wire)):
        if octet == hmac_tlv_flags:
            continue
        for bit in range(8):
            bad = bytearray(wire)
            bad[octet] ^= 1 << bit
            with pytest.raises(AuthenticationFailed):
                decode(bytes(bad), KEY)


def test_flags_of_the_hmac_tlv_are_not_covered(signed: tuple[bytes, Decode]) -> None:
    # The HMAC TLV covers the TLVs *before* it (RFC 8972 4.8); its own flags octet is where a
    # reflector reports I, so it must stay outside the digest.
    wire, decode = signed
    bad = bytearray(wire)
    bad[len(wire) - 20] |= codec.FLAG_I
    packet = decode(bytes(bad), KEY)
    assert packet.tlvs[-1].flags == codec.FLAG_I


def test_tlvs_without_hmac_tlv_fail() -> None:
    base = codec.encode_sender(dataclasses.replace(SENDER, tlvs=()), KEY)
    with pytest.raises(AuthenticationFailed):
        codec.decode_sender(base + codec.encode_tlv(codec.DirectMeasurement(1, 2, 3)), KEY)


def test_tlv_after_the_hmac_tlv_fails() -> None:
    wire = codec.encode_sender(SENDER, KEY)
    with pytest.raises(AuthenticationFailed):
        codec.decode_sender(wire + codec.encode_tlv(codec.UnknownTlv(201, b"x")), KEY)


def test_zero_padding_after_the_hmac_tlv_is_fine() -> None:
    wire = codec.encode_sender(dataclasses.replace(SENDER, pad_to=300), KEY)
    assert len(wire) == 300
    assert codec.decode_sender(wire, KEY).pad_to == 300


def test_mark_mode_reports_the_failure_instead_of_raising() -> None:
    wire = bytearray(codec.encode_sender(SENDER, KEY))
    wire[112 + 4] ^= 0xFF  # first octet of the Direct Measurement value
    packet = codec.decode_sender(bytes(wire), KEY, tlv_integrity="mark")
    assert packet.integrity_failed
    assert packet.tlvs[1:3] == TLVS[1:]  # as received: nothing to act on, everything to return
    reflected = codec.reflect_tlvs(packet.tlvs, packet.integrity_failed)
    # RFC 8972 4.8: every TLV comes back with I (U still marks the one it does not know).
    assert [t.flags for t in reflected] == [codec.FLAG_I] * 2 + [codec.FLAG_I | codec.FLAG_U] + [
        codec.FLAG_I
    ]


PADDING = codec.ExtraPadding(12)


def test_extra_padding_after_the_hmac_tlv_is_not_covered() -> None:
    # RFC 8972 4.8: the HMAC TLV follows every TLV except Extra Padding.
    wire = codec.encode_sender(
        dataclasses.replace(SENDER, tlvs=(*TLVS, codec.Hmac(), PADDING)), KEY
    )
    assert wire[-16:-12] == bytes.fromhex("00 01 000c")  # the padding stayed after the HMAC TLV
    bad = bytearray(wire)
    bad[-1] = 0xEE  # padding content: no HMAC covers it
    packet = codec.decode_sender(bytes(bad), KEY)
    assert not packet.integrity_failed
    assert isinstance(packet.tlvs[-2], codec.Hmac) and packet.tlvs[-1] == PADDING


def test_extra_padding_alone_needs_no_hmac_tlv() -> None:
    base = codec.encode_sender(dataclasses.replace(SENDER, tlvs=()), KEY)
    packet = codec.decode_sender(base + codec.encode_tlv(PADDING), KEY)
    assert packet.tlvs == (PADDING,) and not packet.integrity_failed


def test_misplaced_hmac_tlv_is_an_integrity_failure() -> None:
    # An HMAC TLV followed by anything but Extra Padding is out of place (RFC 8972 4.8), even
    # when its digest is right for what precedes it.
    base = codec.encode_sender(dataclasses.replace(SENDER, tlvs=()), KEY)
    mac = codec.Hmac(auth.digest(KEY, base[:4]))  # right for the (no) TLVs before it
    wire = base + codec.encode_tlv(mac) + codec.encode_tlv(TLVS[1])
    assert codec.decode_sender(wire, KEY, tlv_integrity="mark").integrity_failed
    with pytest.raises(AuthenticationFailed):
        codec.decode_sender(wire, KEY)


def test_mark_mode_still_raises_on_a_bad_base_hmac() -> None:
    wire = bytearray(codec.encode_sender(SENDER, KEY))
    wire[20] ^= 1
    with pytest.raises(AuthenticationFailed):
        codec.decode_sender(bytes(wire), KEY, tlv_integrity="mark")


def test_no_tlvs_no_hmac_tlv() -> None:
    wire = codec.encode_sender(dataclasses.replace(SENDER, tlvs=()), KEY)
    assert len(wire) == 112
    assert codec.decode_sender(wire, KEY).tlvs == ()


def test_reflector_keeps_hmac_tlv_flags() -> None:
    tlvs = (codec.DirectMeasurement(1, 2, 3), codec.Hmac(flags=codec.FLAG_I))
    wire = codec.encode_reflector(dataclasses.replace(REFLECTOR, tlvs=tlvs), KEY)
    got = codec.decode_reflector(wire, KEY)
    assert got.tlvs[-1].flags == codec.FLAG_I
