"""Profiles and sessions with bursts, computation intervals, delay thresholds and loss or delay
only, through /v1 on SQLite and PostgreSQL: the values in effect, overrides cleared by null,
422s for what a node manager would refuse (the block period as its GetInfo said), nothing kept
of a refused change, and what the stored fleet derives to."""

from __future__ import annotations

import pytest
from controller_fleet import NO_THRESHOLDS, NODE_INFO, S1, add_lab, fields, problem
from srv6pm.common.srv6 import MarkingMode
from srv6pm.controller.adapters.sql import store as sql
from srv6pm.controller.adapters.sql.tables import NodeRow
from srv6pm.controller.domain.derive import node_states
from srv6pm.controller.domain.model import DelayThresholds

WATCH = {
    "percent": 25.0,
    "absolute_us": 500,
    "check_each_burst": True,
    "min_report_interval_ms": 10_000,
    "metrics": ["two_way_mean", "jitter"],
}
TUNED = {
    "name": "tuned",
    "delay_interval_ms": 100,
    "burst_size": 5,
    "computation_interval_ms": 1_000,
    "thresholds": WATCH,
}


@pytest.fixture
def lab(admin, store):
    add_lab(admin)
    with store.write() as db:  # what the node managers' GetInfo said: a 2 s block
        for node in ("r1", "r2", "r3"):
            row = db.get(NodeRow, node)
            assert row is not None
            row.info = dict(NODE_INFO)
    return admin


def senders(store) -> dict:
    with store.read() as db:
        states = node_states(sql.fleet(db, MarkingMode.ALTMARK)).states
    return {s.name: s for state in states.values() for s in state.sessions}


def test_a_profile_holds_bursts_intervals_thresholds_and_what_to_compute(lab):
    created = lab.create("profiles", {**TUNED, "loss": False})
    assert {k: created[k] for k in (*TUNED, "loss")} == {**TUNED, "loss": False}
    plain = lab.create("profiles", {"name": "plain"})
    assert (plain["burst_size"], plain["computation_interval_ms"], plain["loss"]) == (1, 0, True)
    assert plain["thresholds"] == NO_THRESHOLDS
    changed = lab.ok("PATCH", "/v1/profiles/tuned", {"burst_size": 3, "loss": True})
    assert (changed["burst_size"], changed["loss"], changed["thresholds"]) == (3, True, WATCH)
    # null leaves a profile's setting as it is: a profile has nothing to fall back on
    kept = lab.ok("PATCH", "/v1/profiles/tuned", {"thresholds": None})
    assert kept["thresholds"] == WATCH
    audit = lab.get("/v1/audit", kind="profile", name="tuned").json()["items"][0]
    assert audit["after"]["measurement"]["thresholds"]["metrics"] == ["two_way_mean", "jitter"]


def test_a_session_s_own_settings_win_and_null_gives_back_the_profile_s(lab, store):
    lab.create("profiles", TUNED)
    session = lab.create(
        "sessions",
        {**S1, "profile": "tuned", "burst_size": 10, "loss": False, "thresholds": {"percent": 5}},
    )
    assert (session["burst_size"], session["computation_interval_ms"], session["loss"]) == (
        10,
        1_000,
        False,
    )
    assert session["thresholds"] == {**NO_THRESHOLDS, "percent": 5.0}
    s1 = senders(store)["s1"]
    assert (s1.burst_size, s1.computation_interval_ms) == (10, 1_000)
    assert s1.thresholds == DelayThresholds(percent=5.0, metrics=("two_way_mean",))
    assert (s1.forward_flow, s1.reverse_flow) == ("", "")  # delay only

    cleared = lab.ok(
        "PATCH", "/v1/sessions/s1", {"burst_size": None, "loss": None, "thresholds": None}
    )
    assert (cleared["burst_size"], cleared["loss"], cleared["thresholds"]) == (5, True, WATCH)
    s1 = senders(store)["s1"]
    assert (s1.burst_size, s1.forward_flow, s1.reverse_flow) == (5, "to-h2", "to-h1")
    assert s1.thresholds.metrics == ("two_way_mean", "jitter")
    # a profile's change reaches the session, and its status waits for the nodes again
    before = cleared["status"]["revision"]
    lab.ok("PATCH", "/v1/profiles/tuned", {"computation_interval_ms": 500})
    after = lab.ok("GET", "/v1/sessions/s1")
    assert after["computation_interval_ms"] == 500
    assert after["status"]["revision"] > before


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"burst_size": 0}, "body.burst_size"),
        ({"burst_size": 101}, "body.burst_size"),
        ({"computation_interval_ms": -1}, "body.computation_interval_ms"),
        ({"delay_interval_ms": 5}, "body.delay_interval_ms"),
        ({"loss": "sometimes"}, "body.loss"),
        ({"thresholds": {"percent": 1001}}, "body.thresholds.percent"),
        ({"thresholds": {"percent": -1}}, "body.thresholds.percent"),
        ({"thresholds": {"absolute_us": 10_000_001}}, "body.thresholds.absolute_us"),
        ({"thresholds": {"percent": 5, "metrics": ["p42"]}}, "body.thresholds.metrics.0"),
        ({"thresholds": {"percent": 5, "metrics": ["jitter", "jitter"]}}, "body.thresholds"),
        ({"thresholds": {"check_each_burst": True}}, "body.thresholds"),
        ({"thresholds": {"percent": 5, "extra": 1}}, "body.thresholds.extra"),
        ({"thresholds": {"percent": 5, "min_report_interval_ms": 86_400_001}}, None),
    ],
)
def test_malformed_settings_are_refused_with_the_fields_named(lab, change, field):
    field = field or "body.thresholds.min_report_interval_ms"
    assert field in fields(problem(lab.post("/v1/profiles", {**TUNED, **change}), 422))
    assert field in fields(problem(lab.post("/v1/sessions", {**S1, **change}), 422))
    problem(lab.get("/v1/profiles/tuned"), 404)
    problem(lab.get("/v1/sessions/s1"), 404)


