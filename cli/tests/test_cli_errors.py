"""How `srv6pm` fails: the controller's problem details on stderr (`error: <title>: <detail>`, one
line per invalid field) with status 1, usage errors 2, an unreachable controller 3 with its URL;
never a traceback."""

from __future__ import annotations

import socket

from cli_harness import CLEAN_ENV, Controller, Run, build_domain, closed_port, ok
from srv6pm.cli.app import app
from typer.testing import CliRunner, Result


def flat(text: str) -> str:
    """Text without the frame and line breaks of Typer's usage error panel."""
    return " ".join(text.replace("│", " ").split())


def no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_delete_of_what_is_in_use_is_refused_with_the_reason(cli: Run) -> None:
    build_domain(cli)
    for args, detail in [
        (["nodes", "delete", "r2"], "node r2 is used by local SID fc00:2::e: delete or change it"),
        (["sids", "delete", "fc00:3::d6"], "local-sid fc00:3::d6 is used by policy fwd"),
        (["policies", "delete", "rev"], "policy rev is used by session s1 (return)"),
    ]:
        result = cli(*args)
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(f"error: Conflict: {detail}"), result.stderr
        assert result.stdout == ""
        no_traceback(result)
    assert "r2" in ok(cli("nodes", "show", "r2")).stdout  # still there


def test_invalid_fields_are_printed_one_per_line(cli: Run) -> None:
    result = cli("nodes", "add", "bad!", "--endpoint", "nope", "--probe-address", "zz")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: Invalid request: body.name: String should match pattern")
    assert lines[1].startswith("  name: String should match pattern")
    assert lines[2].startswith("  endpoint: String should match pattern")
    assert lines[3] == "  probe_address: Input is not a valid IPv6 address"
    no_traceback(result)


def test_domain_rules_come_back_as_the_controllers_detail(cli: Run) -> None:
    build_domain(cli)
    result = cli(
        "policies",
        "add",
        "p3",
        "--head",
        "r1",
        "--tail",
        "r3",
        "--segment",
        "fc00:9::1",
        "--prefix",
        "fd00:9::/64",
    )
    assert result.exit_code == 1
    assert "error: Invalid desired state: SIDs fc00:9::1 are not local SIDs of any node" in (
        result.stderr
    )
    behaviour = cli("sids", "add", "fc00:9::1", "--node", "r1", "--behaviour", "End.Y")
    assert behaviour.exit_code == 1
    assert "  behaviour: Input should be 'End', 'End.X'" in behaviour.stderr


def test_not_found(cli: Run) -> None:
    result = cli("sessions", "show", "nope")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: Not found: session nope does not exist\n",
    )


def test_without_a_token_the_cli_says_how_to_give_one(cli: Run) -> None:
    result = cli("nodes", "list", token=None)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: Unauthorized: an API token is needed: Authorization: Bearer <token>",
        "  (pass --token or set SRV6PM_TOKEN)",
    ]
    wrong = cli("nodes", "list", token="s6pm_not-a-token")
    assert (wrong.exit_code, wrong.stderr.splitlines()[0]) == (
        1,
        "error: Unauthorized: unknown API token",
    )


def test_unreachable_controller_is_status_3_with_its_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = CliRunner().invoke(app, ["--url", url, "nodes", "list"], env=CLEAN_ENV)
    assert result.exit_code == 3
    assert result.stderr.startswith(f"error: cannot reach the controller at {url}: ")
    no_traceback(result)


def test_a_slow_controller_is_status_3_too(controller: Controller) -> None:
    # a listening socket that never accepts: the request times out
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        result = CliRunner().invoke(
            app, ["--url", url, "--timeout", "0.3", "nodes", "list"], env=CLEAN_ENV
        )
    assert result.exit_code == 3
    assert f"cannot reach the controller at {url}: no answer within 0.3 s" in result.stderr


def test_usage_errors_are_status_2(cli: Run) -> None:
    missing = cli("sessions", "add", "s9", "--policy", "fwd")
    assert missing.exit_code == 2 and "Missing option '--return-policy'" in flat(missing.stderr)
    bad_url = CliRunner().invoke(app, ["--url", "ftp://x", "nodes", "list"], env=CLEAN_ENV)
    assert bad_url.exit_code == 2
    assert "'ftp://x' is not an http:// or https:// URL" in flat(bad_url.stderr)
    bad_output = cli("--output", "yaml", "nodes", "list")
    assert bad_output.exit_code == 2
    bad_since = cli("results", "loss", "s1", "--since", "yesterday")
    assert bad_since.exit_code == 2
    assert "'yesterday' is neither a duration (30s, 15m, 1h, 2d, 1w)" in flat(bad_since.stderr)
    no_traceback(bad_since)


def test_watch_of_an_unknown_session_ends_at_once(cli: Run) -> None:
    result = cli("results", "watch", "nope", "--count", "3")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: Not found: session nope does not exist\n",
    )


def test_results_without_influxdb_say_why(cli: Run) -> None:
    build_domain(cli)
    result = cli("results", "loss", "s1")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: Results unavailable: InfluxDB http://127.0.0.1:")
    no_traceback(result)
