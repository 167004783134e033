"""The real controller API (uvicorn, in a thread, on a free port, over a SQLite file in a temp
dir) for the CLI to talk to, and a CliRunner that drives `srv6pm` against it (the fixtures are in
conftest.py).

The controller is built with `reconcile=False`: no node manager is ever contacted, so objects stay
`pending` until a test plays the reconciler (`reconcile`), as the real one records its outcome.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from sqlalchemy import select
from srv6pm.cli.app import app
from srv6pm.controller.adapters.sql import store as sql
from srv6pm.controller.adapters.sql.store import Store
from srv6pm.controller.adapters.sql.tables import NodeRow
from srv6pm.controller.api.app import create_app
from srv6pm.controller.api.deps import Services
from srv6pm.controller.config import Settings
from srv6pm.controller.server import build
from typer.testing import CliRunner, Result

# No SRV6PM_* setting of the machine running the tests leaks into the CLI.
CLEAN_ENV: dict[str, str | None] = {
    "SRV6PM_URL": None,
    "SRV6PM_TOKEN": None,
    "SRV6PM_OUTPUT": None,
    "SRV6PM_TIMEOUT": None,
    "COLUMNS": None,
}


def closed_port() -> int:
    """A port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Controller:
    url: str
    token: str  # admin
    services: Services
    store: Store


@contextlib.contextmanager
def running_controller(workdir: Path, influx_url: str | None = None) -> Iterator[Controller]:
    workdir.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        database_url=f"sqlite:///{workdir / 'controller.db'}",
        influx_url=influx_url or f"http://127.0.0.1:{closed_port()}",
        influx_database="srv6pm",
    )
    services, db, influx = build(settings, reconcile=False)
    token = services.auth.create("admin", "admin", "tests")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(services), log_config=None, access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="controller-api", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the controller API did not start")
            time.sleep(0.02)
        port = sock.getsockname()[1]
        yield Controller(f"http://127.0.0.1:{port}", token, services, db)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        influx.close()
        db.close()


Run = Callable[..., Result]


def runner_for(c: Controller) -> Run:
    runner = CliRunner()

    def run(*args: str, token: str | None = "admin", env: dict[str, str] | None = None) -> Result:
        """`srv6pm --url <controller> [--token T] ARGS` ("admin": the admin token)."""
        given = ["--url", c.url]
        if token is not None:
            given += ["--token", c.token if token == "admin" else token]
        return runner.invoke(app, [*given, *args], env={**CLEAN_ENV, **(env or {})})

    return run


def ok(result: Result) -> Result:
    """The result, after checking the command succeeded (its output in the message if not)."""
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result


# A domain of three routers: r1 -> r2 -> r3 and back, one session measuring it.
NODES = {
    "r1": ("127.0.0.1:50061", "fc00:1::1"),
    "r2": ("127.0.0.1:50062", ""),
    "r3": ("127.0.0.1:50063", "fc00:3::1"),
}
SIDS = [
    ("fc00:1::d6", "r1", "End.DT6"),
    ("fc00:2::e", "r2", "End"),
    ("fc00:3::d6", "r3", "End.DT6"),
]
POLICIES = {
    "fwd": ("r1", "r3", ["fc00:2::e", "fc00:3::d6"], "fd00:3::/64"),
    "rev": ("r3", "r1", ["fc00:2::e", "fc00:1::d6"], "fd00:1::/64"),
}


def domain_commands() -> list[list[str]]:
    """The CLI commands that build the domain, in an order the controller accepts."""
    out = []
    for name, (endpoint, probe) in NODES.items():
        extra = ["--probe-address", probe] if probe else []
        out.append(["nodes", "add", name, "--endpoint", endpoint, *extra])
    for sid, node, behaviour in SIDS:
        out.append(["sids", "add", sid, "--node", node, "--behaviour", behaviour])
    for name, (head, tail, segments, prefix) in POLICIES.items():
        segs = [a for s in segments for a in ("--segment", s)]
        out.append(["policies", "add", name, "--head", head, "--tail", tail, *segs])
        out[-1] += ["--prefix", prefix]
    out.append(["sessions", "add", "s1", "--policy", "fwd", "--return-policy", "rev"])
    return out


def build_domain(run: Run) -> None:
    for args in domain_commands():
        ok(run(*args))


def reconcile(
    db: Store,
    error: str = "",
    reachable: bool = True,
    nodes: Sequence[str] | None = None,
) -> None:
    """Record what a reconciler pass records: every node (or `nodes`) took the newest revision,
    or, with `error`, failed with that message."""
    with db.write() as session:
        revision = sql.revision(session)
        for row in session.scalars(select(NodeRow)):
            if nodes is not None and row.name not in nodes:
                continue
            row.attempted_at = datetime.now(UTC)
            row.reachable = reachable
            row.apply_error = error
            if not error:
                row.applied_revision = revision


@contextlib.contextmanager
def reconciled_later(db: Store, delay_s: float = 0.8, **outcome: object) -> Iterator[None]:
    """A reconciler pass `delay_s` after entering (the command waits meanwhile)."""
    timer = threading.Timer(delay_s, reconcile, args=(db,), kwargs=outcome)
    timer.start()
    try:
        yield
    finally:
        timer.join()
