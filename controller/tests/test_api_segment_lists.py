"""A policy's segment lists, delay histograms and liveness through the REST API, against a real
InfluxDB holding the points the collector itself makes of the records (srv6pm.collector's
points.lines): /v1/sessions/{name}/loss|delay|liveness with and without `segment_list`,
/v1/policies/{name}/loss|delay|liveness. On SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from controller_fleet import INFLUX_DATABASE, NODE_INFO, S1, S2, add_lab, problem
from srv6pm.collector.domain import points
from srv6pm.lab.servers import InfluxServer
from srv6pm.proto.v1 import records_pb2 as pb

pytestmark = pytest.mark.slow

PERIOD_NS = NODE_INFO["period_ns"]
FIRST = time.time_ns() // PERIOD_NS - 600  # 20 minutes ago
BLOCKS = range(FIRST, FIRST + 6)
EDGES = [100_000, 1_000_000]
UP, DOWN = pb.LIVENESS_STATE_UP, pb.LIVENESS_STATE_DOWN
# s1 probes to-h2's segment lists sl0 and sl1 (from r1), s2 probes to-h1's only one (from r3)
LOSS = {  # (session, segment list): forward (tx, rx) per block; reverse loses nothing
    ("s1", "sl0"): lambda k: (100, 100 - k % 3),
    ("s1", "sl1"): lambda k: (40, 40 - (k % 2)),
    ("s2", ""): lambda k: (10, 10),
}
SL1_PROBE_LOST = FIRST + 4  # sl1's loss probe of this block was lost


@pytest.fixture
def influx(influx_server: InfluxServer) -> InfluxServer:
    influx_server.query(f"DROP DATABASE {INFLUX_DATABASE}", INFLUX_DATABASE)
    influx_server.create_database(INFLUX_DATABASE)
    return influx_server


@pytest.fixture
def influx_url(influx: InfluxServer) -> str:
    return influx.url


def labels(session: str, segment_list: str) -> pb.SessionLabels:
    policy = "to-h2" if session == "s1" else "to-h1"
    reflector = "r3" if session == "s1" else "r1"
    return pb.SessionLabels(
        session=session, policy=policy, reflector_node=reflector, segment_list=segment_list
    )


def node(session: str) -> str:
    return "r1" if session == "s1" else "r3"


def block_info(k: int) -> pb.Block:
    return pb.Block(index=k, start_unix_ns=k * PERIOD_NS, period_ns=PERIOD_NS)


def loss_record(session: str, segment_list: str, k: int) -> pb.MeasurementRecord:
    record = pb.LossRecord(
        session=session, block=k, block_info=block_info(k), labels=labels(session, segment_list)
    )
    if (segment_list, k) == ("sl1", SL1_PROBE_LOST):
        record.reason = "probe lost"
    else:
        tx, rx = LOSS.get((session, segment_list), lambda k: (20, 20))(k)
        record.valid = True
        record.forward.CopyFrom(
            pb.DirectionLoss(tx=tx, rx=rx, lost=tx - rx, loss_ratio=(tx - rx) / tx)
        )
        record.reverse.CopyFrom(pb.DirectionLoss(tx=tx, rx=tx, lost=0, loss_ratio=0.0))
    return pb.MeasurementRecord(node=node(session), loss=record)


def bins(k: int, segment_list: str) -> list[int]:
    return [k % 4, 2, 1] if segment_list == "sl0" else [0, 1, k % 3]


def delay_record(session: str, segment_list: str, k: int) -> pb.MeasurementRecord:
    counts = bins(k, segment_list)
    two_way = pb.DelayStats(samples=sum(counts), min_ns=50_000, max_ns=1_500_000)
    record = pb.DelayRecord(
        session=session,
        block=k,
        probes_sent=sum(counts),
        two_way=two_way,
        forward=pb.DelayStats(samples=1, min_ns=1, max_ns=1),
        one_way_reason="",
        block_info=block_info(k),
        labels=labels(session, segment_list),
    )
    if session == "s1":  # s2 has no bin edges: no histogram
        record.histogram_edges_ns.extend(EDGES)
        record.two_way.histogram.extend(counts)
        record.forward.histogram.extend([1, 0, 0])
    record.one_way_reason = "clocks not synchronised" if segment_list == "sl1" else ""
    if segment_list == "sl1":
        record.ClearField("forward")
    return pb.MeasurementRecord(node=node(session), delay=record)


T0 = FIRST * PERIOD_NS + 300_000_000
EVENTS = [  # (session, segment list, at, state, previous, consecutive)
    ("s1", "sl0", T0, UP, 0, 1),
    ("s1", "sl1", T0 + 10**6, UP, 0, 1),
    ("s1", "sl1", T0 + 4 * PERIOD_NS, DOWN, UP, 3),
    ("s1", "sl1", T0 + 5 * PERIOD_NS, UP, DOWN, 2),
    ("s1", "sl0", T0 + 5 * PERIOD_NS + 7, DOWN, UP, 3),
    ("s2", "", T0 + 2, UP, 0, 1),
]


def liveness_record(
    session: str, segment_list: str, at: int, state: int, previous: int, consecutive: int
) -> pb.MeasurementRecord:
    event = pb.LivenessEvent(
        session=session,
        state=state,  # type: ignore[arg-type]
        previous=previous,  # type: ignore[arg-type]
        at_unix_ns=at,
        consecutive=consecutive,
        labels=labels(session, segment_list),
    )
    return pb.MeasurementRecord(node=node(session), liveness=event)


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
    records = [loss_record(s, sl, k) for s, sl in LOSS for k in BLOCKS]
    records += [delay_record(s, sl, k) for s, sl in LOSS for k in BLOCKS]
    records += [liveness_record(*event) for event in EVENTS]
    write(influx, records)
    return admin


def window(**params: int) -> dict[str, int]:
    return {"start": FIRST * PERIOD_NS, "end": (FIRST + len(BLOCKS)) * PERIOD_NS, **params}


def forward(item: dict) -> tuple | None:
    d = item["forward"]
    return (d["tx"], d["rx"], d["lost"]) if d["valid"] else None


def test_a_session_s_loss_has_one_item_per_block_and_segment_list(lab, reader):
    page = reader.get("/v1/sessions/s1/loss", **window()).json()
    assert [(i["block"], i["segment_list"]) for i in page["items"]] == [
        (k, sl) for k in BLOCKS for sl in ("sl0", "sl1")
    ]
    for item in page["items"]:
        k, sl = item["block"], item["segment_list"]
        expected = None if (sl, k) == ("sl1", SL1_PROBE_LOST) else LOSS[("s1", sl)](k)
        assert forward(item) == (
            None if expected is None else (*expected, expected[0] - expected[1])
        )
    only = reader.get("/v1/sessions/s1/loss", segment_list="sl1", **window()).json()["items"]
    assert [(i["block"], i["segment_list"]) for i in only] == [(k, "sl1") for k in BLOCKS]
    assert only[4]["forward"] == {
        "tx": None, "rx": None, "lost": None, "loss_ratio": None,
        "valid": False, "reason": "probe lost",
    }  # fmt: skip
    # a policy's only segment list has no tag: '' selects it
    unnamed = reader.get("/v1/sessions/s2/loss", segment_list="", **window()).json()["items"]
    assert [(i["block"], i["segment_list"]) for i in unnamed] == [(k, "") for k in BLOCKS]
    assert reader.get("/v1/sessions/s2/loss", segment_list="sl0", **window()).json()["items"] == []


def test_a_page_holds_whole_blocks_with_all_their_segment_lists(lab, reader):
    seen, after = [], -1
    while True:
        page = reader.get("/v1/sessions/s1/loss", **window(limit=4, after_block=after)).json()
        assert len({i["block"] for i in page["items"]}) <= 4
        seen += [(i["block"], i["segment_list"]) for i in page["items"]]
        if page["next_after_block"] is None:
            break
        assert page["next_after_block"] == page["items"][-1]["block"]
        after = page["next_after_block"]
    assert seen == [(k, sl) for k in BLOCKS for sl in ("sl0", "sl1")]


def test_loss_intervals_sum_over_segment_lists_or_one(lab, reader):
    both = reader.get("/v1/sessions/s1/loss/intervals", interval="1h", **window()).json()
    valid = [k for k in BLOCKS if k != SL1_PROBE_LOST]
    tx = sum(LOSS[("s1", "sl0")](k)[0] for k in BLOCKS) + 40 * len(valid)
    assert sum(i["tx"] for i in both["items"] if i["direction"] == "forward") == tx
    one = reader.get(
        "/v1/sessions/s1/loss/intervals", interval="1h", segment_list="sl1", **window()
    ).json()
    assert sum(i["tx"] for i in one["items"] if i["direction"] == "forward") == 40 * len(valid)


def test_delay_gives_each_direction_s_histogram_as_edges_and_counts(lab, reader):
    items = reader.get("/v1/sessions/s1/delay", **window()).json()["items"]
    assert [(i["block"], i["segment_list"]) for i in items] == [
        (k, sl) for k in BLOCKS for sl in ("sl0", "sl1")
    ]
    for item in items:
        counts = bins(item["block"], item["segment_list"])
        assert item["two_way"]["histogram"] == {"edges_ns": EDGES, "counts": counts}
        assert item["two_way"]["samples"] == sum(counts)
        if item["segment_list"] == "sl0":
            assert item["forward"]["histogram"] == {"edges_ns": EDGES, "counts": [1, 0, 0]}
        else:
            assert item["forward"]["valid"] is False
            assert item["forward"]["histogram"] is None
    s2 = reader.get("/v1/sessions/s2/delay", **window(limit=1)).json()["items"]
    assert s2[0]["two_way"]["histogram"] is None  # no bin edges, no histogram


def test_a_policy_s_loss_is_each_segment_list_s_and_their_total(lab, reader):
    page = reader.get("/v1/policies/to-h2/loss", **window()).json()
    assert page["policy"] == "to-h2" and page["next_after_block"] is None
    assert [b["block"] for b in page["items"]] == list(BLOCKS)
    for block in page["items"]:
        k = block["block"]
        assert [(i["segment_list"], i["session"]) for i in block["segment_lists"]] == [
            ("sl0", "s1"),
            ("sl1", "s1"),
        ]
        parts = [LOSS[("s1", "sl0")](k)]
        if k != SL1_PROBE_LOST:
            parts.append(LOSS[("s1", "sl1")](k))
        tx, rx = sum(p[0] for p in parts), sum(p[1] for p in parts)
        assert block["total"]["forward"] == {
            "tx": tx,
            "rx": rx,
            "lost": tx - rx,
            "loss_ratio": pytest.approx((tx - rx) / tx),
            "segment_lists": len(parts),
            "not_measured": [] if k != SL1_PROBE_LOST else ["sl1"],
        }
        assert block["total"]["reverse"]["lost"] == 0
    # the other policy: its only segment list, '' (s2 measures to-h1)
    other = reader.get("/v1/policies/to-h1/loss", **window(limit=2)).json()
    assert [
        (b["block"], [i["segment_list"] for i in b["segment_lists"]]) for b in other["items"]
    ] == [
        (FIRST, [""]),
        (FIRST + 1, [""]),
    ]
    assert other["next_after_block"] == FIRST + 1
    assert other["items"][0]["total"]["forward"]["tx"] == 10


def test_a_policy_s_delay_is_each_segment_list_s(lab, reader):
    page = reader.get("/v1/policies/to-h2/delay", segment_list="sl0", **window()).json()
    assert [len(b["segment_lists"]) for b in page["items"]] == [1] * len(BLOCKS)
    first = page["items"][0]["segment_lists"][0]
    assert (first["session"], first["segment_list"]) == ("s1", "sl0")
    assert first["two_way"]["histogram"]["counts"] == bins(FIRST, "sl0")


def change(i: int) -> dict:
    session, segment_list, at, state, previous, consecutive = EVENTS[i]
    names = {UP: "up", DOWN: "down"}
    return {
        "at_ns": at,
        "session": session,
        "segment_list": segment_list,
        "src_node": node(session),
        "dst_node": "r3" if session == "s1" else "r1",
        "state": names[state],
        "previous": names.get(previous),
        "consecutive": consecutive,
    }


def test_a_session_s_liveness_is_its_state_now_and_its_changes(lab, reader):
    body = reader.get("/v1/sessions/s1/liveness", **window()).json()
    assert body == {
        "session": "s1",
        "current": [change(4), change(3)],  # sl0 down since its last change, sl1 up again
        "changes": [change(0), change(1), change(2), change(3), change(4)],
        "next_start": None,
    }
    one = reader.get("/v1/sessions/s1/liveness", segment_list="sl1", **window(limit=2)).json()
    assert one["current"] == [change(3)]
    assert one["changes"] == [change(1), change(2)]
    assert one["next_start"] == EVENTS[3][2]  # the next page starts at the next change
    rest = reader.get(
        "/v1/sessions/s1/liveness", segment_list="sl1", start=one["next_start"], end=window()["end"]
    ).json()
    assert rest["changes"] == [change(3)] and rest["next_start"] is None
    # the state now is the last change, however old; the range is for the changes only
    later = (FIRST + 100) * PERIOD_NS
    old = reader.get("/v1/sessions/s1/liveness", start=later, end=later + PERIOD_NS).json()
    assert old["current"] == [change(4), change(3)] and old["changes"] == []


def test_a_policy_s_liveness_lists_every_segment_list(lab, reader):
    body = reader.get("/v1/policies/to-h2/liveness", **window()).json()
    assert body["policy"] == "to-h2"
    assert [(c["segment_list"], c["state"]) for c in body["current"]] == [
        ("sl0", "down"),
        ("sl1", "up"),
    ]
    assert len(body["changes"]) == 5
    other = reader.get("/v1/policies/to-h1/liveness", **window()).json()
    assert other["current"] == [change(5)] and other["changes"] == [change(5)]


def test_a_segment_list_without_liveness_has_no_state(lab, reader):
    assert reader.get("/v1/sessions/s1/liveness", segment_list="sl9").json() == {
        "session": "s1",
        "current": [],
        "changes": [],
        "next_start": None,
    }


def test_unknown_sessions_and_policies_are_not_found(lab, reader):
    for path, what in (
        ("/v1/sessions/nope/liveness", "session"),
        ("/v1/policies/nope/liveness", "policy"),
        ("/v1/policies/nope/loss", "policy"),
        ("/v1/policies/nope/delay", "policy"),
    ):
        assert problem(reader.get(path), 404)["detail"] == f"{what} nope does not exist"


def test_bad_queries_name_the_field(lab, reader):
    for path, field in (
        ("/v1/sessions/s1/liveness?limit=0", "query.limit"),
        ("/v1/policies/to-h2/loss?after_block=-2", "query.after_block"),
        ("/v1/policies/to-h2/liveness?start=-1", "query.start"),
        (f"/v1/sessions/s1/loss?segment_list={'x' * 257}", "query.segment_list"),
    ):
        body = problem(reader.get(path), 422)
        assert field in {e["field"] for e in body["errors"]}, path


@pytest.fixture
def stopped(influx: InfluxServer) -> Iterator[InfluxServer]:
    influx.stop()
    try:
        yield influx
    finally:
        influx.start()


def test_liveness_and_policy_results_are_503_problems_while_influxdb_is_down(lab, reader, stopped):
    for path in (
        "/v1/sessions/s1/liveness",
        "/v1/policies/to-h2/liveness",
        "/v1/policies/to-h2/loss",
        "/v1/policies/to-h2/delay",
    ):
        body = problem(reader.get(path), 503)
        assert body["title"] == "Results unavailable"


def test_a_session_s_senders_per_segment_list_are_its_results(lab, reader, influx):
    """A session probing several segment lists has a sender per segment list on its node,
    named "<session>/<segment list>": their points are the session's."""
    record = loss_record("s1", "sl2", FIRST)
    record.loss.session = record.loss.labels.session = "s1/sl2"
    event = liveness_record("s1", "sl2", T0 + 9, DOWN, UP, 4)
    event.liveness.session = event.liveness.labels.session = "s1/sl2"
    other = loss_record("s1", "sl3", FIRST)
    other.loss.session = other.loss.labels.session = "s10/sl3"  # another session's sender
    write(influx, [record, event, other])
    items = reader.get("/v1/sessions/s1/loss", **window(limit=1)).json()["items"]
    assert [i["segment_list"] for i in items] == ["sl0", "sl1", "sl2"]
    body = reader.get("/v1/sessions/s1/liveness", segment_list="sl2", **window()).json()
    assert [(c["session"], c["state"]) for c in body["current"]] == [("s1/sl2", "down")]
