"""/v1/sessions on SQLite and PostgreSQL: create, read, list, update, delete, SSIDs, HMAC keys that
are never shown, and the rules that let STAMP sessions share nodes (docs/CONTROLLER.md).
Sessions over several segment lists and profiles: test_api_segment_list_sessions.py."""

from __future__ import annotations

import pytest
from controller_fleet import DEFAULT_SETTINGS, S1, S2, TO_H2, add_lab, fields, problem
from srv6pm.controller.service.fleet import SESSION

KEY_A, KEY_B = "00112233445566778899aabbccddeeff", "ff" * 32


@pytest.fixture
def lab(admin):
    """The lab's nodes, SIDs and policies, plus an End.DT6 SID on r2 and policies r2 <-> r3."""
    add_lab(admin)
    admin.create("local-sids", {"sid": "fc00:0:2::d6", "node": "r2", "behaviour": "End.DT6"})
    admin.create(
        "policies",
        {
            "name": "r2-r3",
            "head_node": "r2",
            "tail_node": "r3",
            "segments": ["fc00:0:3::d6"],
            "prefix": "fd00:23::/64",
        },
    )
    admin.create(
        "policies",
        {
            "name": "r3-r2",
            "head_node": "r3",
            "tail_node": "r2",
            "segments": ["fc00:0:2::d6"],
            "prefix": "fd00:32::/64",
        },
    )
    return admin


def test_a_session_is_created_with_its_ends_paths_and_identifiers(lab):
    created = lab.create("sessions", {**S1, "delay_interval_ms": 100, "hmac_key": KEY_A})
    policies = {p["name"]: p for p in lab.ok("GET", "/v1/policies")["items"]}
    flow_mon_ids = {
        "forward": policies["to-h2"]["flow_mon_id"],
        "reverse": policies["to-h1"]["flow_mon_id"],
    }
    paths = {"forward": ["r1", "r2", "r3"], "reverse": ["r3", "r2", "r1"]}
    assert created == {
        "name": "s1",
        "policy": "to-h2",
        "segment_list": None,
        "return_policy": "to-h1",
        "return_segment_list": "sl0",
        "profile": None,
        "delay_interval_ms": 100,
        "liveness": {"enabled": False, "down_after": 3, "up_after": 1, "timeout_ms": 0},
        "histogram_edges_us": [],
        **DEFAULT_SETTINGS,
        "authenticated": True,
        "ssid": created["ssid"],
        "segment_lists": [
            {
                "segment_list": "sl0",
                "ssid": created["ssid"],
                "sender": "s1",
                "flow_mon_ids": flow_mon_ids,
                "path": paths,
            }
        ],
        "sender_node": "r1",
        "reflector_node": "r3",
        "flow_mon_ids": flow_mon_ids,
        "path": paths,
        "marking_mode": "altmark",
        "period_s": None,
        "status": {
            "state": "pending",
            "message": "",
            "revision": created["status"]["revision"],
            "nodes": ["r1", "r2", "r3"],
        },
    }
    assert 1 <= created["ssid"] <= 0xFFFF
    assert lab.ok("GET", "/v1/sessions/s1") == created
    assert KEY_A not in lab.get("/v1/sessions/s1").text
    assert KEY_A not in lab.get("/v1/sessions").text


def test_a_session_is_updated_and_deleted(lab):
    created = lab.create("sessions", S1)
    assert created["authenticated"] is False
    updated = lab.ok("PATCH", "/v1/sessions/s1", {"delay_interval_ms": 250, "hmac_key": KEY_B})
    assert (updated["delay_interval_ms"], updated["authenticated"]) == (250, True)
    assert updated["ssid"] == created["ssid"]
    assert updated["status"]["revision"] > created["status"]["revision"]
    assert lab.ok("GET", "/v1/sessions/s1") == updated
    assert lab.ok("PATCH", "/v1/sessions/s1", {"hmac_key": ""})["authenticated"] is False
    assert lab.delete("/v1/sessions/s1").status_code == 204
    problem(lab.get("/v1/sessions/s1"), 404)


