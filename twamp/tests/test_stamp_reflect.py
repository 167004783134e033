"""What a Session-Reflector returns for the sender's TLVs (RFC 8972 section 4)."""

from __future__ import annotations

import dataclasses

from srv6pm.twamp import codec
from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig, ReflectorStats
from srv6pm.twamp.transport import Datagram


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


class _NoCounters:
    def block_packets(self, flow: str, block: int) -> int | None:
        return None


SENDER, RETURN = "2001:db8::1", ("fc00:0:2::e", "fc00:0:1::d6")
DECLARED = {7: ReflectedFlows("f", "r", frozenset({(SENDER, RETURN)}))}


def reflect(ssid: int, source: str, segments: tuple[str, ...]) -> tuple[ReflectorStats, int]:
    """What the reflector counted, and how many replies it sent, for one probe asking for a
    return path."""
    sent: list[bytes] = []
    reflector = Reflector(
        ReflectorConfig(sessions=DECLARED),
        _NoCounters(),
        lambda data, _to: sent.append(data) or True,
    )
    probe = codec.SenderPacket(1, 2, 3, ssid, (codec.ReturnPath(segments, None, None),))
    reflector.handle(Datagram(codec.encode_sender(probe), (source, 50000), 10, 64, 0))
    return reflector.stats, len(sent)


def test_a_declared_return_path_is_accepted() -> None:
    stats, replies = reflect(7, SENDER, RETURN)
    assert (stats.return_paths_refused, replies) == (0, 1)


def test_a_return_path_nobody_declared_is_refused_and_counted() -> None:
    forged = ("fc00:0:66::e",)
    for ssid, source, segments in (
        (7, SENDER, forged),
        (7, "2001:db8::66", RETURN),
        (9, SENDER, RETURN),
    ):
        stats, replies = reflect(ssid, source, segments)
        assert (stats.return_paths_refused, replies) == (1, 1), (ssid, source, segments)


def test_the_stateful_sequence_table_is_bounded_and_says_when_it_forgets() -> None:
    replies: list[bytes] = []
    config = ReflectorConfig(stateful=True, max_sequences=2)
    reflector = Reflector(config, _NoCounters(), lambda data, _to: replies.append(data) or True)

    def probe(source: str) -> int:
        data = codec.encode_sender(codec.SenderPacket(0, 2, 3, 1))
        reflector.handle(Datagram(data, (source, 1), 10, 64, 0))
        return codec.decode_reflector(replies[-1]).seq

    assert [probe("2001:db8::1"), probe("2001:db8::1"), probe("2001:db8::2")] == [0, 1, 0]
    assert probe("2001:db8::1") == 2  # heard recently: kept
    assert probe("2001:db8::3") == 0  # the table is full: ::2, least recently heard, goes
    assert reflector.stats.sequences_evicted == 1
    assert probe("2001:db8::2") == 0  # starts again


def test_the_sender_sets_u_and_the_reflector_clears_it_on_what_it_recognises() -> None:
    """RFC 8972 section 4: U = 1 from the Session-Sender, cleared by a reflector that knows the
    TLV; an unknown TLV keeps it."""
    sent = (
        codec.DirectMeasurement(5, 0, 0, flags=codec.FLAG_U),
        codec.ReturnPath(("2001:db8::1",), None, None, flags=codec.FLAG_U),
        codec.UnknownTlv(77, b"\x00\x00", codec.FLAG_U),
    )
    got = codec.reflect_tlvs(sent)
    assert [t.flags for t in got] == [0, 0, codec.FLAG_U]
