"""/v1/local-sids on SQLite and PostgreSQL: create, read, list, update, delete, every refusal."""

from __future__ import annotations

import pytest
from controller_fleet import NODES, SIDS, add_lab, fields, problem


@pytest.fixture
def nodes(admin):
    for node in NODES:
        admin.create("nodes", node)
    return admin


def test_a_local_sid_is_created_read_listed_updated_and_deleted(nodes):
    admin = nodes
    created = admin.create(
        "local-sids",
        {"sid": "FC00:0:2:0::E1", "node": "r2", "behaviour": "End.X", "nexthop": "fe80::2"},
    )
    assert created == {
        "sid": "fc00:0:2::e1",  # the canonical text form, under which it is found
        "node": "r2",
        "behaviour": "End.X",
        "nexthop": "fe80::2",
        "lookup_table": 0,
        "device": "",
        "table": 0,
        "status": {
            "state": "pending",
            "message": "",
            "revision": created["status"]["revision"],
            "nodes": ["r2"],
        },
    }
    assert admin.ok("GET", "/v1/local-sids/fc00:0:2:0:0:0:0:e1") == created

    updated = admin.ok(
        "PATCH",
        "/v1/local-sids/fc00:0:2::e1",
        {"behaviour": "End.DT6", "nexthop": None, "table": 100},
    )
    assert (updated["behaviour"], updated["nexthop"], updated["table"]) == ("End.DT6", None, 100)
    assert admin.ok("GET", "/v1/local-sids/fc00:0:2::e1") == updated

    assert admin.delete("/v1/local-sids/fc00:0:2::e1").status_code == 204
    problem(admin.get("/v1/local-sids/fc00:0:2::e1"), 404)


def test_local_sids_are_listed_by_node_a_page_at_a_time(nodes):
    admin = nodes
    for i in range(5):
        admin.create("local-sids", {"sid": f"fc00:0:2::{i + 1}", "node": "r2", "behaviour": "End"})
    for sid in SIDS:
        admin.create("local-sids", sid)
    everything = admin.ok("GET", "/v1/local-sids")
    assert everything["total"] == 8
    page = admin.get("/v1/local-sids", node="r2", limit=3, offset=3).json()
    assert page["total"] == 6
    assert [s["sid"] for s in page["items"]] == ["fc00:0:2::4", "fc00:0:2::5", "fc00:0:2::e"]
    assert {s["node"] for s in admin.get("/v1/local-sids", node="r1").json()["items"]} == {"r1"}
    assert admin.get("/v1/local-sids", node="r9").json() == {
        "total": 0,
        "limit": 100,
        "offset": 0,
        "items": [],
    }


def test_unknown_local_sids_are_not_found(nodes):
    problem(nodes.get("/v1/local-sids/fc00::99"), 404)
    problem(nodes.patch("/v1/local-sids/fc00::99", {"table": 1}), 404)
    problem(nodes.delete("/v1/local-sids/fc00::99"), 404)
    assert "sid" in str(problem(nodes.get("/v1/local-sids/not-a-sid"), 422)["errors"])


def test_a_sid_is_held_once(nodes):
    nodes.create("local-sids", SIDS[0])
    body = problem(nodes.post("/v1/local-sids", {**SIDS[0], "node": "r2"}), 409)
    assert body["detail"] == "local-sid fc00:0:1::d6 already exists"


