import pytest
from hypothesis import given
from hypothesis import strategies as st
from srv6pm.node_manager.domain.blocks import NS_PER_S, BlockClock, colour, counter_delta

T10 = BlockClock(10 * NS_PER_S)


def test_block_is_floor_of_unix_time_over_period():
    assert T10.block(0) == 0
    assert T10.block(10 * NS_PER_S - 1) == 0
    assert T10.block(10 * NS_PER_S) == 1
    assert T10.block(1_795_370_009_981_641_875) == 179_537_000


def test_colour_alternates_every_block():
    assert [colour(b) for b in range(4)] == [0, 1, 0, 1]


def test_block_is_readable_from_guard_after_its_end_until_its_colour_returns():
    assert T10.readable_from(7, guard_ns=500) == 80 * NS_PER_S + 500
    assert T10.readable_until(7) == 90 * NS_PER_S


def test_counter_delta_handles_one_wrap():
    assert counter_delta(5, 3, 64) == 2
    assert counter_delta(2, (1 << 64) - 3, 64) == 5
    assert counter_delta(1, 0xFFFFFFFF, 32) == 2


@given(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 40)))
def test_counter_delta_recovers_any_increment_modulo_width(start, increment):
    end = (start + increment) % (1 << 64)
    assert counter_delta(end, start, 64) == increment


@given(st.integers(1, 3600 * NS_PER_S), st.integers(0, 4_000_000_000 * NS_PER_S))
def test_every_instant_lies_in_its_block(period, now):
    clock = BlockClock(period)
    b = clock.block(now)
    assert clock.start(b) <= now < clock.start(b + 1)


def test_period_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        BlockClock(0)
