"""Bursts, computation intervals and delay thresholds on the node: the node's STAMP service (its
own sender and reflector on the loopback), a real journal, ReadResults and the Prometheus
metrics. Interval delay records add up to their block's; threshold events are journaled,
published as measurement records, read back and counted, and follow the hysteresis rules on
real delays."""

from __future__ import annotations

import itertools

import pytest
from prometheus_client import CollectorRegistry
from srv6pm.node_manager.adapters.journal import Journal, Kind
from srv6pm.node_manager.adapters.metrics import NodeCollector
from srv6pm.node_manager.api.servicer import NodeManagerServicer
from srv6pm.node_manager.domain.model import Reflector, Thresholds
from srv6pm.node_manager.domain.model import SenderSession as SenderSpec
from srv6pm.node_manager.service.results import ResultsService
from srv6pm.node_manager.service.stamp import StampService
from srv6pm.proto.v1 import node_manager_pb2 as nm
from srv6pm.proto.v1 import records_pb2 as pb
from test_liveness_results import PERIOD, NoCounters, Node, apply, free_udp_port, wait_for

MS = 1_000_000
INTERVAL = 100 * MS
BURST = 3


@pytest.fixture
def node(tmp_path):
    journal = Journal(tmp_path / "journal.db", 3600, 1 << 30)
    results = ResultsService(journal, "n1", PERIOD)
    stamp = StampService(
        lambda open_socket: open_socket(), NoCounters(), results, PERIOD, clock_synchronised=True
    )
    yield journal, results, stamp
    stamp.stop()
    journal.close()


def session(name: str, ssid: int, port: int, thresholds: Thresholds) -> SenderSpec:
    return SenderSpec(
        name,
        ssid,
        "::1",
        "",
        "",
        reflector_port=port,
        delay_interval_ms=20,
        policy="to-r3",
        segment_list="sl1",
        burst_size=BURST,
        computation_interval_ms=INTERVAL // MS,
        thresholds=thresholds,
    )


def test_intervals_and_first_threshold_events_are_journaled_read_back_and_counted(node, tmp_path):
    journal, results, stamp = node
    port = free_udp_port()
    # 1 s away: nothing crosses on the loopback, so each metric is reported once, as `first`
    spec = session(
        "s1",
        7,
        port,
        Thresholds(
            absolute_us=1_000_000, check_each_burst=True, metrics=("two_way_mean", "jitter")
        ),
    )
    registry = CollectorRegistry()
    registry.register(
        NodeCollector(
            journal,
            None,
            stamp.sender_stats,
            stamp.reflector_stats,
            dict,
            stamp.liveness,
            stamp.thresholds,
        )
    )
    apply(stamp, Reflector(True, "::1", port), (spec,))

    def complete_block() -> tuple[pb.DelayRecord, list[pb.DelayRecord]] | None:
        journal.flush()
        intervals = results.intervals("s1", 0)[0]
        for blk in results.delay("s1", 0)[0]:
            mine = [i for i in intervals if i.block == blk.block]
            if len(mine) == PERIOD // INTERVAL and blk.two_way.samples:
                return blk, mine
        return None

    blk, intervals = wait_for(complete_block, 20)
    # every interval of the block, in order, aligned on the clock, adding up to the block
    assert [i.interval_start_unix_ns for i in intervals] == [
        blk.block * PERIOD + k * INTERVAL for k in range(PERIOD // INTERVAL)
    ]
    assert all(i.interval_ns == INTERVAL and i.block_info == blk.block_info for i in intervals)
    assert blk.interval_ns == 0 and blk.interval_start_unix_ns == 0
    assert sum(i.probes_sent for i in intervals) == blk.probes_sent
    assert sum(i.two_way.samples for i in intervals) == blk.two_way.samples
    assert all(i.labels.segment_list == "sl1" for i in intervals)

    journal.flush()
    mean, jitter = results.thresholds("s1", 0)[0]
    # the mean is first reported on a burst (accelerated), the jitter at an interval's end
    assert (mean.metric, mean.first, mean.reference_ns, mean.accelerated) == (
        "two_way_mean",
        True,
        0,
        True,
    )
    assert (jitter.metric, jitter.first, jitter.accelerated) == ("jitter", True, False)
    assert jitter.at_unix_ns % INTERVAL == 0 and mean.value_ns > 0
    assert (mean.labels.policy, mean.labels.segment_list) == ("to-r3", "sl1")
    for metric in ("two_way_mean", "jitter"):
        labels = {"session": "s1", "policy": "to-r3", "segment_list": "sl1", "metric": metric}
        assert registry.get_sample_value("srv6pm_stamp_threshold_events_total", labels) == 1

    # published as measurement records, in the block of their time
    journaled = [pb.MeasurementRecord.FromString(r) for _, _, r in journal.undelivered(0, 10**5)]
    assert [m.threshold for m in journaled if m.WhichOneof("record") == "threshold"] == [
        mean,
        jitter,
    ]
    assert any(m.delay.interval_ns == INTERVAL for m in journaled)
    assert journal.last_block(Kind.THRESHOLD, "s1") == jitter.at_unix_ns // PERIOD

    # ReadResults: `delay` per block only, intervals and threshold events in their own lists
    servicer = NodeManagerServicer("n1", Node(results, stamp), tmp_path / "desired.pb")
    read = servicer.ReadResults(nm.ReadResultsRequest(session="s1"), None)
    assert read.delay and all(d.interval_ns == 0 for d in read.delay)
    assert all(i.interval_ns == INTERVAL for i in read.intervals)
    assert list(read.thresholds[:2]) == [mean, jitter]


def test_on_real_delays_an_event_is_a_move_beyond_the_threshold_from_the_last_report(node):
    journal, results, stamp = node
    port = free_udp_port()
    # 1 µs: the loopback's own variation crosses it often, but at most once per 200 ms
    spec = session(
        "s2", 8, port, Thresholds(absolute_us=1, min_report_interval_ms=200, check_each_burst=True)
    )
    apply(stamp, Reflector(True, "::1", port), (spec,))

    def some_events() -> list[pb.ThresholdEvent]:
        journal.flush()
        found = results.thresholds("s2", 0)[0]
        return found if len(found) >= 3 else []

    events = wait_for(some_events, 20)
    assert events[0].first and not any(e.first for e in events[1:])
    for before, after in itertools.pairwise(events):
        assert after.reference_ns == before.value_ns  # the reference is the last report
        assert abs(after.value_ns - after.reference_ns) > 1_000
        assert after.at_unix_ns - before.at_unix_ns >= 200 * MS
    assert {e.metric for e in events} == {"two_way_mean"}
