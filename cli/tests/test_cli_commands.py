"""`srv6pm` against the real controller API: every resource added, listed, shown, changed and
deleted through the CLI, in tables and in the API's JSON; --wait following the nodes; `srv6pm
lab` forwarded to the lab's own command line."""

from __future__ import annotations

import json
import sys

import httpx
import pytest
from cli_harness import (
    CLEAN_ENV,
    POLICIES,
    Controller,
    Run,
    build_domain,
    ok,
    reconcile,
    reconciled_later,
)
from srv6pm.cli.app import app
from typer.testing import CliRunner


def api_get(c: Controller, where: str, **params: object) -> object:
    reply = httpx.get(c.url + where, params=params, headers={"Authorization": f"Bearer {c.token}"})
    reply.raise_for_status()
    return reply.json()


def test_domain_built_with_the_cli_is_what_the_api_holds(controller: Controller, cli: Run) -> None:
    build_domain(cli)

    nodes = ok(cli("nodes", "list")).stdout
    for name in ("r1", "r2", "r3"):
        assert name in nodes
    assert "127.0.0.1:50061" in nodes and "fc00:1::1" in nodes
    assert "not contacted yet" in nodes and "pending" in nodes
    assert "1-3 of 3 nodes" in nodes

    policy = ok(cli("policies", "show", "fwd")).stdout
    assert "fc00:2::e -> fc00:3::d6" in policy  # segments in travel order
    assert "r1 -> r2 -> r3" in policy  # the nodes that count its packets
    assert "fd00:3::/64" in policy

    session = ok(cli("sessions", "show", "s1")).stdout
    assert "r1 -> r2 -> r3" in session and "r3 -> r2 -> r1" in session
    assert "sender" in session and "reflector" in session

    sids = ok(cli("sids", "list", "--node", "r2")).stdout
    assert "fc00:2::e" in sids and "fc00:3::d6" not in sids

    # json: exactly the API's JSON, for scripts
    for args, where in [
        (["nodes", "list"], "/v1/nodes"),
        (["sids", "list"], "/v1/local-sids"),
        (["policies", "list"], "/v1/policies"),
        (["sessions", "list"], "/v1/sessions"),
        (["nodes", "show", "r1"], "/v1/nodes/r1"),
        (["sids", "show", "fc00:2::e"], "/v1/local-sids/fc00:2::e"),
        (["policies", "show", "rev"], "/v1/policies/rev"),
        (["sessions", "show", "s1"], "/v1/sessions/s1"),
    ]:
        printed = json.loads(ok(cli("--output", "json", *args)).stdout)
        assert printed == api_get(controller, where), args

    listed = json.loads(ok(cli("-o", "json", "policies", "list", "--head-node", "r3")).stdout)
    assert [p["name"] for p in listed["items"]] == ["rev"]
    assert listed["items"][0]["segments"] == POLICIES["rev"][2]


