"""Threshold events and delay per computation interval through the REST API, against a real
InfluxDB holding the points the collector itself makes of the records (srv6pm.collector's
points.lines): /v1/sessions|policies/{name}/threshold-events and
/v1/sessions|policies/{name}/delay/computation-intervals. On SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest
from controller_fleet import INFLUX_DATABASE, NODE_INFO, S1, S2, add_lab, problem
from srv6pm.collector.domain import points
from srv6pm.lab.servers import InfluxServer
from srv6pm.proto.v1 import records_pb2 as pb

pytestmark = pytest.mark.slow

PERIOD_NS = NODE_INFO["period_ns"]
FIRST = time.time_ns() // PERIOD_NS - 600  # 20 minutes ago
BLOCKS = range(FIRST, FIRST + 3)
QUARTER = PERIOD_NS // 4
T0 = FIRST * PERIOD_NS
EVENTS = [  # (session, segment list, metric, at, value, reference, accelerated)
    ("s1", "sl0", "two_way_mean", T0 + QUARTER, 1_000_000, 0, False),
    ("s1", "sl1", "two_way_mean", T0 + QUARTER, 2_000_000, 0, False),
    ("s1", "sl0", "two_way_p99", T0 + QUARTER, 1_500_000, 0, False),
    ("s1", "sl0", "two_way_mean", T0 + QUARTER + 7_000, 3_000_000, 1_000_000, True),
    ("s1", "sl0", "two_way_mean", T0 + 3 * QUARTER, 1_100_000, 3_000_000, False),
    ("s2", "", "jitter", T0 + 2 * QUARTER, 40_000, 0, False),
]


@pytest.fixture
def influx(influx_server: InfluxServer) -> InfluxServer:
    influx_server.query(f"DROP DATABASE {INFLUX_DATABASE}", INFLUX_DATABASE)
    influx_server.create_database(INFLUX_DATABASE)
    return influx_server


@pytest.fixture
def influx_url(influx: InfluxServer) -> str:
    return influx.url


def labels(session: str, segment_list: str) -> pb.SessionLabels:
    policy, reflector = ("to-h2", "r3") if session == "s1" else ("to-h1", "r1")
    return pb.SessionLabels(
        session=session, policy=policy, reflector_node=reflector, segment_list=segment_list
    )


def node(session: str) -> str:
    return "r1" if session == "s1" else "r3"


def event_record(
    session: str, segment_list: str, metric: str, at: int, value: int, ref: int, fast: bool
) -> pb.MeasurementRecord:
    event = pb.ThresholdEvent(
        session=session,
        metric=metric,
        value_ns=value,
        reference_ns=ref,
        first=not ref,
        accelerated=fast,
        at_unix_ns=at,
        labels=labels(session, segment_list),
    )
    return pb.MeasurementRecord(node=node(session), threshold=event)


def interval_record(segment_list: str, k: int, i: int) -> pb.MeasurementRecord:
    """s1's delay in the i-th quarter of block k: (i + 1) replies, min i + 1 ms."""
    samples = i + 1
    two_way = pb.DelayStats(
        samples=samples, min_ns=samples * 10**6, max_ns=samples * 10**6, histogram=[0, samples]
    )
    record = pb.DelayRecord(
        session="s1",
        block=k,
        probes_sent=samples,
        two_way=two_way,
        one_way_reason="clocks not synchronised",
        block_info=pb.Block(index=k, start_unix_ns=k * PERIOD_NS, period_ns=PERIOD_NS),
        labels=labels("s1", segment_list),
        histogram_edges_ns=[500_000],
        interval_start_unix_ns=k * PERIOD_NS + i * QUARTER,
        interval_ns=QUARTER,
    )
    return pb.MeasurementRecord(node="r1", delay=record)


def write(server: InfluxServer, records: list[pb.MeasurementRecord]) -> None:
    lines = [line for record in records for line in points.lines(record)]
    reply = httpx.post(
        f"{server.url}/write",
        params={"db": INFLUX_DATABASE, "precision": "ns"},
        content="\n".join(lines).encode(),
        timeout=30,
    )
    assert reply.status_code == 204, reply.text


@pytest.fixture
def lab(admin, influx):
    add_lab(admin, (S1, S2))
    records = [event_record(*e) for e in EVENTS]
    records += [
        interval_record(sl, k, i) for sl in ("sl0", "sl1") for k in BLOCKS for i in range(4)
    ]
    write(influx, records)
    return admin


def window(**params: int) -> dict[str, int]:
    return {"start": T0, "end": (FIRST + len(BLOCKS)) * PERIOD_NS, **params}


def event(i: int) -> dict:
    session, segment_list, metric, at, value, ref, fast = EVENTS[i]
    return {
        "at_ns": at,
        "session": session,
        "segment_list": segment_list,
        "src_node": node(session),
        "dst_node": "r3" if session == "s1" else "r1",
        "metric": metric,
        "value_ns": value,
        "reference_ns": ref or None,
        "first": not ref,
        "accelerated": fast,
    }


