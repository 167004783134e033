"""A session's liveness and delay histograms on the node: the node's STAMP service (its own
sender and reflector on the loopback), a real journal, ReadResults and the Prometheus metrics.
The reflector is taken away and given back: DOWN then UP, each a LivenessEvent journaled, read
back, counted, and told to the listener on the STAMP loop thread."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry
from srv6pm.node_manager.adapters.journal import Journal, Kind
from srv6pm.node_manager.adapters.metrics import NodeCollector
from srv6pm.node_manager.api.servicer import NodeManagerServicer
from srv6pm.node_manager.domain.model import Liveness, Reflector
from srv6pm.node_manager.domain.model import SenderSession as SenderSpec
from srv6pm.node_manager.service.results import ResultsService
from srv6pm.node_manager.service.stamp import StampService
from srv6pm.proto.v1 import node_manager_pb2 as nm
from srv6pm.proto.v1 import records_pb2 as pb

S = 1_000_000_000
PERIOD = S  # 1 s blocks: a delay record soon
EDGES_US = (100, 1_000, 50_000)


class NoCounters:
    def block_packets(self, flow: str, block: int) -> int | None:
        return None


class Node:
    """What the servicer's ReadResults reads: the results and the STAMP service."""

    def __init__(self, results: ResultsService, stamp: StampService) -> None:
        self.results = results
        self.stamp = stamp

    def kernel_reflector_stats(self) -> dict[str, int]:
        return {}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        sock.bind(("::1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.fixture
def node(tmp_path):
    journal = Journal(tmp_path / "journal.db", 3600, 1 << 30)
    results = ResultsService(journal, "n1", PERIOD)
    told: list[tuple[str, bool, str]] = []

    def listener(spec: SenderSpec, up: bool) -> None:
        # journaled before the listener hears of it
        journal.flush()
        events = results.liveness(spec.name, 0)[0]
        assert events and events[-1].state == (
            pb.LIVENESS_STATE_UP if up else pb.LIVENESS_STATE_DOWN
        )
        told.append((spec.name, up, threading.current_thread().name))

    stamp = StampService(
        lambda open_socket: open_socket(),
        NoCounters(),
        results,
        PERIOD,
        clock_synchronised=True,
        liveness_listener=listener,
    )
    yield journal, results, stamp, told
    stamp.stop()
    journal.close()


def apply(stamp: StampService, reflector: Reflector, sessions: tuple[SenderSpec, ...]) -> None:
    stamp.commit(stamp.prepare(reflector, sessions))


def events(results: ResultsService, journal: Journal, n: int) -> list[pb.LivenessEvent]:
    journal.flush()
    found = results.liveness("s1", 0)[0]
    return found if len(found) >= n else []


def test_liveness_events_are_journaled_read_back_counted_and_told(node, tmp_path):
    journal, results, stamp, told = node
    port = free_udp_port()
    reflector = Reflector(True, "::1", port)
    session = SenderSpec(
        "s1",
        7,
        "::1",
        "",
        "",
        reflector_port=port,
        delay_interval_ms=20,
        policy="to-r3",
        segment_list="sl1",
        liveness=Liveness(enabled=True, down_after=3, up_after=2),
        histogram_edges_us=EDGES_US,
    )
    registry = CollectorRegistry()
    registry.register(
        NodeCollector(
            journal, None, stamp.sender_stats, stamp.reflector_stats, dict, stamp.liveness
        )
    )
    labels = {"session": "s1", "policy": "to-r3", "segment_list": "sl1"}

    apply(stamp, reflector, (session,))
    wait_for(lambda: events(results, journal, 1))
    assert registry.get_sample_value("srv6pm_stamp_liveness_up", labels) == 1
    apply(stamp, replace(reflector, enabled=False), (session,))  # no one answers any more
    wait_for(lambda: events(results, journal, 2))
    assert registry.get_sample_value("srv6pm_stamp_liveness_up", labels) == 0
    apply(stamp, reflector, (session,))  # the sender kept running: same session
    up, down, up_again = wait_for(lambda: events(results, journal, 3))

    assert [(e.state, e.previous, e.consecutive) for e in (up, down, up_again)] == [
        (pb.LIVENESS_STATE_UP, pb.LIVENESS_STATE_UNSPECIFIED, 2),
        (pb.LIVENESS_STATE_DOWN, pb.LIVENESS_STATE_UP, 3),
        (pb.LIVENESS_STATE_UP, pb.LIVENESS_STATE_DOWN, 2),
    ]
    assert up.at_unix_ns < down.at_unix_ns < up_again.at_unix_ns
    assert (down.labels.session, down.labels.policy, down.labels.segment_list) == (
        "s1",
        "to-r3",
        "sl1",
    )
    assert registry.get_sample_value("srv6pm_stamp_liveness_up", labels) == 1
    assert registry.get_sample_value("srv6pm_stamp_liveness_changes_total", labels) == 3
    wait_for(lambda: len(told) == 3)  # the listener runs after the journal's commit it waits for
    assert told == [("s1", True, "stamp"), ("s1", False, "stamp"), ("s1", True, "stamp")]

    # in the journal as measurement records (what Kafka carries), in the block of their probe
    rows = journal.undelivered(0, 1000)
    journaled = [pb.MeasurementRecord.FromString(r) for _, _, r in rows]
    liveness = [m for m in journaled if m.WhichOneof("record") == "liveness"]
    assert [m.liveness for m in liveness] == [up, down, up_again]
    assert all(m.node == "n1" for m in liveness)
    assert journal.last_block(Kind.LIVENESS, "s1") == up_again.at_unix_ns // PERIOD

    # ReadResults: the session's events, from a block on
    servicer = NodeManagerServicer("n1", Node(results, stamp), tmp_path / "desired.pb")
    read = servicer.ReadResults(nm.ReadResultsRequest(session="s1"), None)
    assert list(read.liveness) == [up, down, up_again]
    block = up_again.at_unix_ns // PERIOD
    since = servicer.ReadResults(nm.ReadResultsRequest(session="s1", since_block=block), None)
    assert list(since.liveness) == [e for e in read.liveness if e.at_unix_ns // PERIOD >= block]

    # delay records carry the histogram of their replies over the session's edges (ns)
    delay = wait_for(lambda: [d for d in results.delay("s1", 0)[0] if d.two_way.samples])
    record = delay[0]
    assert list(record.histogram_edges_ns) == [e * 1000 for e in EDGES_US]
    assert len(record.two_way.histogram) == len(EDGES_US) + 1
    assert sum(record.two_way.histogram) == record.two_way.samples
    assert sum(record.forward.histogram) == record.forward.samples


def test_a_session_without_liveness_has_no_state_and_no_metric(node):
    journal, results, stamp, told = node
    port = free_udp_port()
    session = SenderSpec("s2", 8, "::1", "", "", reflector_port=port, delay_interval_ms=20)
    apply(stamp, Reflector(True, "::1", port), (session,))
    wait_for(lambda: stamp.sender_stats().received >= 3)
    registry = CollectorRegistry()
    registry.register(
        NodeCollector(
            journal, None, stamp.sender_stats, stamp.reflector_stats, dict, stamp.liveness
        )
    )
    assert (
        registry.get_sample_value(
            "srv6pm_stamp_liveness_up", {"session": "s2", "policy": "s2", "segment_list": ""}
        )
        is None
    )
    journal.flush()
    assert results.liveness("", 0) == ([], False) and told == []
