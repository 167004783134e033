"""Bursts, computation intervals and threshold events of a sender on a clock of ours: each probe
of a burst is a probe of its own, a burst is one liveness probe, each interval of the block gets
its own delay record, and thresholds fire on intervals (blocks without them) and on bursts."""

from __future__ import annotations

import pytest
from srv6pm.twamp import codec
from srv6pm.twamp.liveness import LivenessConfig, State
from srv6pm.twamp.results import ResultStore
from srv6pm.twamp.sender import SenderConfig, SenderSession
from srv6pm.twamp.thresholds import Metric, ThresholdConfig
from srv6pm.twamp.tlv import DirectMeasurement
from test_stamp_delay_blocks import BLOCK, MS, PERIOD, Clock, _Counters, reply

START = BLOCK * PERIOD


def sender(clock: Clock, **settings):
    sent: list[bytes] = []
    config = SenderConfig(
        name="s",
        ssid=7,
        reflector=("2001:db8::2", 862),
        forward_flow="fwd",
        reverse_flow="rev",
        period_ns=PERIOD,
        clock_synchronised=True,
        timeout_ns=300 * MS,
        **settings,
    )
    store = ResultStore()
    s = SenderSession(config, _Counters(), lambda d, _to: sent.append(d) or True, clock, store)
    return s, sent, store


def burst(s: SenderSession, sent: list[bytes], clock: Clock, rtts_ms: list[float | None]):
    """One burst at the clock's time, its probes answered after `rtts_ms` (None: never)."""
    first = len(sent)
    s._burst(None)
    for wire, rtt in zip(sent[first:], rtts_ms, strict=True):
        if rtt is not None:
            reply(s, wire, clock.now, round(rtt * MS))


def test_a_burst_is_probes_back_to_back_and_only_the_first_carries_the_counters():
    clock = Clock(START + 600 * MS)
    s, sent, _ = sender(clock, burst_size=3)
    s._burst(BLOCK - 1)
    probes = [codec.decode_sender(w) for w in sent]
    assert [p.seq for p in probes] == [0, 1, 2] and s.stats.sent == 3
    has_counters = [any(isinstance(t, DirectMeasurement) for t in p.tlvs) for p in probes]
    assert has_counters == [True, False, False]


def test_a_burst_is_one_liveness_probe_answered_when_any_of_its_probes_is():
    clock = Clock(START)
    s, sent, store = sender(clock, burst_size=3, liveness=LivenessConfig(2, 1, 50 * MS))
    burst(s, sent, clock, [None, None, 1])  # only the last answered: up
    clock.now += 100 * MS
    burst(s, sent, clock, [None, None, None])
    clock.now += 100 * MS
    burst(s, sent, clock, [None, None, None])
    s.expire(clock.now + 60 * MS)
    # six probes missed in a row, but two bursts: down after 2 (not after the first burst)
    assert [(c.state, c.seq, c.consecutive) for c in store.liveness] == [
        (State.UP, 0, 1),
        (State.DOWN, 6, 2),
    ]


def test_each_computation_interval_of_a_block_gets_its_own_delay_record():
    clock = Clock(START)
    edges = (5 * MS,)
    s, sent, store = sender(clock, computation_interval_ns=250 * MS, histogram_edges_ns=edges)
    rtts = [2, 4, 6, 8, 10, 12, 14, 16, 18, None]  # ms, one probe every 100 ms
    for i, rtt in enumerate(rtts):
        clock.now = START + i * 100 * MS
        burst(s, sent, clock, [rtt])
    clock.now = START + PERIOD + 300 * MS  # the last probe's timeout
    s.expire(clock.now)
    (blk,) = store.delay_blocks
    assert (blk.interval_ns, blk.probes_sent, blk.probes_lost) == (0, 10, 1)
    assert [
        (i.block, i.interval_start_ns - START, i.interval_ns, i.probes_sent, i.probes_lost)
        for i in store.delay_intervals
    ] == [
        (BLOCK, 0, 250 * MS, 3, 0),  # 0, 100, 200 ms
        (BLOCK, 250 * MS, 250 * MS, 2, 0),  # 300, 400
        (BLOCK, 500 * MS, 250 * MS, 3, 0),  # 500, 600, 700
        (BLOCK, 750 * MS, 250 * MS, 2, 1),  # 800, 900 (lost)
    ]
    first, second, _, last = store.delay_intervals
    assert (first.two_way.mean_ns, first.two_way.histogram) == (4 * MS, (2, 1))
    assert (second.two_way.mean_ns, second.two_way.histogram) == (9 * MS, (0, 2))
    # jitter pairs an interval's first reply with the interval before's last
    assert second.two_way.jitter_ns == 2 * MS and last.two_way.samples == 1
    assert blk.two_way.samples == 9