def test_a_repeated_metric_and_thresholds_without_a_threshold_say_why(lab):
    twice = problem(
        lab.post(
            "/v1/profiles", {**TUNED, "thresholds": {"percent": 5, "metrics": ["jitter"] * 2}}
        ),
        422,
    )
    assert "metrics jitter are given more than once" in twice["detail"]
    empty = problem(lab.post("/v1/profiles", {**TUNED, "thresholds": {"metrics": ["jitter"]}}), 422)
    assert "give percent or absolute_us" in empty["detail"]


@pytest.mark.parametrize(
    ("settings", "detail"),
    [
        (
            {"computation_interval_ms": 1_000},
            "a computation interval needs a delay interval",
        ),
        (
            {"delay_interval_ms": 300, "computation_interval_ms": 1_000},
            "computation interval 1000 ms is not a multiple of the delay interval (300 ms)",
        ),
    ],
)
def test_intervals_that_do_not_fit_together_are_invalid(lab, settings, detail):
    assert detail in problem(lab.post("/v1/profiles", {"name": "p", **settings}), 422)["detail"]
    assert detail in problem(lab.post("/v1/sessions", {**S1, **settings}), 422)["detail"]


def test_a_computation_interval_must_divide_the_sender_node_s_block(lab):
    # r1's node manager said 2 s: 300 ms intervals would straddle blocks
    every_300 = {"delay_interval_ms": 100, "computation_interval_ms": 300}
    refused = problem(lab.post("/v1/sessions", {**S1, **every_300}), 422)
    assert refused["detail"] == (
        "session s1: computation interval 300 ms does not divide the 2000 ms block of its "
        "sender's node"
    )
    problem(lab.get("/v1/sessions/s1"), 404)
    # a profile alone knows no block; a session naming it does
    lab.create("profiles", {"name": "p", **every_300})
    named = problem(lab.post("/v1/sessions", {**S1, "profile": "p"}), 422)
    assert named["detail"].startswith("session s1 (profile p): computation interval 300 ms")
    lab.create("sessions", {**S1, "profile": "p", "computation_interval_ms": 400})


def test_a_profile_change_that_would_break_a_session_is_refused_and_nothing_changes(lab, store):
    lab.create("profiles", TUNED)
    lab.create("sessions", {**S1, "profile": "tuned"})
    before = lab.ok("GET", "/v1/profiles/tuned")
    refused = problem(lab.patch("/v1/profiles/tuned", {"computation_interval_ms": 300}), 422)
    assert refused["detail"].startswith("session s1 (profile tuned): computation interval 300")
    # the profile on its own first
    refused = problem(lab.patch("/v1/profiles/tuned", {"delay_interval_ms": 300}), 422)
    assert refused["detail"] == (
        "profile tuned: computation interval 1000 ms is not a multiple of the delay interval "
        "(300 ms)"
    )
    assert lab.ok("GET", "/v1/profiles/tuned") == before
    assert senders(store)["s1"].computation_interval_ms == 1_000
    # the session's own interval is what is checked: its override makes the change fine
    lab.ok("PATCH", "/v1/sessions/s1", {"computation_interval_ms": 0})
    changed = lab.ok("PATCH", "/v1/profiles/tuned", {"computation_interval_ms": 300})
    assert (changed["computation_interval_ms"], changed["sessions"]) == (300, ["s1"])
    assert senders(store)["s1"].computation_interval_ms == 0
