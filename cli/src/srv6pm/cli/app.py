"""The `srv6pm` command: global options, one sub-command per resource of the controller's API,
and every error mapped, here only, to a message on stderr and an exit status:

0 done; 1 the controller refused (its problem details printed) or a node failed a change;
2 usage error; 3 the controller could not be reached; 4 `--wait` ran out of time.
"""

from __future__ import annotations

from typing import Annotated, Any

import httpx
import typer
from typer.core import TyperGroup

from . import __version__
from .client import ApiError, Unreachable
from .commands import (
    admin,
    lab,
    liveness,
    nodes,
    pki,
    policies,
    policy_results,
    profiles,
    results,
    sessions,
    sids,
    thresholds,
)
from .common import CommandError, State, UsageProblem
from .render import Format, Output
from .waiting import WaitFailed, WaitTimedOut

DEFAULT_URL = "http://127.0.0.1:8080"
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_TIMED_OUT = 4


def _error(message: str) -> None:
    typer.echo(typer.style("error:", fg="red", bold=True) + " " + message, err=True)


def report(e: ApiError) -> None:
    """`error: <title>: <detail>`, then each invalid field on a line of its own."""
    _error(str(e))
    for found in e.errors:
        typer.echo(f"  {found.field}: {found.message}", err=True)
    if e.status == 401:
        typer.echo("  (pass --token or set SRV6PM_TOKEN)", err=True)


class Cli(TyperGroup):
    """The root command: what any sub-command raises for a known reason ends here, as a message
    and an exit status, never a traceback."""

    def invoke(self, ctx: Any) -> Any:  # typer's (vendored click) Context
        try:
            return super().invoke(ctx)
        except ApiError as e:
            report(e)
            raise typer.Exit(EXIT_FAILED) from None
        except Unreachable as e:
            _error(str(e))
            raise typer.Exit(EXIT_UNREACHABLE) from None
        except UsageProblem as e:
            _error(str(e))
            raise typer.Exit(EXIT_USAGE) from None
        except (WaitFailed, CommandError) as e:
            _error(str(e))
            raise typer.Exit(EXIT_FAILED) from None
        except WaitTimedOut as e:
            _error(str(e))
            raise typer.Exit(EXIT_TIMED_OUT) from None


app = typer.Typer(
    cls=Cli,
    name="srv6pm",
    help="srv6pm: SRv6 performance monitoring. Drives the controller's REST API "
    "(nodes, SIDs, policies, sessions, thresholds, results, tokens, audit), makes the mTLS "
    "certificates (pki) and drives the lab.",
    epilog="Exit status: 0 done, 1 refused or failed, 2 usage, 3 controller unreachable, "
    "4 --wait timed out. Every command: docs/CLI.md.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals hold the token
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"srv6pm {__version__}")
        raise typer.Exit()


def _url(value: str) -> str:
    try:
        parsed = httpx.URL(value)
    except httpx.InvalidURL as e:
        raise typer.BadParameter(f"{value!r}: {e}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise typer.BadParameter(f"{value!r} is not an http:// or https:// URL")
    return value


@app.callback()
def options(
    ctx: typer.Context,
    url: Annotated[
        str,
        typer.Option(envvar="SRV6PM_URL", callback=_url, help="The controller's REST API."),
    ] = DEFAULT_URL,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SRV6PM_TOKEN",
            show_default=False,
            help="An API token (srv6pm tokens create; srv6pm-controller token).",
        ),
    ] = None,
    output: Annotated[
        Format,
        typer.Option(
            "--output",
            "-o",
            envvar="SRV6PM_OUTPUT",
            case_sensitive=False,
            help="table: for people; json: the API's JSON, for scripts.",
        ),
    ] = Format.TABLE,
    timeout: Annotated[
        float,
        typer.Option(
            envvar="SRV6PM_TIMEOUT", min=0.1, metavar="SECONDS", help="Timeout of each request."
        ),
    ] = 10.0,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    state = State(url=url, token=token or None, timeout_s=timeout, out=Output(output))
    ctx.obj = state
    ctx.call_on_close(state.close)


app.add_typer(nodes.app, name="nodes")
app.add_typer(sids.app, name="sids")
app.add_typer(policies.app, name="policies")
app.add_typer(profiles.app, name="profiles")
app.add_typer(sessions.app, name="sessions")
app.add_typer(thresholds.app, name="thresholds")
results.app.command("policy")(policy_results.policy)
app.add_typer(results.app, name="results")
app.add_typer(liveness.app, name="liveness")
app.add_typer(admin.tokens, name="tokens")
app.command("audit")(admin.audit)
app.add_typer(pki.app, name="pki")
app.command("lab", context_settings=lab.CONTEXT, add_help_option=False)(lab.lab)


def main() -> None:
    """Entry point of the `srv6pm` console script."""
    app(prog_name="srv6pm")
