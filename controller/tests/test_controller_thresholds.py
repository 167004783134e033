"""The objectives' verdict (srv6pm.common.objectives.violations, pure) over the rows of their
queries, and the queries the controller runs: the alert rules' own, without Grafana's time
filter. test_api_results.py runs them on a real InfluxDB."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from srv6pm.common.objectives import (
    TIME_FILTER,
    Objective,
    delay_query,
    loss_query,
    queries,
    unmeasured_query,
    violations,
)


def loss(direction: str, ratio: float | None) -> dict:
    return {"session": "s1", "policy": "p1", "direction": direction, "loss_ratio": ratio}


def delay(p99_ms: float | None) -> dict:
    return {"session": "s1", "policy": "p1", "p99_ms": p99_ms}


def unmeasured(blocks: int) -> dict:
    return {"session": "s1", "policy": "p1", "blocks_not_measured": blocks}


def test_no_maximum_no_violation():
    rows = {"loss": [loss("forward", 1.0)], "delay": [delay(1e6)], "unmeasured": [unmeasured(6)]}
    assert violations(Objective(), rows) == []


def test_a_direction_whose_worst_block_lost_more_than_the_ratio_violates():
    rows = {"loss": [loss("forward", 0.01), loss("reverse", 0.02)]}
    assert violations(Objective(loss_ratio_max=0.015), rows) == [
        "reverse loss ratio 0.02 > 0.015 (worst of the last 6 blocks)"
    ]
    assert violations(Objective(loss_ratio_max=0.02), rows) == []  # equal is fine
    assert violations(Objective(loss_ratio_max=0.0), {"loss": [loss("forward", None)]}) == []


def test_the_worst_block_is_named_by_its_start_when_influxdb_gives_it():
    at = 1_764_088_400 * 10**9  # 2025-11-25T16:33:20Z
    rows = {
        "loss": [{**loss("forward", 0.5), "time": at}],
        "delay": [{**delay(9.0), "time": at + 5 * 10**8}],
    }
    assert violations(Objective(loss_ratio_max=0.1, delay_p99_max_ms=1.0), rows) == [
        "forward loss ratio 0.5 > 0.1 in the block at 2025-11-25T16:33:20Z "
        "(worst of the last 6 blocks)",
        "two-way p99 9.000 ms > 1 ms in the block at 2025-11-25T16:33:20.5Z "
        "(worst of the last 6 blocks)",
    ]


def test_a_two_way_p99_above_the_limit_violates():
    rows = {"delay": [delay(2.5000001), delay(None)]}
    assert violations(Objective(delay_p99_max_ms=2.5, window_blocks=3), rows) == [
        "two-way p99 2.500 ms > 2.5 ms (worst of the last 3 blocks)"
    ]
    assert violations(Objective(delay_p99_max_ms=2.6), rows) == []


def test_too_many_blocks_not_measured_violate():
    rows = {"unmeasured": [unmeasured(2)]}
    assert violations(Objective(invalid_blocks_max=1), rows) == [
        "2 blocks not measured > 1 (last 6)"
    ]
    assert violations(Objective(invalid_blocks_max=2), rows) == []
    assert violations(Objective(invalid_blocks_max=0), {"unmeasured": []}) == []  # none at all


ratios = st.floats(0, 1, allow_nan=False)


@given(st.lists(st.tuples(st.sampled_from(["forward", "reverse"]), ratios)), ratios)
def test_loss_violations_are_exactly_the_rows_above_the_limit(rows, limit):
    found = violations(Objective(loss_ratio_max=limit), {"loss": [loss(*r) for r in rows]})
    assert len(found) == sum(ratio > limit for _, ratio in rows)


def test_the_controller_runs_the_alert_rules_queries_without_their_time_filter():
    objective = Objective(loss_ratio_max=0.01, invalid_blocks_max=1, window_blocks=3)
    found = queries(objective, "it's", time_filter=None)
    assert found == {
        "loss": loss_query(3, "it's", None),
        "unmeasured": unmeasured_query(3, "it's", None),
    }
    for query in found.values():
        assert TIME_FILTER not in query
        assert "WHERE \"session\" = 'it\\'s' GROUP BY" in query
        assert "LIMIT 3)" in query
    # The rules' query is the same one with Grafana's time filter first.
    assert loss_query(3, "it's") == found["loss"].replace("WHERE ", f"WHERE {TIME_FILTER} AND ")
    assert delay_query(6, None, None).count("WHERE") == 1  # the direction only
