"""Policies with several weighted segment lists, sessions over a whole policy or one segment list,
and measurement profiles through /v1, on SQLite and PostgreSQL; what the stored fleet derives to
(domain/derive.py on the store's own reading of it)."""

from __future__ import annotations

import pytest
from controller_fleet import DEFAULT_SETTINGS, S1, TO_H1, TO_H2, add_lab, fields, problem
from srv6pm.common.srv6 import MarkingMode, Role
from srv6pm.controller.adapters.sql import store as sql
from srv6pm.controller.domain.derive import node_states

DIRECT = ["fc00:0:3::d6"]
VIA_R2 = TO_H2["segments"]
TWO = {
    **TO_H2,
    "name": "two",
    "prefix": "fd00:20::/64",
    "segments": None,
    "segment_lists": [
        {"name": "via-r2", "segments": ["fc00:0:2::e", "fc00:0:2::e2", "fc00:0:3::d6"]},
        {"segments": DIRECT, "weight": 3},
    ],
    "protection": True,
}
FAST = {
    "name": "fast",
    "delay_interval_ms": 100,
    "liveness": {"enabled": True, "timeout_ms": 50},
    "histogram_edges_us": [100, 1000],
}


@pytest.fixture
def lab(admin):
    add_lab(admin)
    admin.create("local-sids", {"sid": "fc00:0:2::e2", "node": "r2", "behaviour": "End"})
    for node in ("r1", "r2", "r3"):  # where flows hook (no node manager tells them here)
        admin.ok("PATCH", f"/v1/nodes/{node}", {"core_interfaces": ["eth0"]})
    return admin


def body(policy: dict) -> dict:
    return {k: v for k, v in policy.items() if v is not None}


def derived(store):
    with store.read() as db:
        return node_states(sql.fleet(db, MarkingMode.ALTMARK)).states


def test_a_policy_with_two_segment_lists_has_a_flow_mon_id_and_a_path_each(lab):
    created = lab.create("policies", body(TWO))
    first, second = created["segment_lists"]
    assert (first["name"], first["weight"], first["path"]) == ("via-r2", 1, ["r1", "r2", "r3"])
    assert (second["name"], second["weight"], second["path"]) == ("sl1", 3, ["r1", "r3"])
    assert (first["flow"], second["flow"]) == ("two/via-r2", "two/sl1")
    ids = {p["flow_mon_id"] for p in lab.ok("GET", "/v1/policies")["items"] if p["flow_mon_id"]}
    assert len(ids | {first["flow_mon_id"], second["flow_mon_id"]}) == 4
    assert (created["segments"], created["flow_mon_id"], created["protection"]) == ([], None, True)
    assert created["status"]["nodes"] == ["r1", "r2", "r3"]
    assert lab.ok("GET", "/v1/policies/two") == created


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {
                "segment_lists": [
                    {"name": "a", "segments": DIRECT},
                    {"name": "a", "segments": VIA_R2},
                ]
            },
            "body.segment_lists",
            "segment list names a are given more than once",
        ),
        (
            {"segment_lists": [{"segments": DIRECT}, {"segments": ["FC00:0:3::D6"]}]},
            "body.segment_lists",
            "segment lists sl0 and sl1 have the same SIDs",
        ),
        (
            {"segment_lists": [{"segments": DIRECT, "weight": 257}]},
            "body.segment_lists.0.weight",
            "less than or equal to 256",
        ),
        ({"segment_lists": []}, "body.segment_lists", "at least 1"),
        ({"segments": DIRECT}, "body", "not both or none"),
        ({"segment_lists": None}, "body", "not both or none"),
        ({"segment_lists": [{"name": "a/b", "segments": DIRECT}]}, "body.segment_lists.0.name", ""),
    ],
)
def test_malformed_segment_lists_are_refused_with_the_fields_named(lab, change, field, message):
    reply = problem(lab.post("/v1/policies", body({**TWO, **change})), 422)
    assert field in fields(reply)
    assert message in reply["detail"]


def test_segment_lists_that_make_no_sense_in_the_domain_are_invalid(lab):
    bad = {**TWO, "segment_lists": [{"segments": VIA_R2}, {"segments": ["fc00:0:2::e"]}]}
    reply = problem(lab.post("/v1/policies", body(bad)), 422)
    assert "the last SID fc00:0:2::e in segment list sl1 is on node r2" in reply["detail"]
    inline = {**TWO, "encap_mode": "inline"}
    reply = problem(lab.post("/v1/policies", body(inline)), 422)
    assert "inline cannot hash flows over several segment lists" in reply["detail"]
    lab.create("policies", {**TO_H2, "name": "direct", "segments": DIRECT, "prefix": "fd00:3::/64"})
    reply = problem(lab.post("/v1/policies", body(TWO)), 409)
    assert "policy direct has the same SID list at r1 (segment list sl1)" in reply["detail"]


