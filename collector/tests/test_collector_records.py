"""Segment lists, delay histograms, liveness and threshold events and computation intervals
through the real collector: records
produced to a real Kafka, points read back from a real InfluxDB (srv6pm.lab.pipeline), each
record delivered twice as a re-send after a crash would; bad ones go to the dead-letter topic."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from srv6pm.lab.pipeline import DLQ_TOPIC, TOPIC, ResultsPipeline
from srv6pm.proto.v1 import records_pb2 as pb

pytestmark = pytest.mark.slow
PERIOD = 10_000_000_000
BASE = time.time_ns() // PERIOD - 100  # recent: InfluxDB refuses points beyond its retention
EDGES = [100_000, 500_000, 2_000_000]  # ns


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResultsPipeline]:
    with ResultsPipeline(tmp_path_factory.mktemp("collector-records")) as running:
        yield running


def produce(pipeline: ResultsPipeline, records: list[pb.MeasurementRecord]) -> None:
    producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap, "linger.ms": 20})
    for record in records:
        kind = record.WhichOneof("record")
        session = getattr(record, kind).session
        producer.produce(TOPIC, key=f"{record.node}/{session}", value=record.SerializeToString())
    assert producer.flush(30) == 0


def rows(pipeline: ResultsPipeline, query: str) -> list[dict[str, Any]]:
    out = []
    for series in pipeline.query(query):
        for values in series["values"]:
            point = dict(zip(series["columns"], values, strict=True))
            out.append({**series.get("tags", {}), **point})
    return out


def wait_rows(pipeline: ResultsPipeline, query: str, n: int, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(found := rows(pipeline, query)) < n and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def labels(session: str, segment_list: str) -> pb.SessionLabels:
    return pb.SessionLabels(
        session=session, policy="to-r3", reflector_node="r3", segment_list=segment_list
    )


def info(block: int) -> pb.Block:
    return pb.Block(index=block, start_unix_ns=block * PERIOD, period_ns=PERIOD)


def loss(session: str, segment_list: str, block: int, tx: int, rx: int) -> pb.MeasurementRecord:
    def direction(tx: int, rx: int) -> pb.DirectionLoss:
        return pb.DirectionLoss(tx=tx, rx=rx, lost=tx - rx, loss_ratio=(tx - rx) / tx)

    return pb.MeasurementRecord(
        node="r1",
        journal_id=block,
        loss=pb.LossRecord(
            session=session,
            block=block,
            forward=direction(tx, rx),
            reverse=direction(tx, tx),
            valid=True,
            block_info=info(block),
            labels=labels(session, segment_list),
        ),
    )


def delay(session: str, segment_list: str, block: int, bins: list[int]) -> pb.MeasurementRecord:
    def stats(counts: list[int]) -> pb.DelayStats:
        return pb.DelayStats(samples=sum(counts), min_ns=50_000, max_ns=3_000_000, histogram=counts)

    return pb.MeasurementRecord(
        node="r1",
        delay=pb.DelayRecord(
            session=session,
            block=block,
            probes_sent=sum(bins),
            two_way=stats(bins),
            forward=stats(bins[::-1]),
            reverse=stats([sum(bins), 0, 0, 0]),
            block_info=info(block),
            labels=labels(session, segment_list),
            histogram_edges_ns=EDGES,
        ),
    )


def liveness(
    session: str, segment_list: str, at_ns: int, state: int, previous: int, consecutive: int
) -> pb.MeasurementRecord:
    return pb.MeasurementRecord(
        node="r1",
        liveness=pb.LivenessEvent(
            session=session,
            state=state,
            previous=previous,
            at_unix_ns=at_ns,
            consecutive=consecutive,
            labels=labels(session, segment_list),
        ),
    )


def test_each_segment_list_is_its_own_series_and_the_only_one_keeps_the_old_series(pipeline):
    records = [loss("s-sl0", "sl0", BASE, 100, 97), loss("s-sl1", "sl1", BASE, 50, 50)]
    records.append(loss("s-only", "", BASE, 10, 9))
    produce(pipeline, records + records)
    query = f"SELECT tx, rx, lost FROM loss WHERE block = {BASE} GROUP BY segment_list, session"
    wait_rows(pipeline, query, 6)
    time.sleep(2)  # the duplicates are in: they overwrote, added nothing
    found = rows(pipeline, f"{query}, direction")
    assert len(found) == 6
    lost = {
        (r["segment_list"], r["session"], r["direction"]): (r["tx"], r["rx"], r["lost"])
        for r in found
    }
    assert lost == {
        ("sl0", "s-sl0", "forward"): (100, 97, 3),
        ("sl0", "s-sl0", "reverse"): (100, 100, 0),
        ("sl1", "s-sl1", "forward"): (50, 50, 0),
        ("sl1", "s-sl1", "reverse"): (50, 50, 0),
        ("", "s-only", "forward"): (10, 9, 1),
        ("", "s-only", "reverse"): (10, 10, 0),
    }
    # the only segment list has no tag: its series key is the one it had before segment lists
    keys = rows(pipeline, "SHOW SERIES FROM loss WHERE \"session\" = 's-only'")
    assert sorted(k["key"] for k in keys) == [
        f"loss,direction={d},dst_node=r3,policy=to-r3,session=s-only,src_node=r1"
        for d in ("forward", "reverse")
    ]
    # a policy's total over its segment lists, per block
    total = rows(
        pipeline,
        f"SELECT sum(tx) AS tx, sum(rx) AS rx FROM loss WHERE \"policy\" = 'to-r3' "
        f"AND block = {BASE} AND session =~ /^s-sl/ GROUP BY direction",
    )
    assert {(r["direction"], r["tx"], r["rx"]) for r in total} == {
        ("forward", 150, 147),
        ("reverse", 150, 150),
    }


def test_histogram_bins_reach_influxdb_with_their_exact_counts(pipeline):
    blocks = {BASE + 1: [4, 3, 2, 1], BASE + 2: [0, 7, 0, 1]}
    records = [delay("h-sl1", "sl1", block, bins) for block, bins in blocks.items()]
    produce(pipeline, records + records)
    query = (
        "SELECT block, samples, /^hist_lt_/ FROM delay WHERE session = 'h-sl1' "
        "GROUP BY direction, segment_list"
    )
    wait_rows(pipeline, query, 6)
    time.sleep(2)
    found = rows(pipeline, query)
    bins = ("hist_lt_100000", "hist_lt_500000", "hist_lt_2000000", "hist_lt_inf")
    got = {(r["direction"], r["block"]): [r[b] for b in bins] for r in found}
    assert {r["segment_list"] for r in found} == {"sl1"}
    assert got == {
        ("two_way", BASE + 1): [4, 3, 2, 1],
        ("two_way", BASE + 2): [0, 7, 0, 1],
        ("forward", BASE + 1): [1, 2, 3, 4],
        ("forward", BASE + 2): [1, 0, 7, 0],
        ("reverse", BASE + 1): [10, 0, 0, 0],
        ("reverse", BASE + 2): [8, 0, 0, 0],
    }
    assert all(r["samples"] == sum(got[(r["direction"], r["block"])]) for r in found)
    summed = rows(
        pipeline,
        "SELECT sum(/^hist_lt_/) FROM delay WHERE session = 'h-sl1' AND direction = 'two_way'",
    )
    assert [summed[0][f"sum_{b}"] for b in bins] == [4, 10, 2, 2]


def test_each_liveness_change_is_exactly_one_point_even_when_delivered_again(pipeline):
    t0 = BASE * PERIOD + 123_456_789
    events = [
        liveness("l-sl0", "sl0", t0, pb.LIVENESS_STATE_UP, 0, 1),
        liveness("l-sl0", "sl0", t0 + 5 * 10**9, pb.LIVENESS_STATE_DOWN, pb.LIVENESS_STATE_UP, 3),
        liveness("l-sl0", "sl0", t0 + 9 * 10**9, pb.LIVENESS_STATE_UP, pb.LIVENESS_STATE_DOWN, 2),
        liveness("l-sl1", "sl1", t0 + 10**9, pb.LIVENESS_STATE_UP, 0, 1),
    ]
    produce(pipeline, events)
    again = [pb.MeasurementRecord.FromString(e.SerializeToString()) for e in events]
    for record in again:
        record.journal_id, record.created_unix_ns = 99, time.time_ns()  # a re-send
    produce(pipeline, again)
    query = "SELECT * FROM liveness WHERE session =~ /^l-/ GROUP BY segment_list"
    wait_rows(pipeline, query, 4)
    time.sleep(2)
    found = rows(pipeline, query)
    assert [
        (r["time"], r["segment_list"], r["state"], r["previous"], r["consecutive"]) for r in found
    ] == [
        (t0, "sl0", 1, None, 1),
        (t0 + 5 * 10**9, "sl0", 0, 1, 3),
        (t0 + 9 * 10**9, "sl0", 1, 0, 2),
        (t0 + 10**9, "sl1", 1, None, 1),
    ]
    assert found[1]["description"] == "down: 3 replies missed in a row"
    assert {(r["session"], r["policy"], r["src_node"], r["dst_node"]) for r in found} == {
        ("l-sl0", "to-r3", "r1", "r3"),
        ("l-sl1", "to-r3", "r1", "r3"),
    }


def threshold(
    session: str, metric: str, at_ns: int, value_ns: int, reference_ns: int, accelerated: bool
) -> pb.MeasurementRecord:
    return pb.MeasurementRecord(
        node="r1",
        threshold=pb.ThresholdEvent(
            session=session,
            metric=metric,
            value_ns=value_ns,
            reference_ns=reference_ns,
            first=not reference_ns,
            accelerated=accelerated,
            at_unix_ns=at_ns,
            labels=labels(session, "sl0"),
        ),
    )


def interval(record: pb.MeasurementRecord, index: int, of: int) -> pb.MeasurementRecord:
    """`record` as the index-th of `of` computation intervals of its block."""
    out = pb.MeasurementRecord.FromString(record.SerializeToString())
    out.delay.interval_ns = PERIOD // of
    out.delay.interval_start_unix_ns = out.delay.block * PERIOD + index * out.delay.interval_ns
    return out


def resent(records: list[pb.MeasurementRecord]) -> list[pb.MeasurementRecord]:
    """The same records as a node sends them again after a restart."""
    again = [pb.MeasurementRecord.FromString(e.SerializeToString()) for e in records]
    for record in again:
        record.journal_id, record.created_unix_ns = 99, time.time_ns()
    return again


def test_each_threshold_event_is_exactly_one_point_even_when_delivered_again(pipeline):
    t0 = BASE * PERIOD + 2_000_000_000
    events = [
        threshold("t-sl0", "two_way_mean", t0, 1_000_000, 0, False),
        threshold("t-sl0", "two_way_p99", t0, 1_800_000, 0, False),
        threshold("t-sl0", "two_way_mean", t0 + 1_250_000, 3_000_000, 1_000_000, True),
        threshold("t-sl0", "two_way_mean", t0 + 10**9, 1_100_000, 3_000_000, False),
    ]
    produce(pipeline, events)
    produce(pipeline, resent(events))
    query = "SELECT * FROM threshold WHERE session = 't-sl0' GROUP BY metric"
    wait_rows(pipeline, query, 4)
    time.sleep(2)
    found = rows(pipeline, query)
    assert [
        (r["time"], r["metric"], r["value_ns"], r["reference_ns"], r["first"], r["accelerated"])
        for r in found
    ] == [
        (t0, "two_way_mean", 1_000_000, 0, True, False),
        (t0 + 1_250_000, "two_way_mean", 3_000_000, 1_000_000, False, True),
        (t0 + 10**9, "two_way_mean", 1_100_000, 3_000_000, False, False),
        (t0, "two_way_p99", 1_800_000, 0, True, False),
    ]
    assert found[1]["description"] == "two_way_mean 3000 µs (from 1000 µs, one burst)"
    assert {(r["policy"], r["segment_list"], r["src_node"], r["dst_node"]) for r in found} == {
        ("to-r3", "sl0", "r1", "r3")
    }


def test_computation_intervals_are_their_own_points_beside_the_block(pipeline):
    block = delay("i-sl1", "sl1", BASE + 4, [4, 3, 2, 1])
    intervals = [
        interval(delay("i-sl1", "sl1", BASE + 4, bins), i, 2)
        for i, bins in enumerate(([3, 2, 0, 0], [1, 1, 2, 1]))
    ]
    produce(pipeline, [block, *intervals])
    produce(pipeline, resent([block, *intervals]))
    query = (
        "SELECT block, interval_ns, samples, /^hist_lt_/ FROM delay_interval "
        "WHERE session = 'i-sl1' GROUP BY direction, segment_list"
    )
    wait_rows(pipeline, query, 6)
    time.sleep(2)
    found = rows(pipeline, query)
    start = (BASE + 4) * PERIOD
    got = {
        (r["direction"], r["time"]): (r["block"], r["interval_ns"], r["samples"], r["hist_lt_inf"])
        for r in found
        if r["direction"] == "two_way"
    }
    assert len(found) == 6
    assert got == {
        ("two_way", start): (BASE + 4, PERIOD // 2, 5, 0),
        ("two_way", start + PERIOD // 2): (BASE + 4, PERIOD // 2, 5, 1),
    }
    # the block's own point is as it was: one per direction, its histogram whole
    blocks = rows(pipeline, "SELECT * FROM delay WHERE session = 'i-sl1' GROUP BY direction")
    assert len(blocks) == 3
    assert all(r["time"] == start and "interval_ns" not in r for r in blocks)
    assert {r["direction"]: r["samples"] for r in blocks}["two_way"] == 10


def dead_letters(pipeline: ResultsPipeline, n: int, timeout: float = 30) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": pipeline.kafka.bootstrap,
            "group.id": f"dlq-reader-{time.time_ns()}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([DLQ_TOPIC])
    letters: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(letters) < n and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            letters.append(message)
    consumer.close()
    return letters


def test_malformed_events_intervals_and_histograms_go_to_the_dead_letter_topic(pipeline):
    at = BASE * PERIOD
    unspecified = liveness("bad-state", "", at, pb.LIVENESS_STATE_UNSPECIFIED, 0, 1)
    no_change = liveness("bad-prev", "", at, pb.LIVENESS_STATE_UP, pb.LIVENESS_STATE_UP, 1)
    no_time = liveness("bad-time", "", 0, pb.LIVENESS_STATE_DOWN, pb.LIVENESS_STATE_UP, 3)
    short = delay("bad-hist", "", BASE + 3, [1, 2, 3, 4])
    del short.delay.two_way.histogram[-1]
    good = liveness("good-after", "", at, pb.LIVENESS_STATE_DOWN, 0, 3)
    metric = threshold("bad-metric", "p95", at, 1, 0, False)
    no_crossing = threshold("bad-crossing", "jitter", at, 5, 5, False)
    outside = interval(delay("bad-interval", "", BASE + 5, [1, 0, 0, 0]), 0, 2)
    outside.delay.interval_start_unix_ns -= 1
    bad = [unspecified, no_change, no_time, short, metric, no_crossing, outside]
    produce(pipeline, [*bad, good])
    assert wait_rows(pipeline, "SELECT state FROM liveness WHERE session = 'good-after'", 1)
    letters = dead_letters(pipeline, len(bad))
    by_value = {m.value(): dict(m.headers())["srv6pm.reason"].decode() for m in letters}
    assert set(by_value) == {r.SerializeToString() for r in bad}
    assert by_value[unspecified.SerializeToString()] == (
        "liveness of 'bad-state': state 0 is neither up nor down"
    )
    assert by_value[no_change.SerializeToString()] == (
        "liveness of 'bad-prev': previous state 1, no change"
    )
    assert by_value[no_time.SerializeToString()] == "liveness of 'bad-time': time 0 out of range"
    assert by_value[short.SerializeToString()] == (
        f"delay record of block {BASE + 3}: two_way has 3 histogram bins for 3 edges"
    )
    assert by_value[metric.SerializeToString()] == (
        "threshold event of 'bad-metric': unknown metric 'p95'"
    )
    assert by_value[no_crossing.SerializeToString()] == (
        "threshold event of 'bad-crossing': jitter 5 ns equals its reference, no crossing"
    )
    start = (BASE + 5) * PERIOD
    assert by_value[outside.SerializeToString()] == (
        f"delay record of block {BASE + 5}: interval [{start - 1}, +{PERIOD // 2}) is not "
        f"inside the block [{start}, +{PERIOD})"
    )
    assert rows(pipeline, "SELECT * FROM threshold WHERE session =~ /^bad-/") == []
    assert rows(pipeline, "SELECT * FROM delay_interval WHERE session = 'bad-interval'") == []
    for session in ("bad-state", "bad-prev", "bad-time"):
        assert rows(pipeline, f"SELECT * FROM liveness WHERE session = '{session}'") == []
    assert rows(pipeline, "SELECT * FROM delay WHERE session = 'bad-hist'") == []
