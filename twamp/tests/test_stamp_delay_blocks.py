"""Delay per block: the probes a session sent in one block, aggregated once each is answered or
lost; jitter pairs consecutive replies across blocks; a resumed session accounts for every block."""

from __future__ import annotations

from srv6pm.twamp import codec
from srv6pm.twamp.results import ResultStore
from srv6pm.twamp.sender import NOT_RUNNING, SenderConfig, SenderSession
from srv6pm.twamp.timestamps import ntp_from_unix_ns
from srv6pm.twamp.transport import Datagram

PERIOD = 1_000_000_000
BLOCK = 1_800_000_000
MS = 1_000_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class _Counters:
    def block_packets(self, flow: str, block: int) -> int | None:
        return 100


def session(clock: Clock, synced: bool = True, resume: int | None = None):
    sent: list[bytes] = []
    config = SenderConfig(
        name="s",
        ssid=7,
        reflector=("2001:db8::2", 862),
        forward_flow="fwd",
        reverse_flow="rev",
        period_ns=PERIOD,
        clock_synchronised=synced,
        timeout_ns=300 * MS,
        resume_from_block=resume,
    )
    store = ResultStore()
    s = SenderSession(config, _Counters(), lambda d, _to: sent.append(d) or True, clock, store)
    return s, sent, store


def reply(s: SenderSession, wire: bytes, t1: int, rtt_ns: int, synced: bool = True) -> None:
    probe = codec.decode_sender(wire)
    answer = codec.ReflectorPacket(
        seq=probe.seq,
        timestamp=ntp_from_unix_ns(t1 + rtt_ns // 2),
        error_estimate=0x8001 if synced else 0x0001,
        ssid=7,
        receive_timestamp=ntp_from_unix_ns(t1 + rtt_ns // 2),
        sender_seq=probe.seq,
        sender_timestamp=probe.timestamp,
        sender_error_estimate=probe.error_estimate,
        sender_ttl=64,
        tlvs=(),
    )
    s.handle(Datagram(codec.encode_reflector(answer), ("2001:db8::2", 862), t1 + rtt_ns, 64, 0))


def test_a_block_is_reported_once_every_probe_of_it_is_answered_or_lost():
    clock = Clock(BLOCK * PERIOD)
    s, sent, store = session(clock)
    rtts = [10 * MS, 12 * MS, 11 * MS, 30 * MS]
    times = []
    for i, _ in enumerate([*rtts, None]):  # five probes, the last never answered
        clock.now = BLOCK * PERIOD + i * 100 * MS
        times.append(clock.now)
        s._probe(None)
    for wire, t1, rtt in zip(sent, times, rtts, strict=False):
        reply(s, wire, t1, rtt)
    assert not store.delay_blocks  # the block is not over
    clock.now = (BLOCK + 1) * PERIOD + 10 * MS
    s.expire(clock.now)
    (blk,) = store.delay_blocks
    assert (blk.block, blk.probes_sent, blk.probes_lost) == (BLOCK, 5, 1)
    assert blk.two_way is not None and blk.forward is not None
    assert (blk.two_way.samples, blk.two_way.min_ns, blk.two_way.max_ns) == (4, 10 * MS, 30 * MS)
    assert blk.two_way.p50_ns == 11 * MS  # nearest rank of 10, 11, 12, 30
    assert blk.two_way.mean_ns == 15_750_000
    # |12-10| + |11-12| + |30-11| over 3 pairs
    assert blk.two_way.jitter_ns == round(22 * MS / 3)
    assert blk.forward.samples == 4 and blk.one_way_reason == ""


def test_jitter_pairs_the_first_reply_of_a_block_with_the_last_of_the_block_before():
    clock = Clock(BLOCK * PERIOD)
    s, sent, store = session(clock)
    for k, rtt in enumerate((10 * MS, 14 * MS)):
        clock.now = (BLOCK + k) * PERIOD
        s._probe(None)
        reply(s, sent[-1], clock.now, rtt)
    clock.now = (BLOCK + 2) * PERIOD
    s.expire(clock.now)
    first, second = store.delay_blocks
    assert first.two_way.jitter_ns == 0 and second.two_way.jitter_ns == 4 * MS


def test_one_way_delay_is_left_out_with_a_reason_when_a_clock_is_not_synchronised():
    clock = Clock(BLOCK * PERIOD)
    s, sent, store = session(clock)
    s._probe(None)
    reply(s, sent[0], clock.now, 10 * MS, synced=False)
    clock.now = (BLOCK + 1) * PERIOD
    s.expire(clock.now)
    (blk,) = store.delay_blocks
    assert blk.two_way is not None and blk.forward is None and blk.reverse is None
    assert "not synchronised" in blk.one_way_reason


def test_a_block_with_no_reply_is_reported_with_its_lost_probes():
    clock = Clock(BLOCK * PERIOD)
    s, _, store = session(clock)
    s._probe(None)
    clock.now = (BLOCK + 1) * PERIOD
    s.expire(clock.now)
    (blk,) = store.delay_blocks
    assert (blk.probes_sent, blk.probes_lost, blk.two_way) == (1, 1, None)
    assert blk.one_way_reason == "no reply"


def test_a_resumed_session_reports_the_blocks_it_missed_and_probes_the_last_one_if_it_can():
    # restarted early in block B: block B-1 can still be probed at this block's read point;
    # blocks B-4..B-2 are gone
    clock = Clock(BLOCK * PERIOD + 100 * MS)
    s, _, store = session(clock, resume=BLOCK - 4)
    next_loss = s._resume(clock.now, PERIOD // 2, BLOCK - 4)
    assert next_loss == BLOCK * PERIOD + PERIOD // 2
    assert [(r.block, r.reason) for r in store.loss] == [
        (b, NOT_RUNNING) for b in range(BLOCK - 4, BLOCK - 1)
    ]


def test_a_session_resumed_past_the_read_point_probes_the_block_before_at_once():
    clock = Clock(BLOCK * PERIOD + 700 * MS)
    s, _, store = session(clock, resume=BLOCK - 1)
    assert s._resume(clock.now, PERIOD // 2, BLOCK - 1) == clock.now
    assert not store.loss


def test_a_session_resumed_near_the_end_of_a_block_reports_the_block_before_not_measured():
    clock = Clock(BLOCK * PERIOD + 900 * MS)  # its reply could come after the colour flips
    s, _, store = session(clock, resume=BLOCK - 1)
    assert s._resume(clock.now, PERIOD // 2, BLOCK - 1) == (BLOCK + 1) * PERIOD + PERIOD // 2
    assert [(r.block, r.reason) for r in store.loss] == [(BLOCK - 1, NOT_RUNNING)]
