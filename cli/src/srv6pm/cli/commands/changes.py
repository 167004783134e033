"""Create, update and delete the same way for every resource: show the result, `--wait` for the
nodes to take it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.console import RenderableType

from ..common import State
from ..waiting import deleted_at, removed, settled


def changed(
    st: State,
    body: dict[str, Any],
    where: str,
    what: str,
    wait: bool,
    timeout_s: float,
    render: Callable[[Any], Iterable[RenderableType]],
) -> None:
    """After a create or update: with `wait`, follow the object (`where`) until it is applied;
    then show it."""
    if wait:
        body = settled(lambda: st.api.get(where), what, timeout_s, st.out.err)
    st.out.show(body, render)


def deleted(st: State, where: str, kind: str, key: str, wait: bool, timeout_s: float) -> None:
    """Delete `where`; with `wait`, until the nodes it was on were reconciled since."""
    what = f"{kind} {key}"
    nodes: list[str] = []
    if wait:
        held = st.api.get(where)
        nodes = held["status"]["nodes"]
        key = held.get("name") or held.get("sid") or key  # as the API spells it (a SID)
    st.api.delete(where)
    if wait and nodes:
        since = deleted_at(st.api, kind, key)
        if since is not None:
            removed(st.api, nodes, since, what, timeout_s, st.out.err)
    st.out.done(f"{what} deleted")
