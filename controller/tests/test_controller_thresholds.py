"""service/thresholds.violations: which blocks break a session's objective (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from srv6pm.controller.service.thresholds import Objective, violations


def loss(block: int, direction: str, ratio: float | None, valid: bool = True) -> dict:
    return {"block": block, "direction": direction, "loss_ratio": ratio, "valid": valid}


def delay(block: int, p99_ns: int | None, valid: bool = True) -> dict:
    return {"block": block, "p99_ns": p99_ns, "valid": valid}


def test_no_rule_no_violation():
    assert violations(Objective(), [loss(1, "forward", 1.0)], [delay(1, 10**12)]) == []


def test_a_block_losing_more_than_the_ratio_in_either_direction_violates():
    rows = [loss(1, "forward", 0.01), loss(1, "reverse", 0.02), loss(2, "forward", 0.03)]
    assert violations(Objective(loss_ratio_max=0.015), rows, []) == [
        "block 1 reverse loss ratio 0.02 > 0.015",
        "block 2 forward loss ratio 0.03 > 0.015",
    ]
    assert violations(Objective(loss_ratio_max=0.03), rows, []) == []  # equal is fine


def test_a_block_whose_two_way_p99_exceeds_the_limit_violates():
    rows = [delay(1, 2_000_000), delay(2, 2_500_001), delay(3, None), delay(4, 9_000_000, False)]
    assert violations(Objective(delay_p99_max_ms=2.5), [], rows) == [
        "block 2 two-way p99 2.500 ms > 2.5 ms"
    ]


def test_too_many_blocks_not_measured_violate_once():
    rows = [
        loss(1, "forward", None, False),
        loss(1, "reverse", None, False),
        loss(2, "forward", None, False),
        loss(3, "forward", 0.5),
    ]
    objective = Objective(invalid_blocks_max=1, window_blocks=6)
    assert violations(objective, rows, []) == ["2 blocks not measured > 1 (last 6)"]
    assert violations(Objective(invalid_blocks_max=2), rows, []) == []
    # an invalid block is not also a loss violation
    assert violations(Objective(loss_ratio_max=0.0), rows, []) == [
        "block 3 forward loss ratio 0.5 > 0"
    ]


ratios = st.floats(0, 1, allow_nan=False)


@given(
    st.lists(st.tuples(st.integers(0, 100), st.sampled_from(["forward", "reverse"]), ratios)),
    ratios,
)
def test_loss_violations_are_exactly_the_valid_blocks_above_the_limit(rows, limit):
    found = violations(Objective(loss_ratio_max=limit), [loss(*r) for r in rows], [])
    assert len(found) == sum(ratio > limit for _, _, ratio in rows)


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans())), st.integers(0, 50))
def test_the_invalid_rule_counts_distinct_blocks(rows, limit):
    found = violations(
        Objective(invalid_blocks_max=limit), [loss(b, "forward", 0.0, v) for b, v in rows], []
    )
    invalid = {b for b, v in rows if not v}
    assert bool(found) == (len(invalid) > limit)
