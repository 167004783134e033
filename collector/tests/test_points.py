"""Records to points: the schema, idempotence, the same lines as influxdb-client, bad records."""

from __future__ import annotations

import pytest
from influxdb_client import Point, WritePrecision
from srv6pm.collector.domain import points
from srv6pm.collector.domain.points import RecordError
from srv6pm.proto.v1 import records_pb2 as pb

PERIOD = 2_000_000_000
LABELS = pb.SessionLabels(
    session="h1-h2 stamp", policy="h1,h2=x", reflector_node="r3", reflector_address="fcf0:23::3"
)


def block(k: int) -> pb.Block:
    return pb.Block(index=k, start_unix_ns=k * PERIOD, period_ns=PERIOD)


def loss_record(**overrides) -> pb.MeasurementRecord:
    loss = pb.LossRecord(
        session="h1-h2 stamp",
        block=10,
        forward=pb.DirectionLoss(tx=100, rx=97, lost=3, loss_ratio=0.03),
        reverse=pb.DirectionLoss(tx=50, rx=50, lost=0, loss_ratio=0.0),
        valid=True,
        block_info=block(10),
        labels=LABELS,
    )
    for k, v in overrides.items():
        setattr(loss, k, v)
    return pb.MeasurementRecord(node="r1", created_unix_ns=123, journal_id=7, loss=loss)


def test_a_loss_record_is_one_point_per_direction_at_the_block_start():
    lines = points.lines(loss_record())
    assert lines == [
        "loss,direction=forward,dst_node=r3,policy=h1\\,h2\\=x,session=h1-h2\\ stamp,src_node=r1 "
        'block=10i,loss_ratio=0.03,lost=3i,reason="",rx=97i,tx=100i,valid=true 20000000000',
        "loss,direction=reverse,dst_node=r3,policy=h1\\,h2\\=x,session=h1-h2\\ stamp,src_node=r1 "
        'block=10i,loss_ratio=0.0,lost=0i,reason="",rx=50i,tx=50i,valid=true 20000000000',
    ]


def test_the_same_record_delivered_again_gives_the_same_points():
    again = loss_record()
    again.journal_id, again.created_unix_ns = 99, 456  # a re-send after a restart
    assert points.lines(again) == points.lines(loss_record())


def test_lines_equal_what_influxdb_client_formats():
    record = loss_record()
    ours = points.lines(record)[0]
    d = record.loss.forward
    theirs = (
        Point("loss")
        .tag("session", "h1-h2 stamp")
        .tag("policy", "h1,h2=x")
        .tag("direction", "forward")
        .tag("src_node", "r1")
        .tag("dst_node", "r3")
        .field("tx", d.tx)
        .field("rx", d.rx)
        .field("lost", d.lost)
        .field("loss_ratio", d.loss_ratio)
        .field("valid", True)
        .field("reason", "")
        .field("block", 10)
        .time(10 * PERIOD, WritePrecision.NS)
        .to_line_protocol()
    )
    assert ours == theirs
    quoted = points.line("m", {"t": "a b"}, {"s": 'say "hi" \\o/'}, 1)
    assert (
        quoted
        == Point("m")
        .tag("t", "a b")
        .field("s", 'say "hi" \\o/')
        .time(1, WritePrecision.NS)
        .to_line_protocol()
    )


def test_an_invalid_loss_record_keeps_its_reason_and_no_counts():
    record = loss_record(valid=False, reason="probe lost")
    record.loss.ClearField("forward")
    record.loss.ClearField("reverse")
    lines = points.lines(record)
    assert len(lines) == 2
    assert all('reason="probe lost"' in x and "valid=false" in x and "tx=" not in x for x in lines)


def test_a_delay_record_is_one_point_per_direction():
    stats = pb.DelayStats(
        samples=4, min_ns=1, p50_ns=2, p90_ns=3, p99_ns=3, max_ns=3, mean_ns=2, jitter_ns=1
    )
    record = pb.MeasurementRecord(
        node="r1",
        delay=pb.DelayRecord(
            session="s",
            block=10,
            probes_sent=5,
            probes_lost=1,
            two_way=stats,
            one_way_reason="clocks not synchronised",
            block_info=block(10),
            labels=LABELS,
        ),
    )
    two_way, forward, reverse = points.lines(record)
    assert two_way.startswith("delay,direction=two_way,")
    assert "p99_ns=3i" in two_way and "valid=true" in two_way and "probes_lost=1i" in two_way
    for one_way in (forward, reverse):
        assert "valid=false" in one_way and 'reason="clocks not synchronised"' in one_way