def test_a_sid_on_an_unknown_node_is_invalid(nodes):
    body = problem(nodes.post("/v1/local-sids", {**SIDS[0], "node": "r9"}), 422)
    assert body["title"] == "Invalid desired state"
    assert body["detail"] == "node 'r9' does not exist"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"behaviour": "End.X"}, "End.X needs an IPv6 nexthop"),
        ({"behaviour": "End.X", "nexthop": "10.0.0.1"}, "End.X needs an IPv6 nexthop"),
        ({"behaviour": "End.DX6", "nexthop": "10.0.0.1"}, "End.DX6 needs an IPv6 nexthop"),
        ({"behaviour": "End.DX4", "nexthop": "fe80::1"}, "End.DX4 needs an IPv4 nexthop"),
        ({"behaviour": "End.DX4"}, "End.DX4 needs an IPv4 nexthop"),
        ({"behaviour": "End", "nexthop": "fe80::1"}, "End takes no nexthop"),
        ({"behaviour": "End.Y"}, "body.behaviour"),
        ({"behaviour": "End", "sid": "fc00::g"}, "body.sid"),
        ({"behaviour": "End", "sid": "10.0.0.1"}, "body.sid"),
        ({"behaviour": "End", "table": -1}, "body.table"),
        ({"behaviour": "End.T", "lookup_table": 1 << 31}, "body.lookup_table"),
        ({"behaviour": "End.DT6", "table": 1 << 32}, "body.table"),
        ({"behaviour": "End", "device": "a-very-long-device"}, "body.device"),
    ],
)
def test_malformed_local_sids_are_refused_with_the_reason(nodes, body, message):
    reply = problem(nodes.post("/v1/local-sids", {"sid": "fc00::1", "node": "r1", **body}), 422)
    assert message in reply["detail"]
    assert reply["errors"]
    assert nodes.ok("GET", "/v1/local-sids")["total"] == 0


def test_an_end_dx4_sid_takes_an_ipv4_nexthop(nodes):
    created = nodes.create(
        "local-sids",
        {"sid": "fc00:0:1::d4", "node": "r1", "behaviour": "End.DX4", "nexthop": "10.0.0.1"},
    )
    assert created["nexthop"] == "10.0.0.1"
    body = problem(nodes.patch("/v1/local-sids/fc00:0:1::d4", {"nexthop": "fe80::1"}), 422)
    assert "End.DX4 needs an IPv4 nexthop" in body["detail"]
    assert nodes.ok("GET", "/v1/local-sids/fc00:0:1::d4")["nexthop"] == "10.0.0.1"


def test_a_sid_in_use_is_not_deleted_and_the_message_names_the_policies(admin):
    add_lab(admin)
    body = problem(admin.delete("/v1/local-sids/fc00:0:2::e"), 409)
    users, _, advice = body["detail"].partition(": ")
    assert users.startswith("local-sid fc00:0:2::e is used by ")
    assert set(users.removeprefix("local-sid fc00:0:2::e is used by ").split(", ")) == {
        "policy to-h1",
        "policy to-h2",
    }
    assert advice == "delete or change them first"
    detail = problem(admin.delete("/v1/local-sids/fc00:0:3::d6"), 409)["detail"]
    assert "policy to-h2" in detail
    assert "to-h1" not in detail


def test_a_sid_change_that_breaks_a_policy_is_refused_and_rolled_back(admin):
    add_lab(admin)
    body = problem(admin.patch("/v1/local-sids/fc00:0:3::d6", {"behaviour": "End"}), 422)
    assert "the last SID fc00:0:3::d6 is End on r3" in body["detail"]
    assert admin.ok("GET", "/v1/local-sids/fc00:0:3::d6")["behaviour"] == "End.DT6"
    # A SID in the middle of a list must not decapsulate either
    body = problem(admin.patch("/v1/local-sids/fc00:0:2::e", {"behaviour": "End.DT6"}), 422)
    assert "decapsulates before the end of the SID list" in body["detail"]
    assert admin.ok("GET", "/v1/local-sids/fc00:0:2::e")["behaviour"] == "End"
    # a change that keeps every policy valid goes through
    assert admin.ok("PATCH", "/v1/local-sids/fc00:0:3::d6", {"behaviour": "End.DT46"})


def test_the_fields_of_a_malformed_patch_are_named(nodes):
    nodes.create("local-sids", SIDS[0])
    body = problem(nodes.patch("/v1/local-sids/fc00:0:1::d6", {"node": "r2"}), 422)
    assert "body.node" in fields(body)


def test_table_ids_up_to_the_largest_sql_integer_are_stored(nodes):
    largest = (1 << 31) - 1  # PostgreSQL's INTEGER
    created = nodes.create(
        "local-sids",
        {
            "sid": "fc00:0:1::7",
            "node": "r1",
            "behaviour": "End.T",
            "lookup_table": largest,
            "table": largest,
        },
    )
    assert (created["lookup_table"], created["table"]) == (largest, largest)
    assert nodes.ok("GET", "/v1/local-sids/fc00:0:1::7")["table"] == largest