def test_sessions_without_a_key_get_the_controllers_default_and_can_opt_out(lab, services):
    services.default_stamp_key = bytes.fromhex(KEY_B)
    assert lab.create("sessions", S1)["authenticated"] is True
    assert services.fleet.get(SESSION, "s1")[0].hmac_key == bytes.fromhex(KEY_B)
    assert lab.create("sessions", {**S2, "hmac_key": ""})["authenticated"] is False
    assert services.fleet.get(SESSION, "s2")[0].hmac_key == b""


def test_a_session_moves_to_other_policies(lab):
    lab.create("sessions", S1)
    moved = lab.ok("PATCH", "/v1/sessions/s1", {"policy": "to-h1", "return_policy": "to-h2"})
    assert (moved["sender_node"], moved["reflector_node"]) == ("r3", "r1")
    assert moved["path"] == {"forward": ["r3", "r2", "r1"], "reverse": ["r1", "r2", "r3"]}
    # the forward policy is free again
    lab.create("sessions", {**S2, "policy": "to-h2", "return_policy": "to-h1"})


def test_ssids_are_unique_and_stable(lab):
    a = lab.create("sessions", S1)["ssid"]
    b = lab.create("sessions", S2)["ssid"]
    c = lab.create("sessions", {"name": "s3", "policy": "r2-r3", "return_policy": "r3-r2"})["ssid"]
    assert len({a, b, c}) == 3
    lab.ok("PATCH", "/v1/sessions/s1", {"delay_interval_ms": 10})
    lab.ok("PATCH", "/v1/sessions/s3", {"hmac_key": ""})
    listed = {s["name"]: s["ssid"] for s in lab.ok("GET", "/v1/sessions")["items"]}
    assert listed == {"s1": a, "s2": b, "s3": c}
    assert lab.delete("/v1/sessions/s2").status_code == 204
    d = lab.create("sessions", {**S2, "name": "s4"})["ssid"]
    assert d not in (a, c)


def test_sessions_are_listed_by_policy_a_page_at_a_time(lab):
    lab.create("sessions", S1)
    lab.create("sessions", S2)
    lab.create("sessions", {"name": "s0", "policy": "r2-r3", "return_policy": "r3-r2"})

    def names(**params):
        page = lab.get("/v1/sessions", **params).json()
        return [s["name"] for s in page["items"]], page["total"]

    assert names() == (["s0", "s1", "s2"], 3)
    assert names(policy="to-h1") == (["s2"], 1)
    assert names(limit=2) == (["s0", "s1"], 3)
    assert names(limit=2, offset=2) == (["s2"], 3)
    assert names(policy="nope") == ([], 0)


def test_unknown_sessions_are_not_found(lab):
    assert problem(lab.get("/v1/sessions/nope"), 404)["detail"] == "session nope does not exist"
    problem(lab.patch("/v1/sessions/nope", {"delay_interval_ms": 100}), 404)
    problem(lab.delete("/v1/sessions/nope"), 404)


def test_a_session_name_is_taken_once(lab):
    lab.create("sessions", S1)
    body = problem(lab.post("/v1/sessions", {**S2, "name": "s1"}), 409)
    assert body["detail"] == "session s1 already exists"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hmac_key": "abc"}, "body.hmac_key"),
        ({"hmac_key": "zz"}, "body.hmac_key"),
        ({"hmac_key": "00" * 65}, "body.hmac_key"),
        ({"delay_interval_ms": -1}, "body.delay_interval_ms"),
        ({"delay_interval_ms": 60_001}, "body.delay_interval_ms"),
        ({"policy": "no policy"}, "body.policy"),
        ({"ssid": 7}, "body.ssid"),
    ],
)
def test_malformed_sessions_are_refused_with_the_fields_named(lab, change, field):
    reply = problem(lab.post("/v1/sessions", {**S1, **change}), 422)
    assert field in fields(reply)
    assert lab.ok("GET", "/v1/sessions")["total"] == 0


def test_a_session_of_an_unknown_policy_is_invalid(lab):
    body = problem(lab.post("/v1/sessions", {**S1, "return_policy": "nope"}), 422)
    assert body["detail"] == "policy 'nope' does not exist"


def test_a_return_policy_must_go_back(lab):
    body = problem(lab.post("/v1/sessions", {**S1, "return_policy": "r2-r3"}), 422)
    assert body["title"] == "Invalid desired state"
    assert body["detail"].startswith(
        "return policy r2-r3 goes r2 -> r3: it must go back from r3 to r1"
    )


