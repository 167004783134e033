"""Makes every node manager hold what the database says, and keeps it so.

Each pass: read the fleet, ask every node what it is (GetInfo: reachability, interfaces, period),
derive every node's NodeState, and for each node whose state changed since it last took one, or
whose drift check is due, ask the node what an ApplyState would change (a dry run, compared with
its data plane) and apply only then. So a controller restart, or a pass with nothing new, never
disturbs a running measurement: an unchanged state is not even sent for real. Failures back off
per node (0.5 s doubling to 30 s); the outcome of each node is stored with it.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from srv6pm.common.srv6 import MarkingMode

from ..adapters.nodes import NodeUnavailable
from ..adapters.sql import store
from ..adapters.sql.store import Store
from ..adapters.sql.tables import NodeRow
from ..domain.derive import node_states
from ..domain.model import Node, NodeInfo
from ..domain.state import NodeState, StateDiff

log = logging.getLogger(__name__)
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 30.0


class NodeManagers(Protocol):
    """The node managers as the reconciler drives them (adapters/nodes.NodeClients); each call
    raises NodeUnavailable when the node cannot be reached or refuses."""

    def info(self, node: str, endpoint: str) -> NodeInfo: ...
    def diff(self, node: str, endpoint: str, state: NodeState, timeout_s: float) -> StateDiff: ...
    def apply(self, node: str, endpoint: str, state: NodeState, timeout_s: float) -> StateDiff: ...
    def forget(self, keep: set[str]) -> None: ...


@dataclass
class Outcome:
    """What one pass learnt of one node."""

    info: NodeInfo | None = None
    reachable: bool = False
    applied: bool = False
    error: str = ""
    drift: bool = False


@dataclass
class _NodeTrack:
    taken: NodeState | None = None  # the state the node last took (or was found to hold)
    checked: float = 0.0  # monotonic time of the last dry run
    retry_at: float = 0.0
    backoff: float = 0.0


@dataclass
class Stats:
    passes: int = 0
    applies: int = 0
    drifts: int = 0
    failures: int = 0
    by_node: dict[str, str] = field(default_factory=dict)


class Reconciler:
    def __init__(
        self,
        db: Store,
        clients: NodeManagers,
        marking_mode: MarkingMode,
        resync_s: float,
        apply_timeout_s: float,
        workers: int = 16,
    ) -> None:
        self._store = db
        self._clients = clients
        self._marking = marking_mode
        self._resync = resync_s
        self._apply_timeout = apply_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._track: dict[str, _NodeTrack] = {}
        self.stats = Stats()

    def wake(self) -> None:
        """The desired state changed: run a pass now."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reconciler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.run_pass()
            except Exception:
                log.exception("reconcile pass failed")
            self._wake.wait(self._next_wait())

    def _next_wait(self) -> float:
        """Until the next node is due: its retry after a failure, else its drift check."""
        now = time.monotonic()
        due = [
            t.retry_at if t.retry_at > now else t.checked + self._resync
            for t in self._track.values()
        ]
        return max(0.05, min([*due, now + self._resync]) - now)

    def run_pass(self) -> None:
        """One pass over every node that is due."""
        with self._store.read() as db:
            fleet = store.fleet(db, self._marking)
            revision = store.revision(db)
        for gone in set(self._track) - set(fleet.nodes):
            del self._track[gone]
        self._clients.forget(set(fleet.nodes))
        now = time.monotonic()
        due = [
            n
            for n in fleet.nodes.values()
            if self._track.setdefault(n.name, _NodeTrack()).retry_at <= now
        ]
        infos = dict(zip(due, self._pool.map(self._info, due), strict=True))
        for node, outcome in infos.items():
            if outcome.info is not None:
                fleet.nodes[node.name] = replace(node, info=outcome.info)
        derived = node_states(fleet)
        futures = {
            node.name: self._pool.submit(
                self._converge,
                node,
                derived.states[node.name],
                derived.problems.get(node.name, ""),
                outcome,
            )
            for node, outcome in infos.items()
            if outcome.reachable
        }
        outcomes = {node.name: outcome for node, outcome in infos.items()}
        for name, future in futures.items():
            outcomes[name] = future.result()
        self._record(outcomes, revision)
        self.stats.passes += 1

    def _info(self, node: Node) -> Outcome:
        try:
            return Outcome(info=self._clients.info(node.name, node.endpoint), reachable=True)
        except NodeUnavailable as e:
            return Outcome(error=f"unreachable: {e}")

    def _converge(self, node: Node, state: NodeState, problem: str, outcome: Outcome) -> Outcome:
        if problem:
            outcome.error = problem
            return outcome
        track = self._track[node.name]
        now = time.monotonic()
        if state == track.taken and now - track.checked < self._resync:
            outcome.applied = True
            return outcome
        try:
            dry = self._clients.diff(node.name, node.endpoint, state, self._apply_timeout)
            track.checked = time.monotonic()
            if dry.changed:
                outcome.drift = state == track.taken
                self._clients.apply(node.name, node.endpoint, state, self._apply_timeout)
                self.stats.applies += 1
                log.info(
                    "node %s: applied%s (policies %s, flows %s, sessions %s)",
                    node.name,
                    " after drift" if outcome.drift else "",
                    dry.policies,
                    dry.flows,
                    dry.sessions,
                )
            track.taken = state
            outcome.applied = True
        except NodeUnavailable as e:
            outcome.error = str(e)
        return outcome

    def _record(self, outcomes: dict[str, Outcome], revision: int) -> None:
        now = datetime.now(UTC)
        with self._store.write() as db:
            for name, outcome in outcomes.items():
                track = self._track[name]
                if outcome.applied:
                    track.backoff, track.retry_at = 0.0, 0.0
                else:
                    track.backoff = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, track.backoff * 2))
                    track.retry_at = time.monotonic() + track.backoff
                    track.taken = None
                    self.stats.failures += 1
                    log.warning(
                        "node %s: %s (retry in %.1f s)", name, _short(outcome.error), track.backoff
                    )
                self.stats.drifts += outcome.drift
                self.stats.by_node[name] = "applied" if outcome.applied else "failed"
                row = db.get(NodeRow, name)
                if row is None:  # deleted during the pass
                    continue
                row.attempted_at = now
                row.reachable = outcome.reachable
                if outcome.info is not None:
                    row.info = _info_json(outcome.info)
                row.apply_error = _short(outcome.error)
                if outcome.applied and row.applied_revision != revision:
                    row.applied_revision = revision
                    row.applied_at = now


def _short(message: str, limit: int = 1000) -> str:
    """A node's refusal can name every object it holds: keep the start, say how much is cut."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]} ... ({len(message) - limit} more characters)"


def _info_json(info: NodeInfo) -> dict[str, object]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in info.__dict__.items()}
