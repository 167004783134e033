"""`srv6pm policies` with weighted segment lists, `srv6pm profiles`, and sessions over a whole
policy, one segment list or a profile, against the real controller API."""

from __future__ import annotations

import json

from cli_harness import Run, build_domain, ok

TWO = [
    "policies",
    "add",
    "two",
    "--head",
    "r1",
    "--tail",
    "r3",
    "--prefix",
    "fd00:30::/64",
    "--segment-list",
    "via-r2:3=fc00:2::e2,fc00:3::d6",
    "--segment-list",
    "direct=fc00:3::d6",
    "--protection",
]


def as_json(cli: Run, *args: str) -> dict:
    return json.loads(ok(cli("-o", "json", *args)).stdout)


def test_a_policy_of_weighted_segment_lists_and_a_session_over_it(cli: Run) -> None:
    build_domain(cli)
    ok(cli("sids", "add", "fc00:2::e2", "--node", "r2", "--behaviour", "End"))
    ok(cli(*TWO))
    policy = as_json(cli, "policies", "show", "two")
    lists = [(sl["name"], sl["weight"], sl["path"]) for sl in policy["segment_lists"]]
    assert lists == [("via-r2", 3, ["r1", "r2", "r3"]), ("direct", 1, ["r1", "r3"])]
    assert policy["protection"] is True
    shown = ok(cli("policies", "show", "two")).stdout
    assert "via-r2 (weight 3" in shown and "path direct" in shown

    ok(cli("sessions", "add", "s2", "--policy", "two", "--return-policy", "rev"))
    session = as_json(cli, "sessions", "show", "s2")
    assert [p["sender"] for p in session["segment_lists"]] == ["s2/via-r2", "s2/direct"]
    shown = ok(cli("sessions", "show", "s2")).stdout
    assert "via-r2: ssid" in shown and "direct: ssid" in shown
    assert "s2" in ok(cli("sessions", "list")).stdout

    ok(cli("sessions", "update", "s2", "--segment-list", "direct"))
    assert as_json(cli, "sessions", "show", "s2")["segment_list"] == "direct"
    ok(cli("policies", "update", "two", "--no-protection"))
    assert as_json(cli, "policies", "show", "two")["protection"] is False


def test_profiles_are_added_named_by_sessions_and_overridden(cli: Run) -> None:
    build_domain(cli)
    ok(
        cli(
            *("profiles", "add", "fast", "--delay-interval-ms", "100", "--liveness"),
            *("--down-after", "4", "--histogram-edge", "100", "--histogram-edge", "1000"),
        )
    )
    profile = as_json(cli, "profiles", "show", "fast")
    assert profile["liveness"] == {"enabled": True, "down_after": 4, "up_after": 1, "timeout_ms": 0}
    assert profile["histogram_edges_us"] == [100, 1000]

    ok(cli("sessions", "update", "s1", "--profile", "fast", "--delay-interval-ms", "200"))
    session = as_json(cli, "sessions", "show", "s1")
    assert (session["profile"], session["delay_interval_ms"]) == ("fast", 200)
    assert session["liveness"]["down_after"] == 4
    shown = ok(cli("sessions", "show", "s1")).stdout
    assert "down after 4 missed" in shown and "100 us, 1000 us" in shown
    assert "s1" in ok(cli("profiles", "list")).stdout

    refused = cli("profiles", "delete", "fast")
    assert refused.exit_code != 0
    assert "profile fast is used by session s1" in refused.output
    ok(cli("sessions", "update", "s1", "--profile", ""))
    assert "profile fast deleted" in ok(cli("profiles", "delete", "fast")).stdout
