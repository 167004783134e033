"""`--wait`: follow a change until the nodes took it, with a spinner on stderr.

An object's `status` (nodes, local SIDs, policies, sessions) is `applied` once every node it
touches took a state at least as new as the object's revision, and `failed` when one of them
could not (the message says which and why); the reconciler retries failed nodes, but a script
waiting for a change wants to know now. A deleted object has no status left: its nodes count as
done once the reconciler tried them after the deletion (the audit log's time) and reached them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .client import Api, ApiError, path

POLL_S = 0.5


class WaitFailed(Exception):
    """A node could not take the change (exit 1)."""


class WaitTimedOut(Exception):
    """The change was still pending when --wait-timeout ran out (exit 4)."""


def _progress(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def settled(
    fetch: Callable[[], dict[str, Any]],
    what: str,
    timeout_s: float,
    console: Console,
    poll_s: float = POLL_S,
) -> dict[str, Any]:
    """Poll `fetch` (the object's GET) until its status is applied, and return the object."""
    deadline = time.monotonic() + timeout_s
    with _progress(console) as progress:
        task = progress.add_task(f"{what}: waiting", total=None)
        while True:
            body = fetch()
            status = body["status"]
            if status["state"] == "applied":
                return body
            if status["state"] == "failed":
                raise WaitFailed(f"{what} failed: {status.get('message') or 'no message'}")
            where = f"{status['state']} on {', '.join(status['nodes'])}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimedOut(
                    f"{what}: still {where} after {timeout_s:g} s (revision {status['revision']})"
                )
            progress.update(task, description=f"{what}: {where} (revision {status['revision']})")
            time.sleep(min(poll_s, left))


def instant(value: str) -> datetime:
    """An API timestamp as an aware datetime (SQLite hands back naive UTC ones)."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def deleted_at(api: Api, kind: str, name: str) -> datetime | None:
    """When the audit log recorded the deletion of `kind` `name` (None: not recorded)."""
    page = api.get("/v1/audit", kind=kind, name=name, limit=1)
    for entry in page["items"]:
        if entry["action"] == "delete":
            return instant(entry["at"])
    return None


def removed(
    api: Api,
    nodes: list[str],
    since: datetime,
    what: str,
    timeout_s: float,
    console: Console,
    poll_s: float = POLL_S,
) -> None:
    """Poll the nodes that held a deleted object until each was reconciled after `since`
    (or is gone itself); WaitFailed when one was unreachable then."""
    deadline = time.monotonic() + timeout_s
    pending = list(dict.fromkeys(nodes))
    with _progress(console) as progress:
        task = progress.add_task(f"{what}: waiting", total=None)
        while pending:
            for name in list(pending):
                try:
                    node = api.get(path("v1", "nodes", name))
                except ApiError as e:
                    if e.status != 404:
                        raise
                    pending.remove(name)  # the node went too: nothing left to apply on it
                    continue
                attempted = node.get("last_attempt")
                if attempted and instant(attempted) > since:
                    if node.get("reachable") is False:
                        message = node["status"].get("message") or "unreachable"
                        raise WaitFailed(f"{what}: node {name} was not reconciled: {message}")
                    pending.remove(name)
            if not pending:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimedOut(
                    f"{what}: {', '.join(pending)} not reconciled since the deletion after "
                    f"{timeout_s:g} s"
                )
            progress.update(task, description=f"{what}: removing from {', '.join(pending)}")
            time.sleep(min(poll_s, left))
