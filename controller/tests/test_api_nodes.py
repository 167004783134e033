"""/v1/nodes on SQLite and PostgreSQL: create, read, list, update, delete, and every refusal."""

from __future__ import annotations

from controller_fleet import NODES, S1, SIDS, TO_H2, add_lab, fields, problem


def test_a_node_is_created_read_listed_updated_and_deleted(admin):
    created = admin.create("nodes", NODES[0])
    assert created == {
        "name": "r1",
        "endpoint": "127.0.0.1:50051",
        "probe_address": "fcf0:12::1",
        "core_interfaces": [],
        "boundary_interfaces": ["eth-h1"],
        "reachable": None,
        "info": None,
        "last_attempt": None,
        "status": {
            "state": "pending",
            "message": "",
            "revision": created["status"]["revision"],
            "nodes": ["r1"],
        },
    }
    assert admin.ok("GET", "/v1/nodes/r1") == created

    updated = admin.ok(
        "PATCH", "/v1/nodes/r1", {"endpoint": "[::1]:7000", "core_interfaces": ["eth1", "eth2"]}
    )
    assert (updated["endpoint"], updated["core_interfaces"]) == ("[::1]:7000", ["eth1", "eth2"])
    assert updated["probe_address"] == "fcf0:12::1"  # not in the patch: kept
    assert updated["boundary_interfaces"] == ["eth-h1"]
    assert updated["status"]["revision"] > created["status"]["revision"]
    assert admin.ok("GET", "/v1/nodes/r1") == updated

    cleared = admin.ok("PATCH", "/v1/nodes/r1", {"probe_address": None})
    assert cleared["probe_address"] is None

    assert admin.delete("/v1/nodes/r1").status_code == 204
    problem(admin.get("/v1/nodes/r1"), 404)
    assert admin.ok("GET", "/v1/nodes")["items"] == []


def test_nodes_are_listed_by_name_a_page_at_a_time_with_the_total(admin):
    for i in (3, 1, 4, 0, 2):
        admin.create("nodes", {"name": f"n{i}", "endpoint": f"10.0.0.{i}:50051"})
    first = admin.ok("GET", "/v1/nodes?limit=2")
    assert [n["name"] for n in first["items"]] == ["n0", "n1"]
    assert (first["total"], first["limit"], first["offset"]) == (5, 2, 0)
    last = admin.get("/v1/nodes", limit=2, offset=4).json()
    assert ([n["name"] for n in last["items"]], last["total"]) == (["n4"], 5)
    assert admin.get("/v1/nodes", offset=9).json()["items"] == []
    far = admin.get("/v1/nodes", offset=2**70)  # beyond any SQL integer: still an empty page
    assert far.json() == {"total": 5, "limit": 100, "offset": 2**70, "items": []}


def test_unknown_nodes_are_not_found(admin):
    assert "node r9 does not exist" in problem(admin.get("/v1/nodes/r9"), 404)["detail"]
    problem(admin.patch("/v1/nodes/r9", {"endpoint": "h:1"}), 404)
    problem(admin.delete("/v1/nodes/r9"), 404)


def test_a_node_name_is_taken_once(admin):
    admin.create("nodes", NODES[0])
    body = problem(admin.post("/v1/nodes", {**NODES[0], "endpoint": "h:2"}), 409)
    assert body["detail"] == "node r1 already exists"
    assert admin.ok("GET", "/v1/nodes/r1")["endpoint"] == NODES[0]["endpoint"]


def test_malformed_nodes_are_refused_with_the_fields_named(admin):
    for body, field in (
        ({"name": "-r1", "endpoint": "h:1"}, "body.name"),
        ({"name": "r" * 65, "endpoint": "h:1"}, "body.name"),
        ({"name": "r1", "endpoint": "no-port"}, "body.endpoint"),
        ({"name": "r1", "endpoint": "h:1", "probe_address": "10.0.0.1"}, "body.probe_address"),
        ({"name": "r1", "endpoint": "h:1", "core_interfaces": ["eth 0"]}, "body.core_interfaces.0"),
        ({"name": "r1", "endpoint": "h:1", "colour": "red"}, "body.colour"),
        ({"name": "r1"}, "body.endpoint"),
    ):
        reply = problem(admin.post("/v1/nodes", body), 422)
        assert reply["title"] == "Invalid request"
        assert field in fields(reply), reply
    problem(admin.patch("/v1/nodes/r1", {"probe_address": "x"}), 422)
    assert admin.ok("GET", "/v1/nodes")["total"] == 0


def test_a_node_in_use_is_not_deleted_and_the_message_names_its_users(admin):
    add_lab(admin)
    detail = problem(admin.delete("/v1/nodes/r2"), 409)["detail"]
    assert detail.startswith("node r2 is used by local SID fc00:0:2::e")
    detail = problem(admin.delete("/v1/nodes/r1"), 409)["detail"]
    assert "local SID fc00:0:1::d6" in detail
    assert "policy to-h1" in detail
    assert "policy to-h2" in detail
    admin.ok("GET", "/v1/nodes/r1")


def test_a_node_without_users_can_go_after_its_sid(admin):
    admin.create("nodes", NODES[1])
    admin.create("local-sids", SIDS[1])
    problem(admin.delete("/v1/nodes/r2"), 409)
    assert admin.delete("/v1/local-sids/fc00:0:2::e").status_code == 204
    assert admin.delete("/v1/nodes/r2").status_code == 204


def test_removing_the_probe_address_of_a_session_end_is_refused_and_rolled_back(admin):
    add_lab(admin, (S1,))
    body = problem(admin.patch("/v1/nodes/r3", {"probe_address": None}), 422)
    assert "node r3 has no probe_address" in body["detail"]
    assert admin.ok("GET", "/v1/nodes/r3")["probe_address"] == "fcf0:23::3"
    # r2 is no end of s1: its address may go
    assert admin.ok("PATCH", "/v1/nodes/r2", {"probe_address": None})["probe_address"] is None


def test_a_policy_lists_its_nodes_in_its_status(admin):
    add_lab(admin)
    policy = admin.ok("GET", f"/v1/policies/{TO_H2['name']}")
    assert policy["status"]["nodes"] == ["r1", "r2", "r3"]
    assert policy["status"]["state"] == "pending"
