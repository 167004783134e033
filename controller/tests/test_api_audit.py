"""/v1/audit on SQLite and PostgreSQL: every change with who made it (the token's name), the
action, before and after; keys shown as "(set)"; refused changes leave no entry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller_fleet import NODES, S1, SIDS, TO_H1, TO_H2, Api, add_lab, problem

KEY = "00112233445566778899aabbccddeeff"


def entries(api: Api, **params) -> list[dict]:
    return api.get("/v1/audit", limit=1000, **params).json()["items"]


def test_every_change_is_recorded_with_who_what_before_and_after(admin, services):
    ops = Api(admin.client, services.auth.create("ops", "admin", "test"))
    add_lab(admin)
    ops.create("sessions", {**S1, "hmac_key": KEY})
    admin.ok("PATCH", "/v1/nodes/r2", {"endpoint": "10.0.0.2:50051"})
    ops.ok("PATCH", "/v1/sessions/s1", {"delay_interval_ms": 10})
    admin.ok("PUT", "/v1/sessions/s1/threshold", {"loss_ratio_max": 0.01})
    admin.ok("DELETE", "/v1/sessions/s1/threshold")
    ops.ok("DELETE", "/v1/sessions/s1")

    log = [e for e in entries(admin) if e["kind"] != "token"]
    assert [(e["actor"], e["action"], e["kind"], e["name"]) for e in reversed(log)] == [
        *(("alice", "create", "node", n["name"]) for n in NODES),
        *(("alice", "create", "local-sid", s["sid"]) for s in SIDS),
        *(("alice", "create", "policy", p["name"]) for p in (TO_H2, TO_H1)),
        ("ops", "create", "session", "s1"),
        ("alice", "update", "node", "r2"),
        ("ops", "update", "session", "s1"),
        ("alice", "create", "threshold", "s1"),
        ("alice", "delete", "threshold", "s1"),
        ("ops", "delete", "session", "s1"),
    ]
    ids = [e["id"] for e in log]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == len(ids)
    now = datetime.now(UTC)
    for e in log:
        at = datetime.fromisoformat(e["at"])  # with its zone, on SQLite too
        assert at.utcoffset() == timedelta(0)
        assert now - timedelta(minutes=1) < at <= now

    by = {(e["action"], e["kind"], e["name"]): e for e in log}
    node = by[("update", "node", "r2")]
    assert node["before"] == {
        "name": "r2",
        "endpoint": "127.0.0.1:50052",
        "probe_address": "fcf0:12::2",
        "core_interfaces": [],
        "boundary_interfaces": [],
    }
    assert node["after"] == {**node["before"], "endpoint": "10.0.0.2:50051"}
    policy = by[("create", "policy", "to-h2")]
    assert policy["before"] is None
    segments = TO_H2["segments"]
    assert policy["after"] == {
        **{k: v for k, v in TO_H2.items() if k != "segments"},
        "segment_lists": [
            {
                "segments": segments,
                "name": "sl0",
                "weight": 1,
                "flow_mon_id": admin.ok("GET", "/v1/policies/to-h2")["flow_mon_id"],
            }
        ],
        "encap_mode": "encap",
        "device": "",
        "table": 0,
        "protection": False,
    }
    session = by[("create", "session", "s1")]
    assert session["after"]["hmac_key"] == "(set)"
    assert session["after"]["policy"] == "to-h2"
    update = by[("update", "session", "s1")]
    assert (update["before"]["hmac_key"], update["after"]["hmac_key"]) == ("(set)", "(set)")
    # the operator's own setting: none before (the profile's or the default), then 10
    assert (update["before"]["delay_interval_ms"], update["after"]["delay_interval_ms"]) == (
        None,
        10,
    )
    deleted = by[("delete", "session", "s1")]
    assert (deleted["before"]["hmac_key"], deleted["after"]) == ("(set)", None)
    threshold = by[("create", "threshold", "s1")]
    assert threshold["after"]["loss_ratio_max"] == 0.01
    assert by[("delete", "threshold", "s1")]["after"] is None
    assert KEY not in admin.get("/v1/audit").text


def test_an_unset_key_is_shown_empty_and_a_removed_one_as_a_change(admin):
    add_lab(admin, (S1,))
    admin.ok("PATCH", "/v1/sessions/s1", {"hmac_key": KEY})
    admin.ok("PATCH", "/v1/sessions/s1", {"hmac_key": ""})
    log = entries(admin, kind="session")
    assert [(e["before"] or {}).get("hmac_key") for e in log] == ["(set)", "", None]
    assert [(e["after"] or {}).get("hmac_key") for e in log] == ["", "(set)", ""]


def test_refused_changes_leave_no_entry(admin):
    add_lab(admin, (S1,))
    before = entries(admin)
    problem(admin.post("/v1/nodes", NODES[0]), 409)
    problem(admin.delete("/v1/policies/to-h1"), 409)
    problem(admin.patch("/v1/local-sids/fc00:0:3::d6", {"behaviour": "End"}), 422)
    problem(admin.post("/v1/sessions", {**S1, "name": "s2"}), 409)
    problem(admin.put("/v1/sessions/nope/threshold", {}), 404)
    assert entries(admin) == before


def test_the_audit_log_is_read_a_page_at_a_time_newest_first_and_filtered(admin, reader):
    for i in range(7):
        admin.create("nodes", {"name": f"n{i}", "endpoint": f"h:{i + 1}"})
    admin.ok("PATCH", "/v1/nodes/n3", {"endpoint": "h:33"})
    admin.ok("DELETE", "/v1/nodes/n3")
    everything = reader.get("/v1/audit", kind="node").json()
    assert everything["total"] == 9
    page = reader.get("/v1/audit", kind="node", limit=3, offset=3).json()
    assert (page["total"], page["limit"], page["offset"]) == (9, 3, 3)
    assert page["items"] == everything["items"][3:6]
    assert [e["name"] for e in page["items"]] == ["n5", "n4", "n3"]
    n3 = reader.get("/v1/audit", kind="node", name="n3").json()
    assert [e["action"] for e in n3["items"]] == ["delete", "update", "create"]
    assert n3["total"] == 3
    assert reader.get("/v1/audit", kind="policy").json() == {
        "total": 0,
        "limit": 100,
        "offset": 0,
        "items": [],
    }
    assert reader.get("/v1/audit", offset=2**64).json()["items"] == []
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}):
        problem(reader.get("/v1/audit", **bad), 422)
