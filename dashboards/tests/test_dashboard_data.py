"""Every panel, variable and annotation query of every dashboard, run against a real InfluxDB
holding the points the collector itself makes of records (srv6pm.collector's points.lines):
a policy with two segment lists probed by one session, a policy with its only one, delay
histograms, liveness changes, threshold events, computation intervals, per-probe and per-node
points. Each query must find data, and the
panels added for segment lists, histograms and liveness must show exactly what was written."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from srv6pm.collector.domain import points
from srv6pm.dashboards import annotation_queries, generate, panel_queries, variable_queries
from srv6pm.proto.v1 import records_pb2 as pb

pytestmark = pytest.mark.slow

PERIOD_NS = 10 * 10**9
K0 = time.time_ns() // PERIOD_NS - 20  # a few minutes ago
BLOCKS = range(K0, K0 + 4)
EDGES = [200_000, 1_000_000]  # ns: bins <200 µs, 200 µs-1 ms, >=1 ms
SEGMENT_LISTS = {"sl0": 1000, "sl1": 400}  # s1's segment lists of to-r3: forward tx per block
LOST = {"sl0": 2, "sl1": 7}  # forward packets lost per block
SL1_PROBE_LOST = K0 + 2  # sl1's loss probe of this block was lost
HISTOGRAM = {"sl0": [6, 3, 1], "sl1": [0, 8, 2]}  # two-way replies per bin, each block
T0 = K0 * PERIOD_NS + 123_456_789
LIVENESS = [  # (segment list, at, state, previous, consecutive)
    ("sl0", T0, pb.LIVENESS_STATE_UP, 0, 1),
    ("sl1", T0 + 1, pb.LIVENESS_STATE_UP, 0, 1),
    ("sl1", T0 + 2 * PERIOD_NS, pb.LIVENESS_STATE_DOWN, pb.LIVENESS_STATE_UP, 3),
    ("sl1", T0 + 3 * PERIOD_NS, pb.LIVENESS_STATE_UP, pb.LIVENESS_STATE_DOWN, 1),
    ("sl0", T0 + 3 * PERIOD_NS + 5, pb.LIVENESS_STATE_DOWN, pb.LIVENESS_STATE_UP, 3),
]
THRESHOLDS = [  # (segment list, metric, at, value, reference, accelerated)
    ("sl0", "two_way_mean", T0 + 500_000_000, 400_000, 0, False),
    ("sl1", "two_way_p99", T0 + 500_000_000, 1_200_000, 0, False),
    ("sl0", "two_way_mean", T0 + PERIOD_NS + 7_000, 900_000, 400_000, True),
]
INTERVALS = 2  # computation intervals per block, sl0's only
VARIABLES = {"policy": "to-r3", "session": "s1", "flow": "to-r3"}


def labels(session: str, segment_list: str) -> pb.SessionLabels:
    policy = "to-r3" if session == "s1" else "to-r1"
    return pb.SessionLabels(
        session=session,
        policy=policy,
        reflector_node="r3" if session == "s1" else "r1",
        segment_list=segment_list,
    )


def info(k: int) -> pb.Block:
    return pb.Block(index=k, start_unix_ns=k * PERIOD_NS, period_ns=PERIOD_NS)


def direction(tx: int, lost: int) -> pb.DirectionLoss:
    return pb.DirectionLoss(tx=tx, rx=tx - lost, lost=lost, loss_ratio=lost / tx)


def loss(session: str, segment_list: str, k: int, tx: int, lost: int) -> pb.MeasurementRecord:
    record = pb.LossRecord(
        session=session, block=k, block_info=info(k), labels=labels(session, segment_list)
    )
    if (segment_list, k) == ("sl1", SL1_PROBE_LOST):
        record.reason = "probe lost"
    else:
        record.valid = True
        record.forward.CopyFrom(direction(tx, lost))
        record.reverse.CopyFrom(direction(tx // 2, 0))
    node = "r1" if session == "s1" else "r3"
    return pb.MeasurementRecord(node=node, loss=record)


def delay(session: str, segment_list: str, k: int) -> pb.MeasurementRecord:
    counts = HISTOGRAM.get(segment_list, [])
    two_way = pb.DelayStats(
        samples=sum(counts) or 5,
        min_ns=100_000,
        p50_ns=300_000,
        p90_ns=800_000,
        p99_ns=1_200_000,
        max_ns=1_500_000,
        mean_ns=400_000,
        jitter_ns=20_000,
        histogram=counts,
    )
    record = pb.DelayRecord(
        session=session,
        block=k,
        probes_sent=two_way.samples,
        two_way=two_way,
        block_info=info(k),
        labels=labels(session, segment_list),
        histogram_edges_ns=EDGES if counts else [],
    )
    if segment_list == "sl0":  # synchronised clocks on sl0's path only
        record.forward.CopyFrom(pb.DelayStats(samples=1, p50_ns=150_000, max_ns=150_000))
        record.reverse.CopyFrom(pb.DelayStats(samples=1, p50_ns=140_000, max_ns=140_000))
    else:
        record.one_way_reason = "clocks not synchronised"
    node = "r1" if session == "s1" else "r3"
    return pb.MeasurementRecord(node=node, delay=record)


def probe(segment_list: str, k: int) -> pb.MeasurementRecord:
    record = pb.ProbeRecord(
        session="s1",
        seq=k - K0,
        sent_unix_ns=k * PERIOD_NS + 5 * 10**9,
        two_way_ns=300_000,
        one_way_valid=True,
        forward_ns=150_000,
        reverse_ns=150_000,
        labels=labels("s1", segment_list),
    )
    return pb.MeasurementRecord(node="r1", probe=record)


def flow(node: str, role: int, k: int, packets: int | None) -> pb.MeasurementRecord:
    record = pb.FlowBlockRecord(flow="to-r3", block=k, role=role, block_info=info(k))
    if packets is None:
        record.reason = "no baseline"
    else:
        record.valid, record.packets, record.bytes = True, packets, packets * 100
    return pb.MeasurementRecord(node=node, flow_block=record)


def liveness(segment_list: str, at: int, state: int, previous: int, n: int) -> pb.MeasurementRecord:
    event = pb.LivenessEvent(
        session="s1",
        state=state,  # type: ignore[arg-type]
        previous=previous,  # type: ignore[arg-type]
        at_unix_ns=at,
        consecutive=n,
        labels=labels("s1", segment_list),
    )
    return pb.MeasurementRecord(node="r1", liveness=event)


def threshold(
    segment_list: str, metric: str, at: int, value: int, reference: int, accelerated: bool
) -> pb.MeasurementRecord:
    event = pb.ThresholdEvent(
        session="s1",
        metric=metric,
        value_ns=value,
        reference_ns=reference,
        first=not reference,
        accelerated=accelerated,
        at_unix_ns=at,
        labels=labels("s1", segment_list),
    )
    return pb.MeasurementRecord(node="r1", threshold=event)


def interval(k: int, i: int) -> pb.MeasurementRecord:
    """sl0's i-th computation interval of block k: its p99 is 100 µs x (i + 1)."""
    record = delay("s1", "sl0", k)
    record.delay.two_way.p99_ns = 100_000 * (i + 1)
    record.delay.interval_ns = PERIOD_NS // INTERVALS
    record.delay.interval_start_unix_ns = k * PERIOD_NS + i * record.delay.interval_ns
    return record


