"""What the Session-Sender makes of replies from every kind of reflector: TWAMP-Light responders
(RFC 5357 4.2.1 and shorter symmetric variants), reflectors that flag our TLVs, and replies whose
HMAC TLV does not verify."""

from __future__ import annotations

import dataclasses

from srv6pm.twamp import codec
from srv6pm.twamp.error_estimate import S_BIT, Z_BIT
from srv6pm.twamp.sender import SenderConfig, SenderSession
from srv6pm.twamp.timestamps import ntp_from_unix_ns, ptp_from_unix_ns
from srv6pm.twamp.transport import Datagram

PERIOD = 1_000_000_000
NOW = 1_800_000_000 * PERIOD + PERIOD // 2  # the middle of a block
KEY = b"k" * 32


class _Counters:
    def block_packets(self, flow: str, block: int) -> int | None:
        return 100


def session(key: bytes | None = None) -> tuple[SenderSession, list[bytes]]:
    sent: list[bytes] = []
    config = SenderConfig(
        name="s",
        ssid=7,
        reflector=("2001:db8::2", 862),
        forward_flow="fwd",
        reverse_flow="rev",
        period_ns=PERIOD,
        key=key,
        clock_synchronised=True,
    )
    s = SenderSession(config, _Counters(), lambda data, _to: sent.append(data) or True, lambda: NOW)
    s._probe(block=41)
    return s, sent


def answer(probe: codec.SenderPacket, tlvs: tuple[codec.Tlv, ...], ssid: int = 7):
    return codec.ReflectorPacket(
        seq=probe.seq,
        timestamp=ntp_from_unix_ns(NOW + 300_000),  # T3
        error_estimate=0x8001,
        ssid=ssid,
        receive_timestamp=ntp_from_unix_ns(NOW + 200_000),  # T2
        sender_seq=probe.seq,
        sender_timestamp=probe.timestamp,
        sender_error_estimate=probe.error_estimate,
        sender_ttl=64,
        tlvs=tlvs,
    )


def deliver(s: SenderSession, wire: bytes) -> None:
    s.handle(Datagram(wire, ("2001:db8::2", 862), NOW + 1_000_000, 64, 0))


def test_twamp_light_replies_give_delay_and_say_why_there_is_no_loss() -> None:
    for length in (41, 38, 36):
        s, sent = session()
        probe = codec.decode_sender(sent[0])
        # a TWAMP-Light responder: SSID octets zero, no TLVs, cut after `length` octets
        deliver(s, codec.encode_reflector(answer(probe, (), ssid=0))[:length])
        assert (s.stats.received, s.stats.malformed, s.stats.unmatched) == (1, 0, 0), length
        (delay,) = s.results.delay
        assert delay.two_way_ns == 1_000_000 - 100_000
        (loss,) = s.results.loss
        assert not loss.valid and "no Direct Measurement TLV" in loss.reason


def test_a_reply_for_another_session_is_not_ours() -> None:
    s, sent = session()
    deliver(s, codec.encode_reflector(answer(codec.decode_sender(sent[0]), (), ssid=8)))
    assert (s.stats.received, s.stats.unmatched) == (0, 1)


def test_flags_the_reflector_set_on_direct_measurement_become_the_reason() -> None:
    for flags, words in (
        (codec.FLAG_U, "counters unavailable"),
        (codec.FLAG_M, "malformed"),
        (codec.FLAG_I, "HMAC TLV wrong"),
    ):
        s, sent = session()
        dm = codec.DirectMeasurement(100, 99, 100, flags=flags)
        deliver(s, codec.encode_reflector(answer(codec.decode_sender(sent[0]), (dm,))))
        (loss,) = s.results.loss
        assert not loss.valid and words in loss.reason, flags
        assert len(s.results.delay) == 1


def test_a_reply_whose_hmac_tlv_fails_still_gives_delay_but_no_loss() -> None:
    s, sent = session(KEY)
    probe = codec.decode_sender(sent[0], KEY)
    dm = codec.DirectMeasurement(100, 99, 100)
    wire = bytearray(codec.encode_reflector(answer(probe, (dm,)), KEY))
    wire[112 + 8] ^= 1  # R_RxC changed in flight: the HMAC TLV no longer matches
    deliver(s, bytes(wire))
    (loss,) = s.results.loss
    assert not loss.valid and "did not verify" in loss.reason
    assert len(s.results.delay) == 1 and s.stats.auth_failures == 0


def test_a_valid_reply_gives_loss_both_ways() -> None:
    s, sent = session()
    dm = codec.DirectMeasurement(100, 98, 100)
    deliver(s, codec.encode_reflector(answer(codec.decode_sender(sent[0]), (dm,))))
    (loss,) = s.results.loss
    assert loss.valid and loss.forward is not None and loss.forward.lost == 2
    assert dataclasses.asdict(loss.reverse) == {"tx": 100, "rx": 100}


def test_a_reflector_answering_in_ptp_format_gives_the_same_delays() -> None:
    # RFC 8762 4.2.1: the Z bit of the reflector's Error Estimate says T2 and T3 are PTPv2.
    s, sent = session()
    reply = answer(codec.decode_sender(sent[0]), ())
    ptp = dataclasses.replace(
        reply,
        error_estimate=0x8001 | Z_BIT,
        timestamp=ptp_from_unix_ns(NOW + 300_000),
        receive_timestamp=ptp_from_unix_ns(NOW + 200_000),
    )
    deliver(s, codec.encode_reflector(ptp))
    (delay,) = s.results.delay
    assert (delay.two_way_ns, delay.forward_ns, delay.reverse_ns) == (900_000, 200_000, 700_000)


def test_a_ptp_reply_with_nanoseconds_out_of_range_is_malformed_and_the_probe_still_pending() -> (
    None
):
    s, sent = session()
    reply = answer(codec.decode_sender(sent[0]), ())
    bad = dataclasses.replace(reply, error_estimate=0x8001 | Z_BIT, timestamp=10**9)
    deliver(s, codec.encode_reflector(bad))
    assert (s.stats.received, s.stats.malformed, len(s.results.delay)) == (0, 1, 0)
    deliver(s, codec.encode_reflector(reply))  # the good reply that follows is matched
    assert s.stats.received == 1


def test_a_clock_that_loses_its_source_voids_loss_and_says_so_in_later_probes() -> None:
    s, sent = session()
    s.set_clock_synchronised(False)
    s._probe(block=42)
    probe = codec.decode_sender(sent[1])
    assert not probe.error_estimate & S_BIT
    deliver(s, codec.encode_reflector(answer(probe, (codec.DirectMeasurement(100, 98, 100),))))
    (loss,) = s.results.loss
    assert not loss.valid and "clocks not synchronised" in loss.reason


def test_a_transport_that_writes_t1_as_it_sends_is_taken_at_its_word() -> None:
    """A data plane that sends the probe itself (VPP) writes T1 as the probe leaves, later than
    the session's clock read it: delay counts from the T1 the reply echoes."""
    s, sent = session()
    s.t1_on_the_wire = True
    probe = codec.decode_sender(sent[0])
    stamped = dataclasses.replace(probe, timestamp=ntp_from_unix_ns(NOW + 50_000))
    deliver(s, codec.encode_reflector(answer(stamped, ())))
    (delay,) = s.results.delay
    assert (delay.two_way_ns, delay.forward_ns, delay.reverse_ns) == (850_000, 150_000, 700_000)
