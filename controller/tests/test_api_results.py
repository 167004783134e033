"""/v1/sessions/{name}/loss, /loss/intervals, /delay and /hops against a real InfluxDB holding
points in the collector's schema (docs/RESULTS.md, "InfluxDB"), written with the line protocol;
503 problem details while InfluxDB is down. On SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from controller_fleet import INFLUX_DATABASE, NODE_INFO, S1, S2, add_lab, problem
from srv6pm.controller.adapters.sql.tables import NodeRow
from srv6pm.lab.servers import InfluxServer

pytestmark = pytest.mark.slow

PERIOD_NS = NODE_INFO["period_ns"]
BLOCKS_PER_MINUTE = 60 * 10**9 // PERIOD_NS
FIRST = (time.time_ns() - 30 * 60 * 10**9) // (60 * 10**9) * BLOCKS_PER_MINUTE  # a minute's start
N = BLOCKS_PER_MINUTE + 10  # a minute and 10 blocks more
INVALID = FIRST + 7  # the probe of this block was lost
BLOCKS = range(FIRST, FIRST + N)


def forward_lost(block: int) -> int:
    return block % 3


def reverse_lost(block: int) -> int:
    return 1 if block % 5 == 0 else 0


@pytest.fixture
def influx(influx_server: InfluxServer) -> InfluxServer:
    """The session's InfluxDB with an empty srv6pm database."""
    influx_server.query(f"DROP DATABASE {INFLUX_DATABASE}", INFLUX_DATABASE)
    influx_server.create_database(INFLUX_DATABASE)
    return influx_server


@pytest.fixture
def influx_url(influx: InfluxServer) -> str:
    return influx.url


def tags(**values: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(values.items()))


def write(server: InfluxServer, lines: list[str]) -> None:
    reply = httpx.post(
        f"{server.url}/write",
        params={"db": INFLUX_DATABASE, "precision": "ns"},
        content="\n".join(lines).encode(),
        timeout=30,
    )
    assert reply.status_code == 204, reply.text


def loss_lines(session: str, policy: str, src: str, dst: str, blocks: range) -> list[str]:
    lines = []
    for block in blocks:
        for direction, tx, lost in (
            ("forward", 100, forward_lost(block)),
            ("reverse", 50, reverse_lost(block)),
        ):
            series = "loss," + tags(
                session=session, policy=policy, direction=direction, src_node=src, dst_node=dst
            )
            if block == INVALID:
                fields = f'block={block}i,reason="probe lost",valid=false'
            else:
                fields = (
                    f"block={block}i,loss_ratio={lost / tx!r},lost={lost}i,"
                    f'reason="",rx={tx - lost}i,tx={tx}i,valid=true'
                )
            lines.append(f"{series} {fields} {block * PERIOD_NS}")
    return lines


def delay_lines(session: str, blocks: range) -> list[str]:
    lines = []
    for block in blocks:
        probes = "probes_lost=0i,probes_sent=1i"
        for direction in ("two_way", "forward", "reverse"):
            series = "delay," + tags(
                session=session, policy="to-h2", direction=direction, src_node="r1", dst_node="r3"
            )
            if direction == "two_way":
                fields = (
                    f"block={block}i,jitter_ns=10i,max_ns={block % 1000 + 500}i,mean_ns=400i,"
                    f"min_ns=300i,p50_ns=400i,p90_ns=450i,p99_ns={block % 1000 + 490}i,{probes},"
                    'reason="",samples=1i,valid=true'
                )
            else:
                fields = f'block={block}i,{probes},reason="clocks not synchronised",valid=false'
            lines.append(f"{series} {fields} {block * PERIOD_NS}")
    return lines


def flow_line(node: str, flow: str, role: str, block: int, packets: int | None) -> str:
    series = "flow," + tags(node=node, flow=flow, role=role)
    if packets is None:
        fields = f'block={block}i,flow_mon_id=1i,reason="no baseline",valid=false'
    else:
        fields = (
            f"block={block}i,bytes={packets * 100}i,flow_mon_id=1i,packets={packets}i,"
            'reason="",valid=true'
        )
    return f"{series} {fields} {block * PERIOD_NS}"


