"""What a Session-Reflector returns for the sender's TLVs (RFC 8972 section 4)."""

from __future__ import annotations

import dataclasses
import ipaddress
import time

from srv6pm.twamp import codec
from srv6pm.twamp.error_estimate import Z_BIT
from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig, ReflectorStats
from srv6pm.twamp.timestamps import ntp_from_unix_ns, ptp_from_unix_ns, to_unix_ns
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
    assert codec.encode_tlv(tlv) == h("40 05")  # reserved flag bits go out as zero


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


def test_the_reflector_sets_the_flags_itself() -> None:
    # RFC 8972 section 4: U, M and I are the reflector's to set ("otherwise ... MUST be set to
    # 0"); reserved bits are zero on transmission.
    got = codec.reflect_tlvs(
        (codec.UnknownTlv(99, b"", codec.FLAG_I | 0x01), codec.ClassOfService(flags=0x5F))
    )
    assert [t.flags for t in got] == [codec.FLAG_U, 0]


def test_processing_stops_at_a_malformed_tlv() -> None:
    # "If a TLV is malformed, processing of extension TLVs MUST be stopped": the ones after it
    # come back unprocessed (U), the HMAC TLV excepted (it is still checked).
    tlvs = (
        codec.DirectMeasurement(1),
        codec.MalformedTlv(h("80 04 0001 00")),
        codec.DirectMeasurement(2),
        codec.Hmac(),
    )
    got = codec.reflect_tlvs(tlvs)
    assert [t.flags for t in got] == [0, codec.FLAG_M, codec.FLAG_U, 0]


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


# ---- the reflector acting on what it recognised -------------------------------------------


class _Counters:
    def __init__(self, packets: int | None) -> None:
        self.packets = packets

    def block_packets(self, flow: str, block: int) -> int | None:
        return self.packets


@dataclasses.dataclass
class Sent:
    reply: codec.ReflectorPacket
    destination: tuple[str, int]
    traffic_class: int | None
    ifindex: int | None
    mark: int | None = None


SENDER, RETURN = "2001:db8::1", ("fc00:0:2::e", "fc00:0:1::d6")
HERE = "2001:db8::99"
DECLARED = {7: ReflectedFlows("f", "r", frozenset({(SENDER, RETURN)}))}
KEY = b"k" * 32
NOW = 1_800_000_000_123_456_789


def make_reflector(packets: int | None = None, **config: object) -> tuple[Reflector, list[Sent]]:
    sent: list[Sent] = []
    key = config.get("key")

    def send(
        data: bytes,
        to: tuple[str, int],
        traffic_class: int | None = None,
        ifindex: int | None = None,
        mark: int | None = None,
    ) -> bool:
        reply = codec.decode_reflector(data, key, tlv_integrity="mark")  # type: ignore[arg-type]
        sent.append(Sent(reply, to, traffic_class, ifindex, mark))
        return True

    settings = {"sessions": DECLARED, "port": 8620, **config}
    return Reflector(ReflectorConfig(**settings), _Counters(packets), send), sent  # type: ignore[arg-type]


def probe(
    reflector: Reflector,
    *tlvs: codec.Tlv,
    ssid: int = 7,
    source: str = SENDER,
    traffic_class: int = 0,
    key: bytes | None = None,
    wire: bytes | None = None,
) -> None:
    data = wire or codec.encode_sender(codec.SenderPacket(1, 2, 3, ssid, tlvs), key)
    reflector.handle(Datagram(data, (source, 50000), 10, 64, traffic_class, HERE, 4))


def reflect(ssid: int, source: str, segments: tuple[str, ...]) -> tuple[ReflectorStats, int, int]:
    """What the reflector counted, how many replies it sent and the Return Path's flags, for
    one probe asking for a return path."""
    reflector, sent = make_reflector()
    probe(reflector, codec.ReturnPath(segments, flags=codec.FLAG_U), ssid=ssid, source=source)
    return reflector.stats, len(sent), sent[0].reply.tlvs[0].flags


def test_a_declared_return_path_is_accepted() -> None:
    assert reflect(7, SENDER, RETURN)[::2] == (ReflectorStats(received=1, reflected=1), 0)


def test_a_return_path_nobody_declared_is_refused_counted_and_answered_with_U() -> None:
    forged = ("fc00:0:66::e",)
    for ssid, source, segments in (
        (7, SENDER, forged),
        (7, "2001:db8::66", RETURN),
        (9, SENDER, RETURN),
    ):
        stats, replies, flags = reflect(ssid, source, segments)
        assert (stats.return_paths_refused, replies, flags) == (1, 1, codec.FLAG_U)


