"""/v1/policies on SQLite and PostgreSQL: create, read, list, update, delete, FlowMonIDs, and every
way a policy can make no sense in the domain."""

from __future__ import annotations

import pytest
from controller_fleet import NODES, S1, SIDS, TO_H1, TO_H2, add_lab, fields, problem


@pytest.fixture
def lab(admin):
    """Nodes and SIDs of the lab, plus End SIDs on r1 and r3 and an End.DT6 SID on r2."""
    for node in NODES:
        admin.create("nodes", node)
    for sid in (
        *SIDS,
        {"sid": "fc00:0:1::e", "node": "r1", "behaviour": "End"},
        {"sid": "fc00:0:3::e", "node": "r3", "behaviour": "End"},
        {"sid": "fc00:0:2::d6", "node": "r2", "behaviour": "End.DT6"},
    ):
        admin.create("local-sids", sid)
    return admin


def test_a_policy_is_created_with_its_path_and_flow_mon_id(lab):
    created = lab.create("policies", TO_H2)
    assert created == {
        **TO_H2,
        "encap_mode": "encap",
        "device": "",
        "table": 0,
        "flow_mon_id": created["flow_mon_id"],
        "segment_lists": [
            {
                "name": "sl0",
                "segments": TO_H2["segments"],
                "weight": 1,
                "flow_mon_id": created["flow_mon_id"],
                "flow": "to-h2",
                "path": ["r1", "r2", "r3"],
            }
        ],
        "protection": False,
        "path": ["r1", "r2", "r3"],
        "status": {
            "state": "pending",
            "message": "",
            "revision": created["status"]["revision"],
            "nodes": ["r1", "r2", "r3"],
        },
    }
    assert 1 <= created["flow_mon_id"] < 1 << 20
    assert lab.ok("GET", "/v1/policies/to-h2") == created


def test_sids_and_prefixes_are_stored_in_canonical_form(lab):
    created = lab.create(
        "policies",
        {**TO_H2, "segments": ["FC00:0:2:0:0:0:0:E", "fc00:0:3:0::d6"], "prefix": "FD00:2::/64"},
    )
    assert (created["segments"], created["prefix"]) == (TO_H2["segments"], "fd00:2::/64")
    assert created["path"] == ["r1", "r2", "r3"]


def test_a_policy_is_updated_and_deleted(lab):
    created = lab.create("policies", TO_H2)
    updated = lab.ok(
        "PATCH", "/v1/policies/to-h2", {"segments": ["fc00:0:3::d6"], "prefix": "fd00:22::/64"}
    )
    assert updated["segments"] == ["fc00:0:3::d6"]
    assert (updated["prefix"], updated["path"]) == ("fd00:22::/64", ["r1", "r3"])
    assert updated["flow_mon_id"] == created["flow_mon_id"]
    assert updated["status"]["revision"] > created["status"]["revision"]
    assert updated["status"]["nodes"] == ["r1", "r3"]
    assert lab.ok("GET", "/v1/policies/to-h2") == updated
    assert lab.delete("/v1/policies/to-h2").status_code == 204
    problem(lab.get("/v1/policies/to-h2"), 404)


def test_flow_mon_ids_are_unique_and_stable(lab):
    ids = {
        "p0": lab.create("policies", {**TO_H2, "name": "p0"})["flow_mon_id"],
        "p1": lab.create(
            "policies",
            {**TO_H2, "name": "p1", "segments": ["fc00:0:3::d6"], "prefix": "fd00:3::/64"},
        )["flow_mon_id"],
        "to-h1": lab.create("policies", TO_H1)["flow_mon_id"],
        "r1-r2": lab.create(
            "policies",
            {
                "name": "r1-r2",
                "head_node": "r1",
                "tail_node": "r2",
                "segments": ["fc00:0:2::d6"],
                "prefix": "fd00:9::/64",
            },
        )["flow_mon_id"],
    }
    assert len(set(ids.values())) == 4
    lab.ok("PATCH", "/v1/policies/p0", {"table": 7})
    lab.ok("PATCH", "/v1/policies/p1", {"prefix": "fd00:77::/64", "segments": ["fc00:0:3::d6"]})
    listed = {p["name"]: p["flow_mon_id"] for p in lab.ok("GET", "/v1/policies")["items"]}
    assert listed == ids

    assert lab.delete("/v1/policies/p1").status_code == 204
    lab.create(
        "policies",
        {
            **TO_H2,
            "name": "p5",
            "segments": ["fc00:0:1::e", "fc00:0:3::d6"],
            "prefix": "fd00:5::/64",
        },
    )
    listed = {p["name"]: p["flow_mon_id"] for p in lab.ok("GET", "/v1/policies")["items"]}
    assert len(set(listed.values())) == 4
    assert {k: v for k, v in listed.items() if k != "p5"} == {
        k: v for k, v in ids.items() if k != "p1"
    }