def test_a_flow_block_record_is_one_point_tagged_with_node_flow_and_role():
    record = pb.MeasurementRecord(
        node="r2",
        flow_block=pb.FlowBlockRecord(
            flow="h1-h2",
            block=10,
            packets=500,
            bytes=7000,
            valid=True,
            role=pb.ROLE_TRANSIT,
            flow_mon_id=17,
            block_info=block(10),
        ),
    )
    assert points.lines(record) == [
        "flow,flow=h1-h2,node=r2,role=transit block=10i,bytes=7000i,flow_mon_id=17i,"
        'packets=500i,reason="",valid=true 20000000000'
    ]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "empty record"),
        (b"\xff\xff\xff", "not a srv6pm.v1.MeasurementRecord"),
        (pb.MeasurementRecord(node="r1").SerializeToString(), "no known type"),
    ],
)
def test_undecodable_records_are_refused_with_a_reason(value, reason):
    with pytest.raises(RecordError, match=reason):
        points.lines(points.decode(value))


def test_inconsistent_records_are_refused_with_a_reason():
    record = loss_record()
    record.loss.block_info.start_unix_ns += 1
    with pytest.raises(RecordError, match="block_info"):
        points.lines(record)
    record = loss_record()
    record.loss.forward.lost = 5
    with pytest.raises(RecordError, match="inconsistent forward"):
        points.lines(record)
    record = loss_record()
    record.loss.ClearField("reverse")
    with pytest.raises(RecordError, match="without reverse"):
        points.lines(record)
    record = loss_record(session="a\nb")
    with pytest.raises(RecordError, match="control characters"):
        points.lines(record)
    record = loss_record()
    record.node = ""
    with pytest.raises(RecordError, match="node is empty"):
        points.lines(record)


def test_the_fast_formatters_write_what_the_generic_line_writes():
    """Each measurement's fixed field order equals sorting (what influxdb-client does)."""
    stats = pb.DelayStats(
        samples=2, min_ns=1, p50_ns=2, p90_ns=3, p99_ns=4, max_ns=5, mean_ns=6, jitter_ns=7
    )
    record = pb.MeasurementRecord(
        node="r1",
        delay=pb.DelayRecord(
            session="s",
            block=10,
            probes_sent=2,
            probes_lost=0,
            two_way=stats,
            forward=stats,
            reverse=stats,
            block_info=block(10),
            labels=LABELS,
        ),
    )
    tags = {"session": "s", "policy": "h1,h2=x", "src_node": "r1", "dst_node": "r3"}
    fields = {
        "block": 10,
        "probes_sent": 2,
        "probes_lost": 0,
        "valid": True,
        "reason": "",
        **{f: getattr(stats, f) for f in ("samples", "min_ns", "p50_ns", "p90_ns")},
        **{f: getattr(stats, f) for f in ("p99_ns", "max_ns", "mean_ns", "jitter_ns")},
    }
    assert points.lines(record) == [
        points.line("delay", {**tags, "direction": d}, fields, 10 * PERIOD)
        for d in ("two_way", "forward", "reverse")
    ]
    probe = pb.MeasurementRecord(
        node="r1",
        probe=pb.ProbeRecord(
            session="s",
            seq=3,
            sent_unix_ns=5,
            two_way_ns=9,
            one_way_valid=True,
            forward_ns=4,
            reverse_ns=5,
            labels=LABELS,
        ),
    )
    assert points.lines(probe) == [
        points.line(
            "probe",
            tags,
            {"seq": 3, "two_way_ns": 9, "one_way_valid": True, "forward_ns": 4, "reverse_ns": 5},
            5,
        )
    ]


# ---- segment lists, delay histograms, liveness --------------------------------------------------


def test_a_segment_list_is_a_tag_and_the_only_one_has_none():
    """A policy's only segment list ("") keeps the series it always had."""
    named = loss_record()
    named.loss.labels.segment_list = "sl1"
    assert points.lines(loss_record())[0].startswith(
        "loss,direction=forward,dst_node=r3,policy=h1\\,h2\\=x,session=h1-h2\\ stamp,src_node=r1 "
    )
    assert points.lines(named)[0].startswith(
        "loss,direction=forward,dst_node=r3,policy=h1\\,h2\\=x,segment_list=sl1,"
        "session=h1-h2\\ stamp,src_node=r1 "
    )
    named.loss.labels.segment_list = "sl\n1"
    with pytest.raises(RecordError, match="segment list"):
        points.lines(named)