def test_a_return_address_is_never_followed() -> None:
    # RFC 9503 4.1.2: replies to another address would make the node a reflector of floods.
    reflector, sent = make_reflector()
    probe(reflector, codec.ReturnPath(address="2001:db8::bad"))
    assert sent[0].destination == (SENDER, 50000)
    assert sent[0].reply.tlvs[0].flags == codec.FLAG_U
    assert reflector.stats.return_paths_refused == 1


def test_control_code_no_reply_requested() -> None:
    # RFC 9503 4.1.1: Reply Request flag 0 = no reply (one-way measurement).
    reflector, sent = make_reflector()
    probe(reflector, codec.ReturnPath(control_code=0))
    assert sent == [] and reflector.stats.replies_suppressed == 1


def test_control_code_reply_on_the_same_link() -> None:
    reflector, sent = make_reflector()
    probe(reflector, codec.ReturnPath(control_code=1))
    assert (sent[0].ifindex, sent[0].reply.tlvs[0].flags) == (4, 0)


def test_destination_node_address() -> None:
    # RFC 9503 section 3: recognised when it names the address the probe reached, else U.
    reflector, sent = make_reflector()
    probe(reflector, codec.DestinationNodeAddress(HERE), codec.DestinationNodeAddress("::1"))
    assert [t.flags for t in sent[0].reply.tlvs] == [0, codec.FLAG_U]


def test_class_of_service_is_filled_and_dscp1_applied() -> None:
    # RFC 8972 4.4: DSCP2 and ECN as received; the reply carries DSCP1 unless policy refuses
    # it, which RP = 1 tells.
    reflector, sent = make_reflector(allowed_dscp=frozenset({46}))
    received = 34 << 2 | 1  # AF41, ECT(1)
    probe(reflector, codec.ClassOfService(dscp1=46), traffic_class=received)
    probe(reflector, codec.ClassOfService(dscp1=10), traffic_class=received)
    assert sent[0].reply.tlvs[0] == codec.ClassOfService(46, 34, 1, 0)
    assert sent[0].traffic_class == 46 << 2
    assert sent[1].reply.tlvs[0] == codec.ClassOfService(10, 34, 1, 1)
    assert sent[1].traffic_class is None


def test_location_reports_ports_and_addresses() -> None:
    # RFC 8972 4.2: generic Source/Destination IP requests are answered with the IPv6 types;
    # MAC requests cannot be (no link layer on a UDP socket): U.
    reflector, sent = make_reflector()
    ask = (
        codec.SubTlv(codec.LocationSubType.SOURCE_IP, bytes(16)),
        codec.SubTlv(codec.LocationSubType.DESTINATION_IP, bytes(16)),
        codec.SubTlv(codec.LocationSubType.SOURCE_MAC, bytes(8)),
    )
    probe(reflector, codec.Location(sub_tlvs=ask))
    (location,) = sent[0].reply.tlvs
    assert isinstance(location, codec.Location)
    assert (location.dst_port, location.src_port, location.flags) == (8620, 50000, 0)
    assert [(s.type, s.flags) for s in location.sub_tlvs] == [
        (codec.LocationSubType.SOURCE_IPV6, 0),
        (codec.LocationSubType.DESTINATION_IPV6, 0),
        (codec.LocationSubType.SOURCE_MAC, codec.FLAG_U),
    ]
    assert location.sub_tlvs[0].value == ipaddress.IPv6Address(SENDER).packed
    assert location.sub_tlvs[1].value == ipaddress.IPv6Address(HERE).packed


def test_timestamp_information_says_how_t2_and_t3_are_taken() -> None:
    reflector, sent = make_reflector()
    probe(reflector, codec.TimestampInformation())
    # free-running clock (5), software-local timestamps (2) on both sides
    assert sent[0].reply.tlvs[0] == codec.TimestampInformation(5, 2, 5, 2)


def test_direct_measurement_filled_or_U() -> None:
    for packets, expected in ((41, codec.DirectMeasurement(9, 41, 41)), (None, None)):
        reflector, sent = make_reflector(packets)
        probe(reflector, codec.DirectMeasurement(9))
        (dm,) = sent[0].reply.tlvs
        if expected:
            assert dm == expected
        else:
            assert dm.flags == codec.FLAG_U and reflector.stats.counters_unavailable == 1


