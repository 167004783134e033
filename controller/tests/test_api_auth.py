"""Who may call the API: every /v1 route needs a known token, every change an admin one; tokens are
created, listed and deleted through the API (on SQLite and PostgreSQL)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from controller_fleet import S1, Api, add_lab, problem

PARAMS = {"name": "s1", "sid": "fc00:0:2::e"}
READS = {"GET"}


def routes(client) -> list[tuple[str, str]]:
    """(method, path) of every route the OpenAPI document lists, its path parameters filled in."""
    found = []
    for template, operations in client.get("/openapi.json").json()["paths"].items():
        path = re.sub(r"\{(\w+)\}", lambda m: PARAMS[m.group(1)], template)
        found.extend((method.upper(), path) for method in operations)
    return found


def test_the_api_has_the_routes_this_test_covers(client):
    assert set(routes(client)) >= {
        ("GET", "/v1/nodes"),
        ("POST", "/v1/nodes"),
        ("GET", "/v1/nodes/s1"),
        ("PATCH", "/v1/nodes/s1"),
        ("DELETE", "/v1/nodes/s1"),
        ("GET", "/v1/local-sids"),
        ("POST", "/v1/local-sids"),
        ("GET", "/v1/local-sids/fc00:0:2::e"),
        ("PATCH", "/v1/local-sids/fc00:0:2::e"),
        ("DELETE", "/v1/local-sids/fc00:0:2::e"),
        ("GET", "/v1/policies"),
        ("POST", "/v1/policies"),
        ("GET", "/v1/policies/s1"),
        ("PATCH", "/v1/policies/s1"),
        ("DELETE", "/v1/policies/s1"),
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions"),
        ("GET", "/v1/sessions/s1"),
        ("PATCH", "/v1/sessions/s1"),
        ("DELETE", "/v1/sessions/s1"),
        ("GET", "/v1/sessions/s1/loss"),
        ("GET", "/v1/sessions/s1/loss/intervals"),
        ("GET", "/v1/sessions/s1/delay"),
        ("GET", "/v1/sessions/s1/hops"),
        ("PUT", "/v1/sessions/s1/threshold"),
        ("GET", "/v1/sessions/s1/threshold"),
        ("DELETE", "/v1/sessions/s1/threshold"),
        ("GET", "/v1/thresholds"),
        ("POST", "/v1/tokens"),
        ("GET", "/v1/tokens"),
        ("DELETE", "/v1/tokens/s1"),
        ("GET", "/v1/audit"),
    }


def test_every_route_needs_a_token(client, admin, anonymous):
    add_lab(admin, (S1,))
    unknown = Api(client, "s6pm_" + "x" * 43)
    for method, path in routes(client):
        for caller, detail in (
            (anonymous, "an API token is needed: Authorization: Bearer <token>"),
            (unknown, "unknown API token"),
        ):
            reply = caller.request(method, path, json={})
            body = problem(reply, 401)
            assert (body["title"], body["detail"]) == ("Unauthorized", detail), (method, path)
            assert reply.headers["www-authenticate"] == "Bearer"
    other_scheme = client.get("/v1/nodes", headers={"Authorization": "Basic YTpi"})
    problem(other_scheme, 401)
    assert admin.ok("GET", "/v1/sessions/s1")["name"] == "s1"


def test_a_read_only_token_reads_but_changes_nothing(client, admin, reader):
    add_lab(admin, (S1,))
    before = admin.ok("GET", "/v1/audit")["total"]
    for method, path in routes(client):
        if method in READS and path != "/v1/tokens":
            continue
        body = problem(reader.request(method, path, json={}), 403)
        assert body["detail"] == "token bob is read-only: changes need an admin token"
    for path in (
        "/v1/nodes",
        "/v1/nodes/r1",
        "/v1/local-sids",
        "/v1/policies/to-h2",
        "/v1/sessions",
        "/v1/sessions/s1",
        "/v1/thresholds",
        "/v1/audit",
    ):
        assert reader.get(path).status_code == 200, path
    assert admin.ok("GET", "/v1/audit")["total"] == before
    assert admin.ok("GET", "/v1/sessions/s1")["name"] == "s1"


def test_tokens_are_created_listed_and_deleted_through_the_api(admin):
    created = admin.create("tokens", {"name": "ci", "scope": "read"})
    assert (created["name"], created["scope"]) == ("ci", "read")
    assert created["token"].startswith("s6pm_")
    ci = Api(admin.client, created["token"])
    assert ci.get("/v1/nodes").status_code == 200
    problem(ci.post("/v1/nodes", {"name": "r1", "endpoint": "h:1"}), 403)

    ops = Api(admin.client, admin.create("tokens", {"name": "ops", "scope": "admin"})["token"])
    assert ops.create("nodes", {"name": "r1", "endpoint": "h:1"})["name"] == "r1"
    assert admin.get("/v1/audit", kind="node").json()["items"][0]["actor"] == "ops"

    listed = admin.ok("GET", "/v1/tokens")
    assert [(t["name"], t["scope"]) for t in listed] == [
        ("alice", "admin"),
        ("ci", "read"),
        ("ops", "admin"),
    ]
    assert all(set(t) == {"name", "scope", "created_at"} for t in listed)
    assert all(datetime.fromisoformat(t["created_at"]).utcoffset() == timedelta(0) for t in listed)
    assert created["token"] not in admin.get("/v1/tokens").text

    assert admin.delete("/v1/tokens/ci").status_code == 204
    assert problem(ci.get("/v1/nodes"), 401)["detail"] == "unknown API token"
    assert [t["name"] for t in admin.ok("GET", "/v1/tokens")] == ["alice", "ops"]
    audit = [
        e for e in admin.get("/v1/audit", kind="token").json()["items"] if e["name"] != "alice"
    ]
    assert [(e["action"], e["name"], e["actor"]) for e in audit] == [
        ("delete", "ci", "alice"),
        ("create", "ops", "alice"),
        ("create", "ci", "alice"),
    ]
    assert audit[0]["before"] == {"name": "ci", "scope": "read"}


def test_token_refusals(admin):
    admin.create("tokens", {"name": "ci", "scope": "read"})
    assert problem(admin.post("/v1/tokens", {"name": "ci", "scope": "admin"}), 409)["detail"] == (
        "token ci already exists"
    )
    problem(admin.delete("/v1/tokens/nope"), 404)
    problem(admin.post("/v1/tokens", {"name": "x", "scope": "root"}), 422)
    problem(admin.post("/v1/tokens", {"name": "", "scope": "read"}), 422)


def test_an_admin_may_delete_its_own_token(admin):
    assert admin.delete("/v1/tokens/alice").status_code == 204
    problem(admin.get("/v1/nodes"), 401)