def test_an_interval_is_reported_once_its_probes_are_answered_or_lost():
    clock = Clock(START)
    s, sent, store = sender(clock, computation_interval_ns=100 * MS)
    clock.now = START + 90 * MS
    s._burst(None)  # answered 30 ms later, after its interval ended
    clock.now = START + 110 * MS
    s.expire(clock.now)
    assert not store.delay_intervals
    reply(s, sent[0], START + 90 * MS, 30 * MS)
    (interval,) = store.delay_intervals
    assert (interval.interval_start_ns, interval.probes_sent) == (START, 1)


def test_thresholds_fire_at_the_end_of_each_interval_and_on_each_burst():
    clock = Clock(START)
    thresholds = ThresholdConfig(percent=50, check_each_burst=True)
    s, sent, store = sender(
        clock, burst_size=2, computation_interval_ns=200 * MS, thresholds=thresholds
    )
    # bursts every 100 ms: two per interval; the third's mean (16 ms) is 60 % above the first's
    for i, rtts in enumerate([[10, 10], [10, 12], [16, 16], [16, 17], [7, 8]]):
        clock.now = START + i * 100 * MS
        burst(s, sent, clock, rtts)
    clock.now = START + 500 * MS
    s.expire(clock.now)
    assert [
        (e.metric, e.value_ns / MS, e.reference_ns / MS, e.first, e.accelerated, e.at_ns - START)
        for e in store.thresholds
    ] == [
        (Metric.TWO_WAY_MEAN, 10, 0, True, True, 0),  # the first burst (its last T1)
        (Metric.TWO_WAY_MEAN, 16, 10, False, True, 200 * MS),  # third burst, accelerated
        # interval [0, 200): mean 10.5 ms, 34 % under 16: nothing; [200, 400): 16.25 ms: none
        (Metric.TWO_WAY_MEAN, 7.5, 16, False, True, 400 * MS),  # the fifth: 53 % down
    ]
    assert s.thresholds is not None and s.thresholds.events == {Metric.TWO_WAY_MEAN: 3}


def test_without_intervals_thresholds_are_checked_on_each_block():
    clock = Clock(START)
    s, sent, store = sender(clock, thresholds=ThresholdConfig(absolute_ns=1 * MS))
    for block, rtt in enumerate([5, 5.5, 7]):
        clock.now = START + block * PERIOD
        burst(s, sent, clock, [rtt])
    clock.now = START + 3 * PERIOD
    s.expire(clock.now)
    assert [(e.value_ns, e.at_ns - START, e.accelerated) for e in store.thresholds] == [
        (5 * MS, PERIOD, False),  # the end of the block
        (7 * MS, 3 * PERIOD, False),
    ]
    assert not store.delay_intervals


def test_sender_settings_are_checked():
    with pytest.raises(ValueError, match="burst size must be >= 1"):
        sender(Clock(START), burst_size=0)
    with pytest.raises(ValueError, match="does not divide"):
        sender(Clock(START), computation_interval_ns=300 * MS)
    assert sender(Clock(START), computation_interval_ns=200 * MS)[0] is not None