@pytest.fixture
def lab(admin, influx):
    add_lab(admin, (S1, S2))
    write(influx, loss_lines("s1", "to-h2", "r1", "r3", BLOCKS))
    write(influx, loss_lines("s2", "to-h1", "r3", "r1", range(FIRST + 3, FIRST + 5)))
    write(influx, delay_lines("s1", BLOCKS))
    return admin


def window(**params: int) -> dict[str, int]:
    """The whole test's time range (explicit: the default, the last hour, is tested once)."""
    return {"start": FIRST * PERIOD_NS, "end": (FIRST + N) * PERIOD_NS, **params}


def expected_loss(block: int) -> dict:
    if block == INVALID:
        invalid = {
            "tx": None,
            "rx": None,
            "lost": None,
            "loss_ratio": None,
            "valid": False,
            "reason": "probe lost",
        }
        return {
            "block": block,
            "start_ns": block * PERIOD_NS,
            "segment_list": "",
            "forward": invalid,
            "reverse": invalid,
        }
    out = {"block": block, "start_ns": block * PERIOD_NS, "segment_list": ""}
    for direction, tx, lost in (
        ("forward", 100, forward_lost(block)),
        ("reverse", 50, reverse_lost(block)),
    ):
        out[direction] = {
            "tx": tx,
            "rx": tx - lost,
            "lost": lost,
            "loss_ratio": lost / tx,
            "valid": True,
            "reason": "",
        }
    return out


def test_loss_pairs_both_directions_of_each_block_oldest_first(lab, reader):
    page = reader.get("/v1/sessions/s1/loss", **window(limit=1000)).json()
    assert page == {
        "session": "s1",
        "items": [expected_loss(b) for b in BLOCKS],
        "next_after_block": None,
    }
    # the default range is the last hour
    assert reader.get("/v1/sessions/s1/loss", limit=1000).json() == page
    other = reader.get("/v1/sessions/s2/loss", **window()).json()["items"]
    assert [b["block"] for b in other] == [FIRST + 3, FIRST + 4]