def test_policies_are_listed_by_head_and_tail_a_page_at_a_time(lab):
    lab.create("policies", TO_H2)
    lab.create("policies", TO_H1)
    lab.create(
        "policies",
        {
            "name": "r1-r2",
            "head_node": "r1",
            "tail_node": "r2",
            "segments": ["fc00:0:2::d6"],
            "prefix": "fd00:9::/64",
        },
    )
    lab.create(
        "policies",
        {
            "name": "a-r3-r2",
            "head_node": "r3",
            "tail_node": "r2",
            "segments": ["fc00:0:2::d6"],
            "prefix": "fd00:9::/64",
        },
    )

    def names(**params):
        page = lab.get("/v1/policies", **params).json()
        return [p["name"] for p in page["items"]], page["total"]

    assert names() == (["a-r3-r2", "r1-r2", "to-h1", "to-h2"], 4)
    assert names(head_node="r1") == (["r1-r2", "to-h2"], 2)
    assert names(tail_node="r2") == (["a-r3-r2", "r1-r2"], 2)
    assert names(head_node="r3", tail_node="r2") == (["a-r3-r2"], 1)
    assert names(limit=1, offset=2) == (["to-h1"], 4)
    assert names(head_node="r2") == ([], 0)


def test_unknown_policies_are_not_found(lab):
    problem(lab.get("/v1/policies/nope"), 404)
    problem(lab.patch("/v1/policies/nope", {"table": 1}), 404)
    problem(lab.delete("/v1/policies/nope"), 404)


def test_a_policy_name_is_taken_once(lab):
    lab.create("policies", TO_H2)
    body = problem(lab.post("/v1/policies", {**TO_H2, "prefix": "fd00:3::/64"}), 409)
    assert body["detail"] == "policy to-h2 already exists"


def test_a_head_end_steers_a_prefix_and_a_sid_list_into_one_policy(lab):
    lab.create("policies", TO_H2)
    same_prefix = {**TO_H2, "name": "other", "segments": ["fc00:0:3::d6"]}
    body = problem(lab.post("/v1/policies", same_prefix), 409)
    assert body["detail"] == "policy to-h2 already steers fd00:2::/64 at r1"
    # in another table the prefix is another route
    lab.create("policies", {**same_prefix, "table": 10})
    body = problem(lab.post("/v1/policies", {**TO_H2, "name": "o2", "prefix": "fd00:7::/64"}), 409)
    assert "policy to-h2 has the same SID list at r1" in body["detail"]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"segments": ["fc00::zz"]}, "body.segments.0", "not a valid IPv6 address"),
        ({"segments": ["10.0.0.1"]}, "body.segments.0", "not a valid IPv6 address"),
        ({"segments": []}, "body.segments", "at least 1 item"),
        ({"segments": ["fc00:0:2::e"] * 16 + ["fc00:0:3::d6"]}, "body.segments", "at most 16"),
        ({"prefix": "fd00:2::1/64"}, "body.prefix", "not a valid IPv6 network"),
        ({"prefix": "10.0.0.0/8"}, "body.prefix", "IPv6"),
        ({"encap_mode": "l2encap"}, "body", "l2encap needs a device"),
        ({"encap_mode": "tunnel"}, "body.encap_mode", "'encap'"),
        ({"name": "a b"}, "body.name", "pattern"),
        ({"table": -1}, "body.table", "greater than or equal to 0"),
        ({"extra": 1}, "body.extra", "Extra inputs"),
        ({"segments": [1]}, "body.segments.0", "must be a string"),  # not ::1
        ({"prefix": 5}, "body.prefix", "must be a string"),  # not ::5/128
    ],
)
def test_malformed_policies_are_refused_with_the_fields_named(lab, change, field, message):
    reply = problem(lab.post("/v1/policies", {**TO_H2, **change}), 422)
    assert reply["title"] == "Invalid request"
    assert field in fields(reply), reply
    assert message in reply["detail"]
    assert lab.ok("GET", "/v1/policies")["total"] == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"segments": ["fc00:0:2::e", "fc00::99"]},
            "SIDs fc00::99 are not local SIDs of any node",
        ),
        ({"segments": ["fc00:0:2::e", "fc00:0:3::e"]}, "the last SID fc00:0:3::e is End on r3"),
        (
            {"segments": ["fc00:0:2::d6"]},
            "the last SID fc00:0:2::d6 is on node r2, not on the tail node r3",
        ),
        (
            {"segments": ["fc00:0:2::d6", "fc00:0:3::d6"]},
            "SID fc00:0:2::d6 (End.DT6) decapsulates before the end of the SID list",
        ),
        (
            {"segments": ["fc00:0:2::e", "fc00:0:1::e", "fc00:0:3::d6"]},
            "the path r1 -> r2 -> r1 -> r3 visits r1 more than once",
        ),
        (
            {"segments": ["fc00:0:2::e", "fc00:0:3::e", "fc00:0:2::e", "fc00:0:3::d6"]},
            "visits r2, r3 more than once",
        ),
        ({"head_node": "r9"}, "head node 'r9' does not exist"),
        ({"tail_node": "r9"}, "tail node 'r9' does not exist"),
        ({"tail_node": "r1"}, "head and tail node are the same node"),
    ],
)
def test_policies_that_make_no_sense_in_the_domain_are_invalid(lab, change, message):
    reply = problem(lab.post("/v1/policies", {**TO_H2, **change}), 422)
    assert reply["title"] == "Invalid desired state"
    assert message in reply["detail"]
    assert lab.ok("GET", "/v1/policies")["total"] == 0