def delay_with_histogram(edges: list[int], counts: list[int]) -> pb.MeasurementRecord:
    stats = pb.DelayStats(samples=sum(counts), min_ns=1, max_ns=9, histogram=counts)
    return pb.MeasurementRecord(
        node="r1",
        delay=pb.DelayRecord(
            session="s",
            block=10,
            probes_sent=sum(counts),
            two_way=stats,
            one_way_reason="clocks not synchronised",
            block_info=block(10),
            labels=LABELS,
            histogram_edges_ns=edges,
        ),
    )


def test_histogram_bins_are_fields_named_by_their_upper_edge():
    two_way, forward, _ = points.lines(delay_with_histogram([50_000, 100_000], [3, 0, 2]))
    tags = {"session": "s", "policy": "h1,h2=x", "src_node": "r1", "dst_node": "r3"}
    fields = {"block": 10, "probes_sent": 5, "probes_lost": 0, "valid": True, "reason": ""}
    fields |= {"samples": 5, "min_ns": 1, "p50_ns": 0, "p90_ns": 0, "p99_ns": 0, "max_ns": 9}
    fields |= {"mean_ns": 0, "jitter_ns": 0}
    fields |= {"hist_lt_50000": 3, "hist_lt_100000": 0, "hist_lt_inf": 2}
    assert two_way == points.line("delay", {**tags, "direction": "two_way"}, fields, 10 * PERIOD)
    assert "hist_" not in forward  # no one-way delay, no one-way histogram


@pytest.mark.parametrize(
    ("edges", "counts", "reason"),
    [
        ([100, 100], [1, 1, 1], "not strictly ascending"),
        ([200, 100], [1, 1, 1], "not strictly ascending"),
        ([100], [1, 1, 1], "3 histogram bins for 1 edges"),
        ([], [1], "1 histogram bins for 0 edges"),
        (list(range(1, 34)), [0] * 34, "33 histogram edges"),
    ],
)
def test_inconsistent_histograms_are_refused_with_a_reason(edges, counts, reason):
    with pytest.raises(RecordError, match=reason):
        points.lines(delay_with_histogram(edges, counts))


def test_a_histogram_must_count_every_sample():
    record = delay_with_histogram([100], [1, 2])
    record.delay.two_way.samples = 4
    with pytest.raises(RecordError, match="holds 3 replies, samples says 4"):
        points.lines(record)


def liveness_record(**overrides) -> pb.MeasurementRecord:
    event = pb.LivenessEvent(
        session="s",
        state=pb.LIVENESS_STATE_DOWN,
        previous=pb.LIVENESS_STATE_UP,
        at_unix_ns=1_700_000_000_123_456_789,
        consecutive=3,
        labels=pb.SessionLabels(session="s", policy="p", reflector_node="r3", segment_list="sl0"),
    )
    for k, v in overrides.items():
        setattr(event, k, v)
    return pb.MeasurementRecord(node="r1", journal_id=4, liveness=event)


def test_a_liveness_event_is_one_point_at_its_deciding_probe():
    assert points.lines(liveness_record()) == [
        "liveness,dst_node=r3,policy=p,segment_list=sl0,session=s,src_node=r1 "
        'consecutive=3i,description="down: 3 replies missed in a row",previous=1i,state=0i '
        "1700000000123456789"
    ]
    first = points.lines(liveness_record(state=pb.LIVENESS_STATE_UP, previous=0, consecutive=1))
    assert first == [
        "liveness,dst_node=r3,policy=p,segment_list=sl0,session=s,src_node=r1 "
        'consecutive=1i,description="up: 1 replies received in a row",state=1i '
        "1700000000123456789"
    ]


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"state": pb.LIVENESS_STATE_UNSPECIFIED}, "neither up nor down"),
        ({"state": 7}, "neither up nor down"),
        ({"previous": pb.LIVENESS_STATE_DOWN}, "no change"),
        ({"previous": 9}, "no change"),
        ({"at_unix_ns": 0}, "out of range"),
        ({"at_unix_ns": 1 << 63}, "out of range"),
        ({"session": ""}, "session is empty"),
    ],
)
def test_inconsistent_liveness_events_are_refused_with_a_reason(overrides, reason):
    with pytest.raises(RecordError, match=reason):
        points.lines(liveness_record(**overrides))