def test_loss_is_read_a_page_at_a_time(lab, reader):
    seen, after, pages = [], -1, 0
    while True:
        page = reader.get("/v1/sessions/s1/loss", **window(limit=16, after_block=after)).json()
        pages += 1
        seen += page["items"]
        if page["next_after_block"] is None:
            break
        assert page["next_after_block"] == page["items"][-1]["block"]
        after = page["next_after_block"]
    assert [b["block"] for b in seen] == list(BLOCKS)
    assert seen == [expected_loss(b) for b in BLOCKS]
    assert pages == -(-N // 16)  # ceil; a last full page would be followed by an empty one
    assert (
        reader.get("/v1/sessions/s1/loss", **window(after_block=FIRST + N - 1)).json()["items"]
        == []
    )


def test_loss_is_read_over_a_time_range(lab, reader):
    start, end = (FIRST + 2) * PERIOD_NS, (FIRST + 5) * PERIOD_NS
    items = reader.get("/v1/sessions/s1/loss", start=start, end=end).json()["items"]
    assert [b["block"] for b in items] == [FIRST + 2, FIRST + 3, FIRST + 4]
    assert reader.get("/v1/sessions/s1/loss", start=start, end=start).json()["items"] == []
    old = (FIRST - 10_000) * PERIOD_NS
    assert reader.get("/v1/sessions/s1/loss", start=old, end=old + PERIOD_NS).json() == {
        "session": "s1",
        "items": [],
        "next_after_block": None,
    }


def test_loss_is_summed_per_interval_and_direction(lab, reader):
    reply = reader.get("/v1/sessions/s1/loss/intervals", interval="1m", **window()).json()
    assert (reply["session"], reply["interval"]) == ("s1", "1m")
    minutes = [BLOCKS[:BLOCKS_PER_MINUTE], BLOCKS[BLOCKS_PER_MINUTE:]]
    expected = []
    for minute in minutes:
        valid = [b for b in minute if b != INVALID]
        for direction, tx, lost in (("forward", 100, forward_lost), ("reverse", 50, reverse_lost)):
            lost_sum = sum(lost(b) for b in valid)
            expected.append(
                {
                    "start_ns": minute[0] * PERIOD_NS,
                    "direction": direction,
                    "blocks": len(minute),
                    "valid_blocks": len(valid),
                    "tx": tx * len(valid),
                    "rx": tx * len(valid) - lost_sum,
                    "lost": lost_sum,
                    "loss_ratio": pytest.approx(lost_sum / (tx * len(valid))),
                }
            )
    assert reply["items"] == expected
    hourly = reader.get("/v1/sessions/s1/loss/intervals", **window()).json()
    assert hourly["interval"] == "1h"
    assert sum(i["blocks"] for i in hourly["items"]) == 2 * N
    problem(reader.get("/v1/sessions/s1/loss/intervals", interval="2m"), 422)


def test_delay_per_block_has_two_way_statistics_and_says_why_one_way_is_missing(lab, reader):
    page = reader.get("/v1/sessions/s1/delay", **window(limit=5)).json()
    assert page["next_after_block"] == FIRST + 4
    first = page["items"][0]
    assert first["block"] == FIRST
    assert first["start_ns"] == FIRST * PERIOD_NS
    assert first["two_way"] == {
        "probes_sent": 1,
        "probes_lost": 0,
        "samples": 1,
        "min_ns": 300,
        "p50_ns": 400,
        "p90_ns": 450,
        "p99_ns": FIRST % 1000 + 490,
        "max_ns": FIRST % 1000 + 500,
        "mean_ns": 400,
        "jitter_ns": 10,
        "valid": True,
        "reason": "",
        "histogram": None,
    }
    for direction in ("forward", "reverse"):
        assert first[direction]["valid"] is False
        assert first[direction]["reason"] == "clocks not synchronised"
        assert first[direction]["p99_ns"] is None
    rest = reader.get("/v1/sessions/s1/delay", **window(limit=1000, after_block=FIRST + 4)).json()
    assert [b["block"] for b in page["items"] + rest["items"]] == list(BLOCKS)
    assert rest["next_after_block"] is None


def set_info(store, *nodes: str) -> None:
    with store.write() as db:
        for node in nodes:
            db.get(NodeRow, node).info = dict(NODE_INFO)


def test_hops_localise_a_block_s_loss_per_segment_in_path_order(lab, reader, influx, store):
    set_info(store, "r1", "r2", "r3")
    block = FIRST + 11
    write(
        influx,
        [
            flow_line("r1", "to-h2", "ingress", block, 100),
            flow_line("r2", "to-h2", "transit", block, 97),
            flow_line("r3", "to-h2", "egress", block, 95),
            flow_line("r3", "to-h1", "ingress", block, 50),
            # r2 has no record of to-h1 in this block; r1 could not count it
            flow_line("r1", "to-h1", "egress", block, None),
            # other blocks are not this block
            flow_line("r2", "to-h1", "transit", block + 1, 49),
            flow_line("r2", "to-h2", "transit", block - 1, 1),
        ],
    )
    assert (
        reader.get(
            "/v1/sessions/s1",
        ).json()["period_s"]
        == 2.0
    )
    hops = reader.get("/v1/sessions/s1/hops", block=block).json()
    assert hops == {
        "session": "s1",
        "block": block,
        "directions": [
            {
                "direction": "forward",
                "policy": "to-h2",
                "path": ["r1", "r2", "r3"],
                "counts": [
                    {"node": "r1", "packets": 100, "reason": ""},
                    {"node": "r2", "packets": 97, "reason": ""},
                    {"node": "r3", "packets": 95, "reason": ""},
                ],
                "segments": [
                    {"src": "r1", "dst": "r2", "lost": 3},
                    {"src": "r2", "dst": "r3", "lost": 2},
                ],
                "end_to_end": 5,
            },
            {
                "direction": "reverse",
                "policy": "to-h1",
                "path": ["r3", "r2", "r1"],
                "counts": [
                    {"node": "r3", "packets": 50, "reason": ""},
                    {"node": "r2", "packets": None, "reason": "no record"},
                    {"node": "r1", "packets": None, "reason": "no baseline"},
                ],
                "segments": [
                    {"src": "r3", "dst": "r2", "lost": None},
                    {"src": "r2", "dst": "r1", "lost": None},
                ],
                "end_to_end": None,
            },
        ],
    }
    # s2 measures the same two policies the other way round
    s2 = reader.get("/v1/sessions/s2/hops", block=block).json()["directions"]
    assert [d["policy"] for d in s2] == ["to-h1", "to-h2"]
    assert s2[1]["segments"] == hops["directions"][0]["segments"]


def test_hops_are_found_by_block_before_the_period_is_known(lab, reader, influx):
    block = FIRST + 20
    write(
        influx,
        [
            flow_line("r1", "to-h2", "ingress", block, 10),
            flow_line("r3", "to-h2", "egress", block, 10),
            flow_line("r1", "to-h2", "ingress", block + 1, 99),
        ],
    )
    assert reader.get("/v1/sessions/s1").json()["period_s"] is None
    forward = reader.get("/v1/sessions/s1/hops", block=block).json()["directions"][0]
    assert [c["packets"] for c in forward["counts"]] == [10, None, 10]
    assert forward["end_to_end"] == 0


def test_hops_of_a_block_nothing_counted_are_all_unknown(lab, reader, store):
    set_info(store, "r1")
    hops = reader.get("/v1/sessions/s1/hops", block=FIRST).json()
    for direction in hops["directions"]:
        assert {c["packets"] for c in direction["counts"]} == {None}
        assert {c["reason"] for c in direction["counts"]} == {"no record"}
        assert direction["end_to_end"] is None


def test_results_of_unknown_sessions_are_not_found(lab, reader):
    for path in ("loss", "loss/intervals", "delay", "hops?block=1"):
        assert problem(reader.get(f"/v1/sessions/nope/{path}"), 404)["detail"] == (
            "session nope does not exist"
        )


def test_bad_result_queries_name_the_field(lab, reader):
    for path, field in (
        ("hops", "query.block"),
        ("hops?block=-1", "query.block"),
        ("loss?limit=0", "query.limit"),
        ("loss?limit=10001", "query.limit"),
        ("loss?after_block=-2", "query.after_block"),
        ("delay?start=-1", "query.start"),
        ("loss/intervals?interval=1w", "query.interval"),
    ):
        body = problem(reader.get(f"/v1/sessions/s1/{path}"), 422)
        assert field in {e["field"] for e in body["errors"]}, path


def test_thresholds_are_evaluated_on_the_blocks_influxdb_holds(lab, services):
    lab.ok("PUT", "/v1/sessions/s1/threshold", {"loss_ratio_max": 0.015, "window_blocks": 3})
    lab.ok("PUT", "/v1/sessions/s2/threshold", {"loss_ratio_max": 0.5})
    services.thresholds.evaluate()
    s1 = lab.ok("GET", "/v1/sessions/s1/threshold")
    # the last 3 blocks lose 0, 1 and 2 of 100 forward: 0.02 > 0.015, in the block named
    (worst,) = [b for b in BLOCKS[-3:] if forward_lost(b) == 2]
    at = datetime.fromtimestamp(worst * PERIOD_NS // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert s1["state"] == "violated"
    assert s1["detail"] == (
        f"forward loss ratio 0.02 > 0.015 in the block at {at} (worst of the last 3 blocks)"
    )
    assert s1["since"] is not None
    s2 = lab.ok("GET", "/v1/sessions/s2/threshold")
    assert (s2["state"], s2["detail"]) == ("ok", "")


@pytest.fixture
def stopped(influx: InfluxServer) -> Iterator[InfluxServer]:
    influx.stop()
    try:
        yield influx
    finally:
        influx.start()


def test_results_are_503_problems_while_influxdb_is_down(lab, reader, store, stopped):
    set_info(store, "r1")
    for path in ("loss", "loss/intervals", "delay", "hops?block=1"):
        body = problem(reader.get(f"/v1/sessions/s1/{path}"), 503)
        assert body["title"] == "Results unavailable"
        assert stopped.url.removeprefix("http://") in body["detail"]
    # the desired state is still served
    assert reader.get("/v1/sessions/s1").status_code == 200