def test_a_whole_policy_session_gets_an_ssid_per_segment_list_and_derives_a_sender_each(lab, store):
    lab.create("policies", body(TWO))
    session = lab.create("sessions", {"name": "s", "policy": "two", "return_policy": "to-h1"})
    probed = session["segment_lists"]
    assert [(p["segment_list"], p["sender"]) for p in probed] == [
        ("via-r2", "s/via-r2"),
        ("sl1", "s/sl1"),
    ]
    assert len({p["ssid"] for p in probed}) == 2
    assert (session["ssid"], session["path"], session["flow_mon_ids"]) == (None, None, None)
    assert probed[1]["path"] == {"forward": ["r1", "r3"], "reverse": ["r3", "r2", "r1"]}

    states = derived(store)
    ssids = {p["segment_list"]: p["ssid"] for p in probed}
    senders = [(s.name, s.ssid, s.segment_list, s.forward_flow) for s in states["r1"].sessions]
    assert senders == [
        ("s/via-r2", ssids["via-r2"], "via-r2", "two/via-r2"),
        ("s/sl1", ssids["sl1"], "sl1", "two/sl1"),
    ]
    roles = {n: sorted((f.name, f.role) for f in s.flows) for n, s in states.items()}
    assert roles == {
        "r1": [("to-h1", Role.EGRESS), ("two/sl1", Role.INGRESS), ("two/via-r2", Role.INGRESS)],
        "r2": [("to-h1", Role.TRANSIT), ("two/via-r2", Role.TRANSIT)],
        "r3": [("to-h1", Role.INGRESS), ("two/sl1", Role.EGRESS), ("two/via-r2", Role.EGRESS)],
    }
    (head,) = [p for p in states["r1"].policies if p.name == "two"]
    assert [(sl.name, sl.weight) for sl in head.segment_lists] == [("via-r2", 1), ("sl1", 3)]
    assert head.protection
    reflected = sorted(s.ssid for s in states["r3"].reflector.sessions)
    assert reflected == sorted(ssids.values())


def test_ssids_are_kept_by_segment_list_when_the_policy_changes(lab):
    lab.create("policies", body(TWO))
    before = lab.create("sessions", {"name": "s", "policy": "two", "return_policy": "to-h1"})
    ssids = {p["segment_list"]: p["ssid"] for p in before["segment_lists"]}
    lists = [
        *TWO["segment_lists"][:1],
        {"name": "third", "segments": ["fc00:0:2::e2", "fc00:0:3::d6"]},
    ]
    lab.ok("PATCH", "/v1/policies/two", {"segment_lists": lists})
    after = lab.ok("GET", "/v1/sessions/s")
    now = {p["segment_list"]: p["ssid"] for p in after["segment_lists"]}
    assert set(now) == {"via-r2", "third"}
    assert now["via-r2"] == ssids["via-r2"]
    assert now["third"] not in ssids.values()
    assert after["status"]["revision"] > before["status"]["revision"]


def test_sessions_on_one_segment_list_each_share_a_policy(lab):
    lab.create("policies", body(TWO))
    one = lab.create(
        "sessions", {"name": "a", "policy": "two", "segment_list": "sl1", "return_policy": "to-h1"}
    )
    assert (one["segment_list"], one["segment_lists"][0]["sender"]) == ("sl1", "a")
    assert one["path"] == {"forward": ["r1", "r3"], "reverse": ["r3", "r2", "r1"]}
    other = {"name": "b", "policy": "two", "segment_list": "via-r2", "return_policy": "to-h1"}
    assert lab.create("sessions", other)["ssid"] != one["ssid"]
    whole = problem(
        lab.post("/v1/sessions", {"name": "c", "policy": "two", "return_policy": "to-h1"}), 409
    )
    assert "already measures segment list" in whole["detail"]
    unknown = {**other, "name": "d", "segment_list": "nope"}
    assert "has no segment list 'nope'" in problem(lab.post("/v1/sessions", unknown), 422)["detail"]
    # the segment list a session measures cannot go from under it
    reply = problem(lab.patch("/v1/policies/two", {"segments": DIRECT}), 409)
    assert reply["detail"].startswith("session a would break: policy two has no segment list")