def test_a_failed_hmac_tlv_comes_back_with_I_on_every_tlv_and_nothing_acted_on() -> None:
    reflector, sent = make_reflector(41, key=KEY)
    good = codec.encode_sender(
        codec.SenderPacket(
            1, 2, 3, 7, (codec.DirectMeasurement(9), codec.ReturnPath(control_code=0))
        ),
        KEY,
    )
    bad = bytearray(good)
    bad[112 + 4] ^= 1  # S_TxC changed in flight
    probe(reflector, wire=bytes(bad))
    (reply,) = sent  # the no-reply Control Code was not acted on either
    assert [t.flags for t in reply.reply.tlvs] == [codec.FLAG_I] * 3
    assert reply.reply.tlvs[0] == codec.DirectMeasurement(9 ^ (1 << 24), flags=codec.FLAG_I)
    assert reflector.stats.tlv_integrity_failures == 1 and reflector.stats.reflected == 1


def test_the_stateful_sequence_table_is_bounded_and_says_when_it_forgets() -> None:
    reflector, sent = make_reflector(stateful=True, max_sequences=2)

    def seq(source: str) -> int:
        probe(reflector, ssid=1, source=source)
        return sent[-1].reply.seq

    assert [seq("2001:db8::1"), seq("2001:db8::1"), seq("2001:db8::2")] == [0, 1, 0]
    assert seq("2001:db8::1") == 2  # heard recently: kept
    assert seq("2001:db8::3") == 0  # the table is full: ::2, least recently heard, goes
    assert reflector.stats.sequences_evicted == 1
    assert seq("2001:db8::2") == 0  # starts again


def test_stateful_counters_kept_elsewhere_are_used_when_they_answer() -> None:
    shared = {("2001:db8::1", 1): 57}

    def sequences(source: str, ssid: int) -> int | None:
        if (source, ssid) not in shared:
            return None  # not kept there: counted here
        shared[source, ssid] += 1
        return shared[source, ssid] - 1

    reflector, sent = make_reflector(stateful=True, sequences=sequences)
    probe(reflector, ssid=1, source="2001:db8::1")
    probe(reflector, ssid=1, source="2001:db8::1")
    probe(reflector, ssid=1, source="2001:db8::2")
    assert [s.reply.seq for s in sent] == [57, 58, 0]


def test_t2_and_t3_come_in_the_format_the_probe_asks_for() -> None:
    # The probe's Error Estimate Z bit (RFC 8762 4.2.1): the reply repeats it in the reflector's
    # own Error Estimate, whose S bit and error stay the reflector's.
    for sender_ee, convert in ((0x0001, ntp_from_unix_ns), (0x4001, ptp_from_unix_ns)):
        reflector, sent = make_reflector(error_estimate=0x8002)
        wire = codec.encode_sender(codec.SenderPacket(1, 2, sender_ee, 7))
        reflector.handle(Datagram(wire, (SENDER, 50000), NOW, 64, 0, HERE, 4))
        reply = sent[0].reply
        assert reply.error_estimate == 0x8002 | sender_ee & Z_BIT
        assert reply.receive_timestamp == convert(NOW)
        t3 = to_unix_ns(reply.timestamp, bool(sender_ee & Z_BIT))  # from the real clock
        assert abs(t3 - time.time_ns()) < 10**9


def test_a_ptp_sender_timestamp_picks_the_direct_measurement_block_and_a_bad_one_gets_U() -> None:
    reflector, sent = make_reflector(41, period_ns=10**9)
    dm = codec.DirectMeasurement(9)
    for timestamp in (ptp_from_unix_ns(NOW), 10**9):  # nanoseconds 10^9: not a time
        wire = codec.encode_sender(codec.SenderPacket(1, timestamp, 0x4001, 7, (dm,)))
        reflector.handle(Datagram(wire, (SENDER, 50000), NOW, 64, 0, HERE, 4))
    assert sent[0].reply.tlvs[0] == codec.DirectMeasurement(9, 41, 41)
    assert sent[1].reply.tlvs[0].flags == codec.FLAG_U
    assert reflector.stats.counters_unavailable == 1


def test_replies_of_a_declared_session_carry_its_mark_and_others_none() -> None:
    """The mark is what steers a session's replies into its declared return path."""
    reflector, sent = make_reflector(reply_marks=lambda ssid: 0x5352_0000 + 0x10000 + ssid)
    probe(reflector, ssid=7)
    probe(reflector, ssid=8)
    assert [s.mark for s in sent] == [0x5352_0000 + 0x10000 + 7, None]