# ---- computation intervals, threshold events ---------------------------------------------------


def interval_record(start_ns: int, length_ns: int) -> pb.MeasurementRecord:
    record = delay_with_histogram([50_000], [2, 1])
    record.delay.interval_start_unix_ns, record.delay.interval_ns = start_ns, length_ns
    return record


def test_a_computation_interval_is_a_delay_interval_point_at_its_start():
    start = 10 * PERIOD + 500_000_000
    two_way, forward, _ = points.lines(interval_record(start, 500_000_000))
    tags = {"session": "s", "policy": "h1,h2=x", "src_node": "r1", "dst_node": "r3"}
    fields = {"block": 10, "probes_sent": 3, "probes_lost": 0, "valid": True, "reason": ""}
    fields |= {"samples": 3, "min_ns": 1, "p50_ns": 0, "p90_ns": 0, "p99_ns": 0, "max_ns": 9}
    fields |= {"mean_ns": 0, "jitter_ns": 0, "interval_ns": 500_000_000}
    fields |= {"hist_lt_50000": 2, "hist_lt_inf": 1}
    assert two_way == points.line("delay_interval", {**tags, "direction": "two_way"}, fields, start)
    assert forward.startswith("delay_interval,direction=forward,")
    # the block's own record keeps its `delay` point, unchanged
    assert points.lines(delay_with_histogram([50_000], [2, 1]))[0].startswith("delay,")


def test_the_first_interval_of_a_block_does_not_collide_with_the_block():
    block_point = points.lines(delay_with_histogram([50_000], [2, 1]))[0]
    first = points.lines(interval_record(10 * PERIOD, PERIOD // 4))[0]
    assert block_point.rsplit(" ", 1)[1] == first.rsplit(" ", 1)[1]  # same time
    assert block_point.split(" ", 1)[0] != first.split(" ", 1)[0]  # another series


@pytest.mark.parametrize(
    ("start", "length", "reason"),
    [
        (10 * PERIOD, 0, "with length 0"),
        (0, PERIOD // 2, "interval start 0 with length"),
        (10 * PERIOD - 1, PERIOD // 2, "not inside the block"),
        (10 * PERIOD + PERIOD // 2 + 1, PERIOD // 2, "not inside the block"),
        (11 * PERIOD, PERIOD // 2, "not inside the block"),
    ],
)
def test_an_interval_outside_its_block_is_refused(start, length, reason):
    with pytest.raises(RecordError, match=reason):
        points.lines(interval_record(start, length))


def threshold_record(**overrides) -> pb.MeasurementRecord:
    event = pb.ThresholdEvent(
        session="s",
        metric="two_way_p99",
        value_ns=2_500_000,
        reference_ns=1_000_000,
        at_unix_ns=1_700_000_000_500_000_000,
        labels=pb.SessionLabels(session="s", policy="p", reflector_node="r3", segment_list="sl1"),
    )
    for k, v in overrides.items():
        setattr(event, k, v)
    return pb.MeasurementRecord(node="r1", journal_id=5, threshold=event)


def test_a_threshold_event_is_one_point_per_metric_at_its_time():
    assert points.lines(threshold_record()) == [
        "threshold,dst_node=r3,metric=two_way_p99,policy=p,segment_list=sl1,session=s,src_node=r1 "
        'accelerated=false,description="two_way_p99 2500 µs (from 1000 µs)",first=false,'
        "reference_ns=1000000i,value_ns=2500000i 1700000000500000000"
    ]
    first = points.lines(threshold_record(first=True, reference_ns=0, accelerated=True))
    assert 'description="two_way_p99 2500 µs (first value, one burst)"' in first[0]
    again = threshold_record()
    again.journal_id, again.created_unix_ns = 9, 1
    assert points.lines(again) == points.lines(threshold_record())


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"metric": "two_way_p95"}, "unknown metric 'two_way_p95'"),
        ({"metric": ""}, "unknown metric"),
        ({"at_unix_ns": 0}, "out of range"),
        ({"at_unix_ns": 1 << 63}, "out of range"),
        ({"first": True}, "a first report with reference 1000000"),
        ({"value_ns": 1_000_000}, "equals its reference, no crossing"),
        ({"session": ""}, "session is empty"),
    ],
)
def test_inconsistent_threshold_events_are_refused_with_a_reason(overrides, reason):
    with pytest.raises(RecordError, match=reason):
        points.lines(threshold_record(**overrides))