def test_several_sessions_return_on_one_return_policy(lab):
    lab.create("policies", {**TO_H2, "name": "direct", "segments": DIRECT, "prefix": "fd00:3::/64"})
    lab.create("sessions", S1)
    second = lab.create("sessions", {"name": "s3", "policy": "direct", "return_policy": "to-h1"})
    assert second["return_segment_list"] == "sl0"
    assert lab.get("/v1/sessions", policy="direct").json()["total"] == 1


def test_a_profile_is_named_by_sessions_and_their_own_settings_win(lab, store):
    created = lab.create("profiles", FAST)
    assert created == {
        **FAST,
        "liveness": {"enabled": True, "down_after": 3, "up_after": 1, "timeout_ms": 50},
        **DEFAULT_SETTINGS,
        "revision": created["revision"],
        "sessions": [],
    }
    session = lab.create("sessions", {**S1, "profile": "fast", "histogram_edges_us": [500]})
    assert (session["profile"], session["delay_interval_ms"]) == ("fast", 100)
    assert session["liveness"] == created["liveness"]
    assert session["histogram_edges_us"] == [500]
    (sender,) = derived(store)["r1"].sessions
    assert (sender.delay_interval_ms, sender.histogram_edges_us) == (100, (500,))
    assert (sender.liveness.enabled, sender.liveness.down_after, sender.liveness.timeout_ms) == (
        True,
        3,
        50,
    )

    lab.ok("PATCH", "/v1/profiles/fast", {"delay_interval_ms": 250})
    assert lab.ok("GET", "/v1/sessions/s1")["delay_interval_ms"] == 250
    assert lab.ok("GET", "/v1/profiles/fast")["sessions"] == ["s1"]
    reply = problem(lab.delete("/v1/profiles/fast"), 409)
    assert reply["detail"] == "profile fast is used by session s1: delete or change it first"

    cleared = lab.ok("PATCH", "/v1/sessions/s1", {"profile": None, "histogram_edges_us": None})
    assert (cleared["profile"], cleared["delay_interval_ms"], cleared["histogram_edges_us"]) == (
        None,
        0,
        [],
    )
    assert lab.delete("/v1/profiles/fast").status_code == 204
    problem(lab.get("/v1/profiles/fast"), 404)
    missing = problem(lab.post("/v1/sessions", {**S1, "name": "s9", "profile": "nope"}), 422)
    assert "profile 'nope' does not exist" in missing["detail"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"histogram_edges_us": [100, 100]}, "body.histogram_edges_us"),
        ({"histogram_edges_us": list(range(1, 12))}, "body.histogram_edges_us"),
        ({"liveness": {"down_after": 0}}, "body.liveness.down_after"),
        ({"liveness": {"timeout_ms": 5}}, "body.liveness.timeout_ms"),
        ({"delay_interval_ms": -1}, "body.delay_interval_ms"),
        ({"name": "a b"}, "body.name"),
    ],
)
def test_malformed_profiles_are_refused_with_the_fields_named(lab, change, field):
    assert field in fields(problem(lab.post("/v1/profiles", {**FAST, **change}), 422))


def test_profiles_are_listed_and_audited(lab):
    lab.create("profiles", FAST)
    lab.create("profiles", {"name": "plain"})
    listed = lab.ok("GET", "/v1/profiles?limit=1")
    assert (listed["total"], [p["name"] for p in listed["items"]]) == (2, ["fast"])
    plain = lab.ok("GET", "/v1/profiles/plain")
    assert plain["liveness"]["enabled"] is False
    assert lab.get("/v1/audit", kind="profile", name="fast").json()["total"] == 1
    assert problem(lab.post("/v1/profiles", FAST), 409)["detail"] == "profile fast already exists"


def test_a_return_segment_list_is_named(lab):
    lab.create(
        "policies",
        {
            **TO_H1,
            "name": "back2",
            "prefix": "fd00:10::/64",
            "segments": None,
            "segment_lists": [
                {"segments": ["fc00:0:2::e2", "fc00:0:1::d6"]},
                {"segments": ["fc00:0:1::d6"]},
            ],
        },
    )
    session = lab.create("sessions", {**S1, "return_policy": "back2", "return_segment_list": "sl1"})
    assert session["path"]["reverse"] == ["r3", "r1"]
    reply = problem(lab.patch("/v1/sessions/s1", {"return_segment_list": "sl7"}), 422)
    assert "return policy back2 has no segment list 'sl7'" in reply["detail"]
