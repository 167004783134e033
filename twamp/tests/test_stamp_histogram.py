"""Delay histograms per block (bins over fixed edges) and jitter as RFC 3393 / RFC 5481 IPDV:
known delays give exact counts."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srv6pm.twamp import maths
from srv6pm.twamp.results import DelayStats, ResultStore
from srv6pm.twamp.sender import SenderConfig, SenderSession
from test_stamp_delay_blocks import BLOCK, MS, PERIOD, Clock, _Counters, reply

US = 1_000


def test_each_value_falls_in_the_bin_its_edges_enclose():
    edges = [1 * MS, 5 * MS, 10 * MS]
    values = [-3, 0, 999_999, 1 * MS, 4 * MS, 5 * MS, 9_999_999, 10 * MS, 10**12]
    # [-inf, 1 ms) [1 ms, 5 ms) [5 ms, 10 ms) [10 ms, inf): an edge opens its bin
    assert maths.histogram(values, edges) == (3, 2, 2, 2)


def test_no_edges_no_histogram_and_edges_must_ascend():
    assert maths.histogram([1, 2, 3], []) == ()
    assert maths.histogram([], [5]) == (0, 0)
    with pytest.raises(ValueError, match="strictly ascending"):
        maths.histogram([1], [5, 5])


@given(
    st.lists(st.integers(-(10**12), 10**12), max_size=50),
    st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=10, unique=True),
)
def test_a_histogram_counts_every_value_once_in_its_bin(values: list[int], raw: list[int]):
    edges = sorted(raw)
    counts = maths.histogram(values, edges)
    assert len(counts) == len(edges) + 1 and sum(counts) == len(values)
    bounds = [None, *edges, None]
    for i, (low, high) in enumerate(itertools.pairwise(bounds)):
        inside = [v for v in values if (low is None or v >= low) and (high is None or v < high)]
        assert counts[i] == len(inside)


def test_ipdv_is_the_mean_absolute_difference_of_consecutive_delays():
    # RFC 3393 / RFC 5481 4.1: IPDV(i) = D(i) - D(i-1) for consecutive packets
    assert maths.ipdv_mean_abs([10, 13, 9, 9]) == round((3 + 4 + 0) / 3)
    assert maths.ipdv_mean_abs([13], previous=10) == 3  # the block before's last reply
    assert maths.ipdv_mean_abs([13]) == 0 and maths.ipdv_mean_abs([]) == 0


@given(
    st.lists(st.integers(-(10**12), 10**12), min_size=2, max_size=50),
    st.integers(-(10**12), 10**12),
)
def test_ipdv_ignores_a_constant_clock_offset(delays: list[int], offset: int):
    # a constant offset between the two clocks cancels in every difference (RFC 3393)
    assert maths.ipdv_mean_abs([d + offset for d in delays]) == maths.ipdv_mean_abs(delays)


def test_delay_stats_carry_the_histogram_of_their_samples():
    stats = DelayStats.of([2 * MS, 7 * MS, 7 * MS, 30 * MS], None, (5 * MS, 20 * MS))
    assert stats is not None and stats.histogram == (1, 2, 1)
    assert DelayStats.of([2 * MS], None).histogram == ()


def test_a_block_counts_its_replies_per_bin_in_every_direction():
    clock = Clock(BLOCK * PERIOD)
    edges = (5 * MS, 10 * MS, 20 * MS)
    config = SenderConfig(
        name="s",
        ssid=7,
        reflector=("2001:db8::2", 862),
        forward_flow="",
        reverse_flow="",
        period_ns=PERIOD,
        clock_synchronised=True,
        timeout_ns=300 * MS,
        histogram_edges_ns=edges,
    )
    sent: list[bytes] = []
    store = ResultStore()
    s = SenderSession(config, _Counters(), lambda d, _to: sent.append(d) or True, clock, store)
    rtts = [4 * MS, 8 * MS, 10 * MS, 12 * MS, 19 * MS, 26 * MS]  # one-way: half each way
    for i, rtt in enumerate(rtts):
        clock.now = BLOCK * PERIOD + i * 100 * MS
        s._probe(None)
        reply(s, sent[-1], clock.now, rtt)
    clock.now = (BLOCK + 1) * PERIOD
    s.expire(clock.now)
    (blk,) = store.delay_blocks
    assert blk.histogram_edges_ns == edges
    # two-way 4 | 8 | 10 12 19 | 26 ms
    assert blk.two_way.histogram == (1, 1, 3, 1)
    # each way 2 4 | 5 6 | 9.5 13 ms
    assert blk.forward.histogram == blk.reverse.histogram == (2, 3, 1, 0)
    assert blk.two_way.jitter_ns == round((4 + 2 + 2 + 7 + 7) * MS / 5)