def test_both_ends_of_a_session_need_a_probe_address(lab):
    lab.ok("PATCH", "/v1/nodes/r3", {"probe_address": None})
    body = problem(lab.post("/v1/sessions", S1), 422)
    assert body["detail"].startswith("node r3 has no probe_address")


def test_a_policy_is_measured_by_one_session(lab):
    lab.create("sessions", S1)
    body = problem(lab.post("/v1/sessions", {**S1, "name": "again"}), 409)
    assert body["detail"] == "session s1 already measures policy to-h2"
    assert lab.ok("GET", "/v1/sessions")["total"] == 1


def test_a_reflector_has_one_hmac_key_for_every_session(lab):
    lab.create("sessions", {**S1, "hmac_key": KEY_A})
    s3 = {"name": "s3", "policy": "r2-r3", "return_policy": "r3-r2"}
    for key, other in ((KEY_B, "another"), ("", "another")):
        body = problem(lab.post("/v1/sessions", {**s3, "hmac_key": key}), 422)
        assert body["detail"].startswith(
            f"session s1 is reflected by r3 with {other} HMAC key: a node's Session-Reflector "
            "has one key"
        )
    lab.create("sessions", {**s3, "hmac_key": KEY_A.upper()})
    # changing one session's key alone would split the reflector's key: refused, kept
    body = problem(lab.patch("/v1/sessions/s3", {"hmac_key": KEY_B}), 422)
    assert "reflected by r3" in body["detail"]
    assert lab.ok("GET", "/v1/sessions/s3")["authenticated"] is True
    assert lab.get("/v1/audit", kind="session", name="s3").json()["total"] == 1


def test_a_reflector_without_a_key_takes_only_sessions_without_one(lab):
    lab.create("sessions", S1)
    body = problem(
        lab.post(
            "/v1/sessions",
            {"name": "s3", "policy": "r2-r3", "return_policy": "r3-r2", "hmac_key": KEY_A},
        ),
        422,
    )
    assert "session s1 is reflected by r3 with no HMAC key" in body["detail"]


def test_sessions_between_the_same_two_nodes_may_use_other_policies(lab):
    """Probes are steered into their segment list by a mark per SSID, not by their destination:
    a second policy between r1 and r3 is measured on its own path."""
    s1 = lab.create("sessions", S1)
    lab.create(
        "policies",
        {**TO_H2, "name": "to-h2-direct", "segments": ["fc00:0:3::d6"], "prefix": "fd00:3::/64"},
    )
    s3 = lab.create("sessions", {"name": "s3", "policy": "to-h2-direct", "return_policy": "to-h1"})
    assert s3["path"] == {"forward": ["r1", "r3"], "reverse": ["r3", "r2", "r1"]}
    assert s3["ssid"] != s1["ssid"]
    assert s3["flow_mon_ids"]["forward"] != s1["flow_mon_ids"]["forward"]
    # both return on to-h1; the other way round (r3 -> r1 over to-h1) is fine too
    assert s3["flow_mon_ids"]["reverse"] == s1["flow_mon_ids"]["reverse"]
    lab.create("sessions", S2)


def test_a_patch_that_makes_a_session_invalid_is_rolled_back(lab):
    before = lab.create("sessions", S1)
    lab.create("sessions", S2)
    for change, status in (
        ({"return_policy": "r3-r2"}, 422),
        ({"policy": "to-h1"}, 422),  # return policy to-h1 would not go back
        ({"policy": "to-h1", "return_policy": "to-h2"}, 409),  # s2 measures to-h1
        ({"policy": "nope"}, 422),
        ({"name": "renamed"}, 422),
    ):
        problem(lab.patch("/v1/sessions/s1", change), status)
        assert lab.ok("GET", "/v1/sessions/s1") == before


def test_an_hmac_key_is_never_returned(lab):
    lab.create("sessions", {**S1, "hmac_key": KEY_A})
    for path in ("/v1/sessions", "/v1/sessions/s1", "/v1/audit"):
        text = lab.get(path).text
        assert KEY_A not in text
        assert KEY_A.upper() not in text