def records() -> list[pb.MeasurementRecord]:
    out = []
    for k in BLOCKS:
        for segment_list, tx in SEGMENT_LISTS.items():
            out += [loss("s1", segment_list, k, tx, LOST[segment_list])]
            out += [delay("s1", segment_list, k), probe(segment_list, k)]
        out += [loss("s2", "", k, 100, 1), delay("s2", "", k)]
        out += [flow("r1", pb.ROLE_INGRESS, k, 1400), flow("r3", pb.ROLE_EGRESS, k, 1391)]
        out += [flow("r2", pb.ROLE_TRANSIT, k, None if k == K0 else 1395)]
    out += [liveness(*event) for event in LIVENESS]
    out += [threshold(*event) for event in THRESHOLDS]
    out += [interval(k, i) for k in BLOCKS for i in range(INTERVALS)]
    return out


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    servers = pytest.importorskip("srv6pm.lab.servers")
    with servers.InfluxServer(tmp_path_factory.mktemp("dashboards") / "influxdb") as server:
        server.create_database("srv6pm")
        lines = [line for record in records() for line in points.lines(record)]
        request = urllib.request.Request(
            f"{server.url}/write?db=srv6pm&precision=ns",
            data="\n".join(lines).encode(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert reply.status == 204
        yield server


@pytest.fixture(scope="module")
def shown(influx: Any) -> dict[str, list[dict[str, Any]]]:
    """The series each panel, variable and annotation gets, by 'uid: title'."""
    out: dict[str, list[dict[str, Any]]] = {}
    for uid, dashboard in generate().items():
        for title, query in panel_queries(dashboard, VARIABLES):
            out.setdefault(f"{uid}: {title}", []).extend(influx.query(query, "srv6pm"))
        for name, query in variable_queries(dashboard, VARIABLES):
            out[f"{uid}: variable {name}"] = influx.query(query, "srv6pm")
        for name, query in annotation_queries(dashboard, VARIABLES):
            out[f"{uid}: annotation {name}"] = influx.query(query, "srv6pm", epoch="ns")
    return out


def rows(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**s.get("tags", {}), **dict(zip(s["columns"], values, strict=True))}
        for s in series
        for values in s["values"]
    ]


def test_every_panel_variable_and_annotation_query_finds_data(shown) -> None:
    empty = sorted(title for title, series in shown.items() if not series)
    assert not empty, f"queries with nothing to show: {empty}"
    annotations = [t for t in shown if ": annotation " in t]
    assert sorted(annotations) == [
        "srv6pm-fleet: annotation Liveness changes",
        "srv6pm-fleet: annotation Threshold events",
        "srv6pm-session: annotation Liveness changes",
        "srv6pm-session: annotation Threshold events",
    ]


def test_each_segment_list_is_its_own_series(shown) -> None:
    lost = rows(shown["srv6pm-session: Lost packets per block"])
    by_series: dict[tuple[str, str], list[int]] = {}
    for r in lost:
        by_series.setdefault((r["segment_list"], r["direction"]), []).append(r["lost"])
    valid_sl1 = len(BLOCKS) - 1
    assert by_series == {
        ("sl0", "forward"): [LOST["sl0"]] * len(BLOCKS),
        ("sl0", "reverse"): [0] * len(BLOCKS),
        ("sl1", "forward"): [LOST["sl1"]] * valid_sl1,
        ("sl1", "reverse"): [0] * valid_sl1,
    }
    per_list = rows(shown["srv6pm-fleet: Loss ratio per segment list and direction"])
    assert {(r["policy"], r["segment_list"], r["direction"]) for r in per_list} == {
        ("to-r3", "sl0", "forward"),
        ("to-r3", "sl0", "reverse"),
        ("to-r3", "sl1", "forward"),
        ("to-r3", "sl1", "reverse"),
    }
    invalid = rows(shown["srv6pm-session: Invalid loss blocks"])
    assert {(r["segment_list"], r["block"], r["reason"]) for r in invalid} == {
        ("sl1", SL1_PROBE_LOST, "probe lost")
    }
    variable = rows(shown["srv6pm-session: variable segment_list"])
    assert [r["value"] for r in variable] == ["sl0", "sl1"]


def test_a_policy_s_total_sums_its_segment_lists(influx: Any) -> None:
    fleet = dict(panel_queries(generate()["srv6pm-fleet"], {}))  # every policy, segment list
    top = rows(influx.query(fleet["Top 10 lossy policies"], "srv6pm"))
    forward = {r["policy"]: r["lost"] for r in top if r["direction"] == "forward"}
    valid_sl1 = len(BLOCKS) - 1
    assert forward == {
        "to-r3": LOST["sl0"] * len(BLOCKS) + LOST["sl1"] * valid_sl1,
        "to-r1": 1 * len(BLOCKS),  # its only segment list has no tag: All still counts it
    }


def test_the_histogram_panel_holds_every_reply_in_its_bin(shown) -> None:
    found = rows(shown["srv6pm-session: Two-way delay histogram"])
    totals = {
        column: sum(r[column] for r in found if r[column] is not None)
        for column in ("sum_hist_lt_200000", "sum_hist_lt_1000000", "sum_hist_lt_inf")
    }
    expected = [len(BLOCKS) * (HISTOGRAM["sl0"][i] + HISTOGRAM["sl1"][i]) for i in range(3)]
    assert list(totals.values()) == expected
    assert {c for s in shown["srv6pm-session: Two-way delay histogram"] for c in s["columns"]} == {
        "time",
        "sum_hist_lt_200000",
        "sum_hist_lt_1000000",
        "sum_hist_lt_inf",
    }


def test_the_histogram_panel_renames_its_bins_to_their_upper_edges() -> None:
    dashboard = generate()["srv6pm-session"]
    (panel,) = [p for p in dashboard["panels"] if p["title"] == "Two-way delay histogram"]
    assert panel["type"] == "heatmap"
    assert panel["options"]["calculate"] is False
    assert panel["options"]["rowsFrame"]["layout"] == "le"
    renames = [
        (t["options"]["regex"], t["options"]["renamePattern"]) for t in panel["transformations"]
    ]
    names = ["sum_hist_lt_200000", "sum_hist_lt_1000000", "sum_hist_lt_inf"]
    for pattern, replacement in renames:
        names = [re.sub(pattern, replacement.replace("$1", r"\1"), n) for n in names]
    assert names == ["200000", "1000000", "+Inf"]


def test_liveness_panels_and_annotations_show_each_change(shown) -> None:
    now = {s["tags"]["segment_list"]: s["values"][-1][1] for s in shown["srv6pm-session: Liveness"]}
    assert now == {"sl0": 0, "sl1": 1}  # sl0 went down last, sl1 is up again
    fleet = rows(shown["srv6pm-fleet: Liveness per segment list"])
    assert {(r["session"], r["segment_list"], r["state"]) for r in fleet} == {
        ("s1", "sl0", 0),
        ("s1", "sl1", 1),
    }
    changes = rows(shown["srv6pm-session: Liveness changes"])
    assert len(changes) == len(LIVENESS)
    events = rows(shown["srv6pm-session: annotation Liveness changes"])
    assert [(e["time"], e["segment_list"]) for e in events] == sorted(
        (at, segment_list) for segment_list, at, *_ in LIVENESS
    )
    assert events[2]["description"] == "down: 3 replies missed in a row"


def test_one_segment_list_can_be_chosen(influx: Any) -> None:
    dashboard = generate()["srv6pm-session"]
    chosen = dict(panel_queries(dashboard, {**VARIABLES, "segment_list": "sl1"}))
    found = rows(influx.query(chosen["Lost packets per block"], "srv6pm"))
    assert {r["segment_list"] for r in found} == {"sl1"}


def test_threshold_events_are_an_annotation_and_a_table(shown) -> None:
    expected = sorted((at, sl, metric) for sl, metric, at, *_ in THRESHOLDS)
    for uid in ("srv6pm-session", "srv6pm-fleet"):
        events = rows(shown[f"{uid}: annotation Threshold events"])
        assert [(e["time"], e["segment_list"], e["metric"]) for e in events] == expected
        table = rows(shown[f"{uid}: Threshold events"])
        assert sorted((r["segment_list"], r["metric"], r["value_ns"]) for r in table) == sorted(
            (sl, metric, value) for sl, metric, _, value, *_ in THRESHOLDS
        )
    events = rows(shown["srv6pm-session: annotation Threshold events"])
    assert events[-1]["description"] == "two_way_mean 900 µs (from 400 µs, one burst)"
    table = rows(shown["srv6pm-session: Threshold events"])
    assert [(r["first"], r["accelerated"], r["reference_ns"]) for r in table] == [
        (False, True, 400_000),  # newest first
        (True, False, 0),
        (True, False, 0),
    ]


def test_each_computation_interval_is_a_point_of_its_own(shown) -> None:
    found = shown["srv6pm-session: Two-way delay per computation interval"]
    assert [s["tags"]["segment_list"] for s in found] == ["sl0"]
    (series,) = found
    p99 = series["columns"].index("p99")
    assert [v[p99] for v in series["values"]] == [100_000, 200_000] * len(BLOCKS)
    # the block's own delay points are as they were: one per block, not one per interval
    blocks = rows(shown["srv6pm-session: Two-way delay percentiles"])
    assert len([r for r in blocks if r["segment_list"] == "sl0"]) == len(BLOCKS)
