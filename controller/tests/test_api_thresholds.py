"""/v1/sessions/{name}/threshold and /v1/thresholds on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
import yaml
from controller_fleet import S1, S2, add_lab, fields, problem
from srv6pm.common.alert_rules import alert_rules, to_yaml
from srv6pm.common.objectives import Objective


@pytest.fixture
def lab(admin):
    add_lab(admin, (S1, S2))
    return admin


def test_a_threshold_is_set_read_replaced_listed_and_deleted(lab, reader):
    problem(lab.get("/v1/sessions/s1/threshold"), 404)
    created = lab.ok("PUT", "/v1/sessions/s1/threshold", {"loss_ratio_max": 0.01})
    assert created == {
        "session": "s1",
        "loss_ratio_max": 0.01,
        "delay_p99_max_ms": None,
        "invalid_blocks_max": None,
        "window_blocks": 6,
        "state": "unknown",
        "since": None,
        "detail": "",
    }
    assert reader.get("/v1/sessions/s1/threshold").json() == created
    replaced = lab.ok(
        "PUT",
        "/v1/sessions/s1/threshold",
        {"delay_p99_max_ms": 2.5, "invalid_blocks_max": 1, "window_blocks": 12},
    )
    assert replaced == {
        **created,
        "loss_ratio_max": None,  # a PUT replaces the whole objective
        "delay_p99_max_ms": 2.5,
        "invalid_blocks_max": 1,
        "window_blocks": 12,
    }
    lab.ok("PUT", "/v1/sessions/s2/threshold", {})
    assert [t["session"] for t in reader.get("/v1/thresholds").json()] == ["s1", "s2"]
    assert lab.delete("/v1/sessions/s1/threshold").status_code == 204
    problem(lab.get("/v1/sessions/s1/threshold"), 404)
    problem(lab.delete("/v1/sessions/s1/threshold"), 404)
    assert [t["session"] for t in reader.get("/v1/thresholds").json()] == ["s2"]
    actions = [
        e["action"] for e in lab.get("/v1/audit", kind="threshold", name="s1").json()["items"]
    ]
    assert actions == ["delete", "update", "create"]


def test_a_session_that_does_not_exist_has_no_threshold(lab):
    body = problem(lab.put("/v1/sessions/nope/threshold", {"loss_ratio_max": 0.1}), 404)
    assert body["detail"] == "session nope does not exist"
    assert problem(lab.get("/v1/sessions/nope/threshold"), 404)["detail"] == (
        "session nope has no threshold"
    )
    problem(lab.delete("/v1/sessions/nope/threshold"), 404)
    assert lab.ok("GET", "/v1/thresholds") == []


def test_a_threshold_goes_with_its_session(lab):
    lab.ok("PUT", "/v1/sessions/s1/threshold", {"loss_ratio_max": 0.5})
    lab.ok("PUT", "/v1/sessions/s2/threshold", {"loss_ratio_max": 0.5})
    assert lab.delete("/v1/sessions/s1").status_code == 204
    assert [t["session"] for t in lab.ok("GET", "/v1/thresholds")] == ["s2"]
    # a new session of the same name starts without one
    lab.create("sessions", S1)
    problem(lab.get("/v1/sessions/s1/threshold"), 404)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"loss_ratio_max": 1.5}, "body.loss_ratio_max"),
        ({"loss_ratio_max": -0.1}, "body.loss_ratio_max"),
        ({"delay_p99_max_ms": 0}, "body.delay_p99_max_ms"),
        ({"invalid_blocks_max": -1}, "body.invalid_blocks_max"),
        ({"invalid_blocks_max": 2**40}, "body.invalid_blocks_max"),
        ({"window_blocks": 0}, "body.window_blocks"),
        ({"window_blocks": 1001}, "body.window_blocks"),
        ({"state": "ok"}, "body.state"),
    ],
)
def test_malformed_objectives_are_refused_with_the_fields_named(lab, body, field):
    assert field in fields(problem(lab.put("/v1/sessions/s1/threshold", body), 422))
    problem(lab.get("/v1/sessions/s1/threshold"), 404)


@pytest.mark.parametrize("number", [b"Infinity", b"NaN", b"-Infinity"])
def test_objectives_are_finite(lab, number):
    """Python's JSON parser takes Infinity and NaN: refused, not stored (PostgreSQL's JSON audit
    column cannot hold them)."""
    reply = lab.client.request(
        "PUT",
        "/v1/sessions/s1/threshold",
        content=b'{"delay_p99_max_ms": ' + number + b"}",
        headers={**lab.headers, "Content-Type": "application/json"},
    )
    assert "body.delay_p99_max_ms" in fields(problem(reply, 422))
    problem(lab.get("/v1/sessions/s1/threshold"), 404)


def test_grafana_alert_rules_hold_each_session_to_its_own_objective(lab, reader):
    lab.ok("PUT", "/v1/sessions/s1/threshold", {"loss_ratio_max": 0.02, "window_blocks": 3})
    lab.ok("PUT", "/v1/sessions/s2/threshold", {"delay_p99_max_ms": 20})
    reply = reader.get("/v1/thresholds/grafana-alert-rules")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/yaml")
    expected = alert_rules(
        {"s1": Objective(loss_ratio_max=0.02, window_blocks=3), "s2": Objective(None, 20.0)}
    )
    assert reply.text == to_yaml(expected)
    titles = [r["title"] for g in yaml.safe_load(reply.text)["groups"] for r in g["rules"]]
    assert titles == [
        "srv6pm objective violated",
        "srv6pm s1: loss ratio above 2% over the last 3 blocks",
        "srv6pm s2: two-way delay p99 above 20 ms over the last 6 blocks",
    ]