def test_output_and_url_come_from_the_environment(controller: Controller) -> None:

    env = {
        **CLEAN_ENV,
        "SRV6PM_URL": controller.url,
        "SRV6PM_TOKEN": controller.token,
        "SRV6PM_OUTPUT": "json",
    }
    result = CliRunner().invoke(app, ["nodes", "list"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"items": [], "total": 0, "limit": 100, "offset": 0}


def test_list_says_when_there_are_more(cli: Run) -> None:
    for i in range(5):
        ok(cli("nodes", "add", f"n{i}", "--endpoint", f"10.0.0.{i}:50051"))

    first = ok(cli("nodes", "list", "--limit", "2")).stdout
    assert "n0" in first and "n1" in first and "n2" not in first
    assert "1-2 of 5 nodes; more: --offset 2" in first

    last = ok(cli("nodes", "list", "--limit", "2", "--offset", "4")).stdout
    assert "n4" in last and "n3" not in last
    assert "5-5 of 5 nodes" in last and "more" not in last

    page = json.loads(ok(cli("-o", "json", "nodes", "list", "--limit", "2")).stdout)
    assert (page["total"], len(page["items"])) == (5, 2)


def test_update_changes_only_the_options_given(controller: Controller, cli: Run) -> None:
    ok(
        cli(
            "nodes",
            "add",
            "r1",
            "--endpoint",
            "10.0.0.1:50051",
            "--core-interface",
            "eth1",
            "--core-interface",
            "eth2",
            "--boundary-interface",
            "eth0",
        )
    )
    ok(cli("nodes", "update", "r1", "--endpoint", "10.0.0.9:50051"))
    node = api_get(controller, "/v1/nodes/r1")
    assert isinstance(node, dict)
    assert node["endpoint"] == "10.0.0.9:50051"
    assert node["core_interfaces"] == ["eth1", "eth2"]
    assert node["boundary_interfaces"] == ["eth0"]

    ok(cli("nodes", "update", "r1", "--clear-core-interfaces", "--probe-address", "fc00::9"))
    node = api_get(controller, "/v1/nodes/r1")
    assert isinstance(node, dict)
    assert node["core_interfaces"] == [] and node["probe_address"] == "fc00::9"

    nothing = cli("nodes", "update", "r1")
    assert nothing.exit_code == 2
    assert "nothing to change" in nothing.stderr


def test_a_session_without_a_key_gets_the_controllers_default(
    controller: Controller, cli: Run
) -> None:
    controller.services.default_stamp_key = b"\x01" * 32
    build_domain(cli)  # s1: no --hmac-key
    s1 = api_get(controller, "/v1/sessions/s1")
    assert isinstance(s1, dict) and s1["authenticated"] is True
    ok(cli("sessions", "add", "s2", "--policy", "rev", "--return-policy", "fwd", "--hmac-key", ""))
    s2 = api_get(controller, "/v1/sessions/s2")
    assert isinstance(s2, dict) and s2["authenticated"] is False


def test_policy_and_session_updates(controller: Controller, cli: Run) -> None:
    build_domain(cli)
    ok(cli("sessions", "update", "s1", "--delay-interval-ms", "100", "--hmac-key", "00" * 32))
    shown = ok(cli("sessions", "show", "s1")).stdout
    assert "100 ms" in shown
    assert "00" * 32 not in shown  # write-only
    ok(cli("policies", "update", "fwd", "--prefix", "fd00:33::/64"))
    assert "fd00:33::/64" in ok(cli("policies", "show", "fwd")).stdout
    ok(cli("sids", "update", "fc00:1::d6", "--lookup-table", "100"))
    sid = api_get(controller, "/v1/local-sids/fc00:1::d6")
    assert isinstance(sid, dict) and sid["lookup_table"] == 100


def test_delete_in_dependency_order(controller: Controller, cli: Run) -> None:
    build_domain(cli)
    assert "session s1 deleted" in ok(cli("sessions", "delete", "s1")).stdout
    for name in POLICIES:
        ok(cli("policies", "delete", name))
    for sid in ("fc00:1::d6", "fc00:2::e", "fc00:3::d6"):
        ok(cli("sids", "delete", sid))
    for node in ("r1", "r2", "r3"):
        ok(cli("nodes", "delete", node))
    assert api_get(controller, "/v1/nodes") == {"items": [], "total": 0, "limit": 100, "offset": 0}
    assert ok(cli("-o", "json", "nodes", "delete", "--help")).stdout  # help still works in json


def test_thresholds_set_show_list_delete(cli: Run) -> None:
    build_domain(cli)
    ok(
        cli(
            "thresholds",
            "set",
            "s1",
            "--loss-ratio-max",
            "0.01",
            "--delay-p99-max-ms",
            "5",
            "--window-blocks",
            "12",
        )
    )
    shown = ok(cli("thresholds", "show", "s1")).stdout
    assert "0.01" in shown and "5 ms" in shown and "12 blocks" in shown and "unknown" in shown
    listed = json.loads(ok(cli("-o", "json", "thresholds", "list")).stdout)
    assert [(t["session"], t["loss_ratio_max"], t["window_blocks"]) for t in listed] == [
        ("s1", 0.01, 12)
    ]
    ok(cli("thresholds", "delete", "s1"))
    assert "no thresholds" in ok(cli("thresholds", "list")).stdout


def test_tokens_scopes_and_the_audit_log(controller: Controller, cli: Run) -> None:
    created = json.loads(
        ok(cli("-o", "json", "tokens", "create", "viewer", "--scope", "read")).stdout
    )
    assert created["name"] == "viewer" and created["scope"] == "read"
    reader = created["token"]

    assert "shown once" in ok(cli("tokens", "create", "ops", "--scope", "admin")).stdout
    listed = ok(cli("tokens", "list")).stdout
    assert "viewer" in listed and "ops" in listed and reader not in listed

    ok(cli("nodes", "add", "r1", "--endpoint", "10.0.0.1:50051"))
    assert "r1" in ok(cli("nodes", "list", token=reader)).stdout
    refused = cli("nodes", "add", "r2", "--endpoint", "10.0.0.2:50051", token=reader)
    assert refused.exit_code == 1
    assert "error: Forbidden: token viewer is read-only" in refused.stderr

    ok(cli("nodes", "update", "r1", "--endpoint", "10.0.0.7:50051"))
    audit = ok(cli("audit", "--kind", "node")).stdout
    assert "endpoint: 10.0.0.1:50051 -> 10.0.0.7:50051" in audit
    assert "created" in audit and "admin" in audit
    entries = json.loads(ok(cli("-o", "json", "audit", "--name", "r1", "--limit", "1")).stdout)
    assert entries["total"] == 2 and entries["items"][0]["action"] == "update"

    ok(cli("tokens", "delete", "viewer"))
    gone = cli("nodes", "list", token=reader)
    assert gone.exit_code == 1 and "unknown API token" in gone.stderr


# ---- --wait --------------------------------------------------------------------------------------


def test_wait_returns_once_the_nodes_took_the_change(controller: Controller, cli: Run) -> None:
    with reconciled_later(controller.store, delay_s=1.0):
        result = ok(cli("nodes", "add", "r1", "--endpoint", "10.0.0.1:50051", "--wait"))
    assert "applied" in result.stdout

    with reconciled_later(controller.store, delay_s=0.6):
        result = ok(
            cli("-o", "json", "nodes", "update", "r1", "--endpoint", "10.0.0.2:1", "--wait")
        )
    assert json.loads(result.stdout)["status"]["state"] == "applied"


def test_wait_fails_with_the_nodes_message(controller: Controller, cli: Run) -> None:
    build_domain(cli)
    reconcile(controller.store)
    with reconciled_later(controller.store, error="unreachable: connection refused"):
        result = cli("policies", "update", "fwd", "--prefix", "fd00:9::/64", "--wait")
    assert result.exit_code == 1
    assert "error: policy fwd failed: r1: unreachable: connection refused" in result.stderr
    assert "Traceback" not in result.output


def test_wait_gives_up_after_its_timeout(cli: Run) -> None:
    result = cli(
        "nodes", "add", "r1", "--endpoint", "10.0.0.1:50051", "--wait", "--wait-timeout", "1"
    )
    assert result.exit_code == 4
    assert "node r1: still pending on r1 after 1 s" in result.stderr


def test_wait_for_a_delete_follows_the_nodes_it_was_on(controller: Controller, cli: Run) -> None:
    build_domain(cli)
    reconcile(controller.store)
    with reconciled_later(controller.store, delay_s=0.8, nodes=["r1", "r2", "r3"]):
        result = ok(cli("sessions", "delete", "s1", "--wait"))
    assert "session s1 deleted" in result.stdout

    with reconciled_later(controller.store, delay_s=0.5, reachable=False, error="unreachable: x"):
        result = cli("policies", "delete", "fwd", "--wait")
    assert result.exit_code == 1
    assert "policy fwd: node r1 was not reconciled" in result.stderr

    timed_out = cli("policies", "delete", "rev", "--wait", "--wait-timeout", "0.5")
    assert timed_out.exit_code == 4 and "not reconciled since the deletion" in timed_out.stderr


# ---- srv6pm lab ----------------------------------------------------------------------------------


def test_lab_help_is_the_labs_own(cli: Run) -> None:
    result = ok(cli("lab", "--help"))
    assert "usage: srv6pm lab" in result.stdout
    for command in ("up", "down", "status", "drop", "drops"):
        assert command in result.stdout


def test_lab_arguments_are_forwarded_unchanged(monkeypatch: pytest.MonkeyPatch, cli: Run) -> None:
    seen: list[list[str]] = []

    def main(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setattr("srv6pm.lab.cli.main", main)
    args = ["drop", "default", "--prefix", "p1", "--node", "r2", "--to", "r3", "--count", "5"]
    result = cli("lab", *args)
    assert seen == [["lab", *args]]
    assert result.exit_code == 3  # the lab's exit status


def test_lab_without_the_lab_package_says_so(monkeypatch: pytest.MonkeyPatch, cli: Run) -> None:
    monkeypatch.setitem(sys.modules, "srv6pm.lab.cli", None)  # import raises ModuleNotFoundError
    result = cli("lab", "status", "default")
    assert result.exit_code == 1
    assert "srv6pm lab needs srv6pm.lab, which is not installed" in result.stderr
    assert "Traceback" not in result.output
