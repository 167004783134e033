"""Loss / delay maths (RFC 8762, RFC 7679, RFC 7680, RFC 9341, RFC 3550 6.4.1, RFC 5481)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srv6pm.twamp import maths

ns = st.integers(-(10**18), 10**18)


@given(ns, st.integers(1, 10**12))
def test_block_of_contains_the_time(t: int, period: int) -> None:
    k = maths.block_of(t, period)
    assert k * period <= t < (k + 1) * period


def test_block_of_examples() -> None:
    assert maths.block_of(0, 10) == 0
    assert maths.block_of(19, 10) == 1
    assert maths.block_of(-1, 10) == -1
    with pytest.raises(ValueError):
        maths.block_of(5, 0)


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_counter_delta_undoes_a_wrapping_increment(old: int, inc: int) -> None:
    new = (old + inc) % 2**32
    assert maths.counter_delta(new, old) == inc


def test_counter_delta_examples() -> None:
    assert maths.counter_delta(5, 2**32 - 3) == 8
    assert maths.counter_delta(3, 1, width_bits=2) == 2
    assert maths.counter_delta(0, 3, width_bits=2) == 1
    with pytest.raises(ValueError):
        maths.counter_delta(2**32, 0)


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_loss_is_tx_minus_rx_and_never_clamped(tx: int, rx: int) -> None:
    lost, ratio = maths.loss(tx, rx)
    assert lost == tx - rx
    if tx == 0:
        assert ratio is None
    else:
        assert ratio is not None
        assert math.isclose(ratio * tx, lost, abs_tol=1e-6)
        assert (ratio < 0) == (rx > tx)


def test_loss_examples() -> None:
    assert maths.loss(100, 90) == (10, 0.1)
    assert maths.loss(0, 0) == (0, None)
    assert maths.loss(10, 12) == (-2, -0.2)  # more received than sent: miscounting, shown


@given(ns, st.integers(0, 10**12), st.integers(0, 10**12), st.integers(0, 10**12))
def test_two_way_delay_excludes_reflector_time(t1: int, fwd: int, resid: int, rev: int) -> None:
    t2, t3 = t1 + fwd, t1 + fwd + resid
    t4 = t3 + rev
    assert maths.two_way_delay_ns(t1, t2, t3, t4) == fwd + rev


@given(ns, ns, st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9))
def test_two_way_delay_ignores_clock_offset(t1: int, offset: int, f: int, r: int, res: int) -> None:
    # The reflector's clock is off by `offset`: T2, T3 shift, the two-way delay does not.
    t2, t3 = t1 + f + offset, t1 + f + res + offset
    t4 = t1 + f + res + r
    assert maths.two_way_delay_ns(t1, t2, t3, t4) == f + r


def test_one_way_only_when_both_synchronised() -> None:
    assert maths.one_way_delays_ns(0, 10, 15, 40, True, True) == (10, 25)
    assert maths.one_way_delays_ns(0, 10, 15, 40, True, False) is None
    assert maths.one_way_delays_ns(0, 10, 15, 40, False, True) is None


def test_jitter_rfc3550_examples() -> None:
    assert maths.jitter_rfc3550([]) == 0.0
    assert maths.jitter_rfc3550([100]) == 0.0
    assert maths.jitter_rfc3550([100, 116]) == 1.0  # |16| / 16
    assert maths.jitter_rfc3550([100, 116, 100]) == 1.0 + (16 - 1.0) / 16


@given(st.lists(st.integers(0, 10**6), max_size=50))
def test_jitter_rfc3550_is_bounded_by_the_largest_step(transits: list[int]) -> None:
    j = maths.jitter_rfc3550(transits)
    steps = [abs(b - a) for a, b in itertools.pairwise(transits)]
    assert 0 <= j <= max(steps, default=0)


@given(st.integers(0, 10**9), st.integers(1, 50))
def test_jitter_of_constant_transit_is_zero(transit: int, n: int) -> None:
    assert maths.jitter_rfc3550([transit] * n) == 0.0


def test_jitter_max_min() -> None:
    assert maths.jitter_max_min([]) is None
    assert maths.jitter_max_min([5, 9, 7]) == 4


def test_percentiles_nearest_rank() -> None:
    values = [15, 20, 35, 40, 50]  # the classic nearest-rank example
    assert maths.percentiles(values, (5, 30, 40, 50, 100)) == {
        5: 15,
        30: 20,
        40: 20,
        50: 35,
        100: 50,
    }
    assert maths.percentiles([7]) == {50: 7, 90: 7, 99: 7}
    assert maths.percentiles(range(1, 101)) == {50: 50, 90: 90, 99: 99}
    with pytest.raises(ValueError):
        maths.percentiles([])
    with pytest.raises(ValueError):
        maths.percentiles([1], (101,))


@given(st.lists(st.integers(-(10**9), 10**9), min_size=1, max_size=100), st.floats(0, 100))
def test_percentile_is_a_sample_with_enough_at_or_below(values: list[int], p: float) -> None:
    got = maths.percentiles(values, (p,))[p]
    assert got in values
    at_or_below = sum(v <= got for v in values)
    assert at_or_below >= p / 100 * len(values)
    assert sum(v < got for v in values) < max(1, math.ceil(p / 100 * len(values)))
