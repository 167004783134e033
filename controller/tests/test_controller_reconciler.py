"""service/reconciler.py over a node-manager client that records what it is asked (domain values
in, domain values out): each node gets a dry run and, only when it reports a change, its state;
an unchanged state is not sent again before its drift check; failures are recorded and backed
off. SQLite only: the store is not what is tested here."""

from __future__ import annotations

from dataclasses import replace

import pytest
from controller_fleet import NODE_INFO, S1, S2, add_lab
from srv6pm.common.srv6 import MarkingMode
from srv6pm.controller.adapters.nodes import NodeUnavailable
from srv6pm.controller.adapters.sql import store as sql
from srv6pm.controller.adapters.sql.store import Store
from srv6pm.controller.adapters.sql.tables import NodeRow
from srv6pm.controller.domain.derive import node_states
from srv6pm.controller.domain.model import NodeInfo
from srv6pm.controller.domain.state import Changes, NodeState, StateDiff
from srv6pm.controller.service.reconciler import Reconciler

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

INFO = NodeInfo(
    NODE_INFO["driver"], NODE_INFO["version"], NODE_INFO["period_ns"], ("lo", "eth0", "eth1")
)
CHANGED = StateDiff(flows=Changes(added=2))


class Nodes:
    """A node-manager client: every node answers GetInfo with INFO and its dry runs with
    ``reply``; ``down`` nodes are unreachable."""

    def __init__(self) -> None:
        self.reply = CHANGED
        self.down: set[str] = set()
        self.calls: list[tuple[str, str, NodeState]] = []

    def info(self, node: str, endpoint: str) -> NodeInfo:
        if node in self.down:
            raise NodeUnavailable("UNAVAILABLE: connection refused")
        return INFO

    def diff(self, node: str, endpoint: str, state: NodeState, timeout_s: float) -> StateDiff:
        self.calls.append(("diff", node, state))
        return self.reply

    def apply(self, node: str, endpoint: str, state: NodeState, timeout_s: float) -> StateDiff:
        self.calls.append(("apply", node, state))
        return self.reply

    def forget(self, keep: set[str]) -> None:
        pass

    def sent(self) -> list[tuple[str, str]]:
        done = [(kind, node) for kind, node, _ in self.calls]
        self.calls.clear()
        return sorted(done)


@pytest.fixture
def nodes() -> Nodes:
    return Nodes()


def reconciler(store: Store, nodes: Nodes, resync_s: float = 3600) -> Reconciler:
    return Reconciler(store, nodes, MarkingMode.ALTMARK, resync_s, 5.0, workers=2)


def rows(store: Store) -> dict[str, NodeRow]:
    with store.read() as db:
        return {row.name: row for row in db.query(NodeRow)}


def test_each_node_gets_its_derived_state_after_a_dry_run(admin, store, nodes):
    add_lab(admin, (S1, S2))
    subject = reconciler(store, nodes)
    subject.run_pass()
    for node in ("r1", "r2", "r3"):
        assert [kind for kind, n, _ in nodes.calls if n == node] == ["diff", "apply"]
    calls = {(kind, node): state for kind, node, state in nodes.calls}
    with store.read() as db:
        fleet = sql.fleet(db, MarkingMode.ALTMARK)
    fleet.nodes.update({n: replace(node, info=INFO) for n, node in fleet.nodes.items()})
    expected = node_states(fleet).states
    for (kind, node), state in calls.items():
        assert state == expected[node], (kind, node)
    assert subject.stats.applies == 3
    assert {row.reachable for row in rows(store).values()} == {True}
    assert {row.apply_error for row in rows(store).values()} == {""}


def test_an_unchanged_state_is_not_sent_again_until_its_drift_check(admin, store, nodes):
    add_lab(admin, (S1,))
    subject = reconciler(store, nodes)
    subject.run_pass()
    nodes.calls.clear()
    subject.run_pass()
    assert nodes.sent() == []
    admin.create("sessions", S2)  # a new state for r1 and r3 (r2's flows are unchanged)
    subject.run_pass()
    assert ("diff", "r1") in nodes.sent()


def test_a_dry_run_reporting_nothing_applies_nothing(admin, store, nodes):
    add_lab(admin, (S1,))
    nodes.reply = StateDiff(flows=Changes(unchanged=2))
    subject = reconciler(store, nodes)
    subject.run_pass()
    assert nodes.sent() == [("diff", n) for n in ("r1", "r2", "r3")]
    assert subject.stats.applies == 0
    assert {row.applied_revision > 0 for row in rows(store).values()} == {True}


def test_drift_of_a_state_a_node_had_taken_is_repaired_and_counted(admin, store, nodes):
    add_lab(admin, (S1,))
    subject = reconciler(store, nodes, resync_s=0)  # every pass is a drift check
    subject.run_pass()
    subject.run_pass()
    assert subject.stats.drifts == 3
    assert subject.stats.applies == 6


def test_an_unreachable_node_is_recorded_and_backed_off(admin, store, nodes):
    add_lab(admin, (S1,))
    nodes.down = {"r2"}
    subject = reconciler(store, nodes)
    subject.run_pass()
    assert ("diff", "r2") not in nodes.sent()
    r2 = rows(store)["r2"]
    assert (r2.reachable, r2.apply_error) == (False, "unreachable: UNAVAILABLE: connection refused")
    assert subject.stats.by_node == {"r1": "applied", "r2": "failed", "r3": "applied"}
    nodes.down.clear()
    subject.run_pass()  # r2 is backing off: not retried yet
    assert nodes.sent() == []