def test_an_inline_policy_may_end_at_an_end_sid(lab):
    created = lab.create(
        "policies", {**TO_H2, "segments": ["fc00:0:2::e", "fc00:0:3::e"], "encap_mode": "inline"}
    )
    assert created["encap_mode"] == "inline"


def test_an_l2encap_policy_has_a_device(lab):
    created = lab.create("policies", {**TO_H2, "encap_mode": "l2encap", "device": "eth9"})
    assert (created["encap_mode"], created["device"]) == ("l2encap", "eth9")
    body = problem(lab.patch("/v1/policies/to-h2", {"device": ""}), 422)
    assert "l2encap needs a device" in body["detail"]
    assert lab.ok("GET", "/v1/policies/to-h2")["device"] == "eth9"


def test_a_patch_that_makes_a_policy_invalid_is_rolled_back(lab):
    before = lab.create("policies", TO_H2)
    for change, status in (
        ({"segments": ["fc00:0:2::e", "fc00:0:3::e"]}, 422),
        ({"segments": ["fc00:0:2::d6"]}, 422),
        ({"segments": ["fc00::99"]}, 422),
        ({"segments": []}, 422),
        ({"encap_mode": "l2encap"}, 422),
        ({"head_node": "r2"}, 422),  # not a field of the patch
    ):
        problem(lab.patch("/v1/policies/to-h2", change), status)
        assert lab.ok("GET", "/v1/policies/to-h2") == before
    lab.create(
        "policies",
        {**TO_H2, "name": "other", "segments": ["fc00:0:3::d6"], "prefix": "fd00:3::/64"},
    )
    problem(lab.patch("/v1/policies/to-h2", {"prefix": "fd00:3::/64"}), 409)
    assert lab.ok("GET", "/v1/policies/to-h2") == before


def test_a_policy_in_use_is_not_deleted_and_the_message_names_the_session(admin):
    add_lab(admin, (S1,))
    body = problem(admin.delete("/v1/policies/to-h1"), 409)
    assert body["detail"].startswith("policy to-h1 is used by session s1 (return)")
    body = problem(admin.delete("/v1/policies/to-h2"), 409)
    assert body["detail"].startswith("policy to-h2 is used by session s1 (forward)")
    assert admin.delete("/v1/sessions/s1").status_code == 204
    assert admin.delete("/v1/policies/to-h1").status_code == 204


def test_a_session_follows_its_policy_to_a_new_path(admin):
    add_lab(admin, (S1,))
    admin.create("nodes", {"name": "r4", "endpoint": "h:1", "probe_address": "fcf0:34::4"})
    admin.create("local-sids", {"sid": "fc00:0:4::e", "node": "r4", "behaviour": "End"})
    session = admin.ok("GET", "/v1/sessions/s1")
    after = admin.ok("PATCH", "/v1/policies/to-h1", {"segments": ["fc00:0:4::e", "fc00:0:1::d6"]})
    assert after["path"] == ["r3", "r4", "r1"]
    moved = admin.ok("GET", "/v1/sessions/s1")
    assert moved["path"] == {"forward": ["r1", "r2", "r3"], "reverse": ["r3", "r4", "r1"]}
    assert moved["flow_mon_ids"] == session["flow_mon_ids"]
    assert moved["ssid"] == session["ssid"]