def test_a_session_s_threshold_events_are_its_crossings_and_each_metric_s_last(lab, reader):
    body = reader.get("/v1/sessions/s1/threshold-events", **window()).json()
    assert body == {
        "session": "s1",
        "latest": [event(4), event(2), event(1)],
        "events": [event(0), event(2), event(1), event(3), event(4)],
        "next_start": None,
    }
    page = reader.get("/v1/sessions/s1/threshold-events", **window(limit=4)).json()
    assert page["events"] == [event(0), event(2), event(1), event(3)]
    assert page["next_start"] == EVENTS[4][3]
    rest = reader.get(
        "/v1/sessions/s1/threshold-events", start=page["next_start"], end=window()["end"]
    ).json()
    assert rest["events"] == [event(4)] and rest["next_start"] is None
    # a page never splits the events of one time: 3 at the same time fill a page of 2
    page = reader.get("/v1/sessions/s1/threshold-events", **window(limit=2)).json()
    assert page["events"] == [event(0), event(2), event(1)]
    assert page["next_start"] == EVENTS[0][3] + 1
    page = reader.get("/v1/sessions/s1/threshold-events", **window(limit=3)).json()
    assert page["events"] == [event(0), event(2), event(1)]
    assert page["next_start"] == EVENTS[3][3]
    one = reader.get(
        "/v1/sessions/s1/threshold-events", segment_list="sl0", metric="two_way_mean", **window()
    ).json()
    assert one["latest"] == [event(4)] and one["events"] == [event(0), event(3), event(4)]
    # the last report is the reference now, however old; the range is for the events only
    later = (FIRST + 100) * PERIOD_NS
    old = reader.get("/v1/sessions/s1/threshold-events", start=later, end=later + 1).json()
    assert old["latest"] == body["latest"] and old["events"] == []


def test_a_policy_s_threshold_events_cover_its_segment_lists(lab, reader):
    body = reader.get("/v1/policies/to-h2/threshold-events", **window()).json()
    assert body["policy"] == "to-h2" and len(body["events"]) == 5
    other = reader.get("/v1/policies/to-h1/threshold-events", **window()).json()
    assert other["latest"] == [event(5)] and other["events"] == [event(5)]


def test_delay_per_computation_interval_is_each_interval_s_own(lab, reader):
    body = reader.get("/v1/sessions/s1/delay/computation-intervals", **window(limit=5)).json()
    assert body["session"] == "s1"
    items = body["items"]
    # a page holds whole intervals: both segment lists of each of its first 5 starts
    assert [(i["start_ns"], i["segment_list"]) for i in items] == [
        (T0 + n * QUARTER, sl) for n in range(5) for sl in ("sl0", "sl1")
    ]
    assert body["next_start"] == T0 + 4 * QUARTER + 1
    first = items[0]
    assert (first["block"], first["interval_ns"], first["session"]) == (FIRST, QUARTER, "s1")
    assert first["two_way"] == {
        "probes_sent": 1,
        "probes_lost": 0,
        "samples": 1,
        "min_ns": 10**6,
        "p50_ns": 0,
        "p90_ns": 0,
        "p99_ns": 0,
        "max_ns": 10**6,
        "mean_ns": 0,
        "jitter_ns": 0,
        "valid": True,
        "reason": "",
        "histogram": {"edges_ns": [500_000], "counts": [0, 1]},
    }
    assert first["forward"]["valid"] is False
    assert first["forward"]["reason"] == "clocks not synchronised"
    assert [i["two_way"]["samples"] for i in items[8:10]] == [1, 1]  # the next block's first
    rest = reader.get(
        "/v1/sessions/s1/delay/computation-intervals",
        segment_list="sl1",
        start=body["next_start"],
        end=window()["end"],
    ).json()
    assert len(rest["items"]) == 12 - 5 and rest["next_start"] is None
    policy = reader.get("/v1/policies/to-h2/delay/computation-intervals", **window()).json()
    assert policy["policy"] == "to-h2" and len(policy["items"]) == 24
    # a session without a computation interval has none
    none = reader.get("/v1/sessions/s2/delay/computation-intervals", **window()).json()
    assert none == {"session": "s2", "items": [], "next_start": None}


def test_unknown_names_bad_queries_and_influxdb_down_are_problems(lab, reader, influx):
    for path, what in (
        ("/v1/sessions/nope/threshold-events", "session"),
        ("/v1/policies/nope/threshold-events", "policy"),
        ("/v1/sessions/nope/delay/computation-intervals", "session"),
        ("/v1/policies/nope/delay/computation-intervals", "policy"),
    ):
        assert problem(reader.get(path), 404)["detail"] == f"{what} nope does not exist"
    for path, field in (
        ("/v1/sessions/s1/threshold-events?metric=p95", "query.metric"),
        ("/v1/policies/to-h2/threshold-events?limit=0", "query.limit"),
        ("/v1/sessions/s1/delay/computation-intervals?start=-1", "query.start"),
    ):
        body = problem(reader.get(path), 422)
        assert field in {e["field"] for e in body["errors"]}, path
    influx.stop()
    try:
        for path in (
            "/v1/sessions/s1/threshold-events",
            "/v1/policies/to-h2/threshold-events",
            "/v1/sessions/s1/delay/computation-intervals",
            "/v1/policies/to-h2/delay/computation-intervals",
        ):
            assert problem(reader.get(path), 503)["title"] == "Results unavailable"
    finally:
        influx.start()


def test_the_openapi_document_describes_the_new_routes(lab, reader):
    paths = reader.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/sessions/{name}/threshold-events",
        "/v1/policies/{name}/threshold-events",
        "/v1/sessions/{name}/delay/computation-intervals",
        "/v1/policies/{name}/delay/computation-intervals",
    ):
        assert {"404", "503"} <= set(paths[path]["get"]["responses"]), path
