"""Codec properties: round trips, sizes, and the rule that decoding only ever raises StampError."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srv6pm.twamp import codec
from srv6pm.twamp.errors import StampError
from stamp_strategies import reflector, sender, tlvs_no_hmac

KEY = b"k" * 32


@given(sender)
def test_sender_round_trip(p: codec.SenderPacket) -> None:
    assert codec.decode_sender(codec.encode_sender(p)) == p


@given(reflector)
def test_reflector_round_trip(p: codec.ReflectorPacket) -> None:
    assert codec.decode_reflector(codec.encode_reflector(p)) == p


def _without_hmac(tlvs: tuple[codec.Tlv, ...]) -> tuple[codec.Tlv, ...]:
    return tuple(t for t in tlvs if not isinstance(t, codec.Hmac))


@given(sender)
def test_authenticated_sender_round_trip(p: codec.SenderPacket) -> None:
    got = codec.decode_sender(codec.encode_sender(p, KEY), KEY)
    assert dataclasses.replace(got, tlvs=()) == dataclasses.replace(p, tlvs=())
    # The HMAC TLV goes after every TLV but trailing Extra Padding; the rest keep their order.
    assert _without_hmac(got.tlvs) == _without_hmac(p.tlvs)
    if p.tlvs:
        at = next(i for i, t in enumerate(got.tlvs) if isinstance(t, codec.Hmac))
        assert all(isinstance(t, codec.ExtraPadding) for t in got.tlvs[at + 1 :])


@given(reflector)
def test_authenticated_reflector_round_trip(p: codec.ReflectorPacket) -> None:
    got = codec.decode_reflector(codec.encode_reflector(p, KEY), KEY)
    assert dataclasses.replace(got, tlvs=()) == dataclasses.replace(p, tlvs=())
    assert _without_hmac(got.tlvs) == _without_hmac(p.tlvs)


@given(sender, st.integers(1, 200))
def test_pad_to_adds_zeros_and_round_trips(p: codec.SenderPacket, extra: int) -> None:
    natural = len(codec.encode_sender(p))
    padded = dataclasses.replace(p, pad_to=natural + extra)
    wire = codec.encode_sender(padded)
    assert len(wire) == natural + extra
    assert wire[natural:] == bytes(extra)
    assert codec.decode_sender(wire) == padded


@given(sender)
def test_pad_to_below_the_natural_size_changes_nothing(p: codec.SenderPacket) -> None:
    wire = codec.encode_sender(p)
    assert codec.encode_sender(dataclasses.replace(p, pad_to=len(wire) - 1)) == wire


@given(tlvs_no_hmac, st.sampled_from([None, KEY]))
def test_sizes_are_symmetric(tlvs: tuple[codec.Tlv, ...], key: bytes | None) -> None:
    # RFC 8762 4.2.1: the sender's packet is as long as the reflector's answer.
    probe = codec.SenderPacket(1, 2, 3, 4, tlvs)
    wire = codec.encode_sender(probe, key)
    answer = codec.make_reflection(
        codec.decode_sender(wire, key),
        seq=9,
        timestamp=8,
        error_estimate=7,
        receive_timestamp=6,
        sender_ttl=64,
    )
    assert len(codec.encode_reflector(answer, key)) == len(wire)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=500)
@given(st.binary(max_size=300), st.sampled_from([None, KEY]))
def test_decoding_arbitrary_bytes_raises_only_stamp_errors(data: bytes, key: bytes | None) -> None:
    for decode in (codec.decode_sender, codec.decode_reflector):
        with contextlib.suppress(StampError):
            decode(data, key)


@settings(max_examples=300)
@given(sender, st.data())
def test_decoding_mutated_packets_raises_only_stamp_errors(
    p: codec.SenderPacket, data: st.DataObject
) -> None:
    wire = bytearray(codec.encode_sender(p))
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(wire) - 1))
        wire[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(wire)))
    for blob in (bytes(wire), bytes(wire[:cut])):
        for decode in (codec.decode_sender, codec.decode_reflector):
            with contextlib.suppress(StampError):
                decode(blob)


@given(st.binary(min_size=44, max_size=200))
def test_unauthenticated_decode_of_44_octets_and_more_never_fails(data: bytes) -> None:
    # Past the minimum length, bad TLVs are reported in the result, not raised.
    codec.decode_sender(data)
    codec.decode_reflector(data)


@given(st.binary(min_size=44, max_size=200))
def test_reencoding_a_decoded_packet_keeps_its_length(data: bytes) -> None:
    p = codec.decode_sender(data)
    wire = codec.encode_sender(p)
    assert len(wire) == len(data)
    reflected = dataclasses.replace(p, tlvs=codec.reflect_tlvs(p.tlvs))
    assert len(codec.encode_sender(reflected)) == len(data)


@pytest.mark.parametrize(
    "bad",
    [
        codec.SenderPacket(1 << 32, 0, 0, 0),
        codec.SenderPacket(0, 1 << 64, 0, 0),
        codec.SenderPacket(0, 0, 1 << 16, 0),
        codec.SenderPacket(0, 0, 0, -1),
        codec.SenderPacket(0, 0, 0, 0, (codec.DirectMeasurement(1 << 32, 0, 0),)),
        codec.SenderPacket(0, 0, 0, 0, (codec.ClassOfService(dscp1=64),)),
        codec.SenderPacket(0, 0, 0, 0, (codec.Hmac(b"short"),)),
        codec.SenderPacket(0, 0, 0, 0, (codec.UnknownTlv(300, b""),)),
        codec.SenderPacket(0, 0, 0, 0, (codec.ExtraPadding(70000),)),
    ],
)
def test_encoding_out_of_range_fields_is_a_value_error(bad: codec.SenderPacket) -> None:
    with pytest.raises(ValueError):
        codec.encode_sender(bad)


def test_reflector_ttl_out_of_range() -> None:
    with pytest.raises(ValueError):
        codec.encode_reflector(codec.ReflectorPacket(0, 0, 0, 0, 0, 0, 0, 0, 256))


def test_memoryview_and_bytearray_decode() -> None:
    wire = codec.encode_sender(codec.SenderPacket(5, 6, 7, 8, (codec.DirectMeasurement(1, 2, 3),)))
    expected = codec.decode_sender(wire)
    assert codec.decode_sender(bytearray(wire)) == expected
    assert codec.decode_sender(memoryview(wire)) == expected


def test_make_reflection_copies_the_sender_fields() -> None:
    probe = codec.SenderPacket(11, 12, 13, 14, (codec.UnknownTlv(99, b"x"),))
    answer = codec.make_reflection(
        probe, seq=11, timestamp=20, error_estimate=21, receive_timestamp=19, sender_ttl=63
    )
    assert answer == codec.ReflectorPacket(
        11, 20, 21, 14, 19, 11, 12, 13, 63, (codec.UnknownTlv(99, b"x", codec.FLAG_U),)
    )
