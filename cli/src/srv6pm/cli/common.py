"""What every command shares: the global options' state, and the options several commands take."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import typer

from .client import Api
from .render import Output


class CommandError(Exception):
    """A command cannot do what was asked, for a reason the message gives (exit 1)."""


class UsageProblem(CommandError):
    """The options make no sense together (exit 2, as for any usage error)."""


@dataclass
class State:
    """The global options of one invocation; the API client is made on first use (so `--help`
    and `srv6pm lab` never need a controller)."""

    url: str
    token: str | None
    timeout_s: float
    out: Output
    _api: Api | None = field(default=None, repr=False)

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(self.url, self.token, self.timeout_s)
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()


def state(ctx: typer.Context) -> State:
    found = ctx.find_object(State)
    if found is None:  # only when a command is invoked without the root application
        raise RuntimeError("srv6pm: no global state; run commands through srv6pm.cli.app")
    return found


Limit = Annotated[int, typer.Option(min=1, max=1000, help="Items per page.")]
Offset = Annotated[int, typer.Option(min=0, help="Items to skip (the next page's offset).")]
Wait = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="Wait until the nodes took the change (status applied); exit 1 if a node failed.",
    ),
]
WaitTimeout = Annotated[
    float,
    typer.Option(min=0.1, metavar="SECONDS", help="How long --wait waits (exit 4 after)."),
]
