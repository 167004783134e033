"""`srv6pm policies` with weighted segment lists, `srv6pm profiles` (bursts, computation
intervals, delay thresholds, delay only included), and sessions over a whole policy, one segment
list or a profile, against the real controller API."""

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


def test_bursts_intervals_thresholds_and_delay_only_from_a_profile_and_a_session(cli: Run) -> None:
    build_domain(cli)
    ok(
        cli(
            *("profiles", "add", "tuned", "--delay-interval-ms", "100", "--burst-size", "5"),
            *("--computation-interval-ms", "1000", "--threshold-percent", "20"),
            *("--threshold-us", "500", "--threshold-each-burst", "--threshold-min-report-ms"),
            *("5000", "--threshold-metric", "two_way_p99", "--threshold-metric", "jitter"),
            "--delay-only",
        )
    )
    profile = as_json(cli, "profiles", "show", "tuned")
    assert (profile["burst_size"], profile["computation_interval_ms"], profile["loss"]) == (
        5,
        1000,
        False,
    )
    assert profile["thresholds"] == {
        "percent": 20.0,
        "absolute_us": 500,
        "check_each_burst": True,
        "min_report_interval_ms": 5000,
        "metrics": ["two_way_p99", "jitter"],
    }
    shown = ok(cli("profiles", "show", "tuned")).stdout
    assert "two_way_p99, jitter: a move of more than 20 % or 500 us" in shown
    assert "each burst too, at most one per 5000 ms" in shown and "delay only" in shown
    assert "tuned" in ok(cli("profiles", "list")).stdout

    # the session's own values win; thresholds are replaced as a whole
    ok(cli("sessions", "update", "s1", "--profile", "tuned", "--burst-size", "10", "--loss"))
    ok(cli("sessions", "update", "s1", "--threshold-us", "300"))
    session = as_json(cli, "sessions", "show", "s1")
    assert (session["burst_size"], session["loss"]) == (10, True)
    assert session["thresholds"]["absolute_us"] == 300
    assert session["thresholds"]["metrics"] == []
    shown = ok(cli("sessions", "show", "s1")).stdout
    assert "two_way_mean: a move of more than 300 us" in shown and "loss and delay" in shown

    # --clear gives a setting back to the profile
    ok(cli("sessions", "update", "s1", "--clear", "burst_size", "--clear", "thresholds"))
    session = as_json(cli, "sessions", "show", "s1")
    assert (session["burst_size"], session["thresholds"]) == (5, profile["thresholds"])
    assert session["loss"] is True  # still its own

    ok(cli("profiles", "update", "tuned", "--computation-interval-ms", "500"))
    assert as_json(cli, "sessions", "show", "s1")["computation_interval_ms"] == 500


def test_measurement_options_the_controller_or_the_cli_refuse_say_why(cli: Run) -> None:
    build_domain(cli)
    refused = cli("profiles", "add", "p", "--computation-interval-ms", "1000")
    assert refused.exit_code == 1
    assert "a computation interval needs a delay interval" in refused.output
    refused = cli("profiles", "add", "p", "--burst-size", "101")
    assert refused.exit_code == 1 and "burst_size" in refused.output
    refused = cli("sessions", "update", "s1", "--threshold-metric", "jitter")
    assert refused.exit_code == 1 and "give percent or absolute_us" in refused.output
    refused = cli("sessions", "update", "s1", "--clear", "ssid")
    assert refused.exit_code == 2 and "--clear ssid: expected one of" in refused.output
    refused = cli("sessions", "update", "s1", "--burst-size", "2", "--clear", "burst_size")
    assert refused.exit_code == 2 and "burst_size: given and cleared at once" in refused.output
