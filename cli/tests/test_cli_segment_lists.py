"""`srv6pm results` per segment list (with the delay histogram), `srv6pm results policy` and
`srv6pm liveness` against the real controller reading a real InfluxDB 1.8 that holds the points
the collector makes of the records (srv6pm.collector's points.lines)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from cli_harness import Controller, Run, build_domain, ok, runner_for, running_controller
from srv6pm.collector.domain import points
from srv6pm.lab.servers import InfluxServer
from srv6pm.proto.v1 import records_pb2 as pb

pytestmark = pytest.mark.slow

PERIOD_NS = 2 * 10**9
K0 = time.time_ns() // PERIOD_NS - 30  # a minute ago
BLOCKS = (K0, K0 + 1)
EDGES = [100_000, 500_000]
LOSS = {("sl0", K0): (1000, 990), ("sl0", K0 + 1): (1000, 1000), ("sl1", K0): (500, 499)}
HISTOGRAMS = {("sl0", K0): [1, 7, 2], ("sl0", K0 + 1): [0, 10, 0]}  # sl1: no edges
T0 = K0 * PERIOD_NS + 250_000_000


def labels(segment_list: str) -> pb.SessionLabels:
    return pb.SessionLabels(
        session="s1", policy="fwd", reflector_node="r3", segment_list=segment_list
    )


def info(k: int) -> pb.Block:
    return pb.Block(index=k, start_unix_ns=k * PERIOD_NS, period_ns=PERIOD_NS)


def records() -> list[pb.MeasurementRecord]:
    out = []
    for segment_list in ("sl0", "sl1"):
        for k in BLOCKS:
            loss = pb.LossRecord(
                session="s1", block=k, block_info=info(k), labels=labels(segment_list)
            )
            if (segment_list, k) in LOSS:
                tx, rx = LOSS[(segment_list, k)]
                loss.valid = True
                loss.forward.CopyFrom(
                    pb.DirectionLoss(tx=tx, rx=rx, lost=tx - rx, loss_ratio=(tx - rx) / tx)
                )
                loss.reverse.CopyFrom(pb.DirectionLoss(tx=tx, rx=tx, lost=0, loss_ratio=0.0))
            else:
                loss.reason = "probe lost"
            out.append(pb.MeasurementRecord(node="r1", loss=loss))
            counts = HISTOGRAMS.get((segment_list, k), [])
            two_way = pb.DelayStats(
                samples=sum(counts) or 10, p50_ns=200_000, p99_ns=400_000, max_ns=450_000
            )
            two_way.histogram.extend(counts)
            delay = pb.DelayRecord(
                session="s1",
                block=k,
                probes_sent=10,
                two_way=two_way,
                one_way_reason="clocks not synchronised",
                block_info=info(k),
                labels=labels(segment_list),
                histogram_edges_ns=EDGES if counts else [],
            )
            out.append(pb.MeasurementRecord(node="r1", delay=delay))
    for segment_list, at, state, previous, consecutive in (
        ("sl0", T0, pb.LIVENESS_STATE_UP, 0, 1),
        ("sl1", T0 + 1, pb.LIVENESS_STATE_UP, 0, 1),
        ("sl1", T0 + PERIOD_NS, pb.LIVENESS_STATE_DOWN, pb.LIVENESS_STATE_UP, 3),
    ):
        event = pb.LivenessEvent(
            session="s1",
            state=state,  # type: ignore[arg-type]
            previous=previous,  # type: ignore[arg-type]
            at_unix_ns=at,
            consecutive=consecutive,
            labels=labels(segment_list),
        )
        out.append(pb.MeasurementRecord(node="r1", liveness=event))
    return out


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxServer]:
    with InfluxServer(tmp_path_factory.mktemp("influxdb")) as server:
        server.create_database("srv6pm")
        lines = [line for record in records() for line in points.lines(record)]
        reply = httpx.post(
            f"{server.url}/write",
            params={"db": "srv6pm", "precision": "ns"},
            content="\n".join(lines),
        )
        assert reply.status_code == 204, reply.text
        yield server


@pytest.fixture(scope="module")
def measured(
    influx: InfluxServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running_controller(tmp_path_factory.mktemp("controller"), influx.url) as c:
        build_domain(runner_for(c))
        yield c


@pytest.fixture
def cli(measured: Controller) -> Run:
    return runner_for(measured)


def rows(output: str, first: object) -> list[list[str]]:
    """The cells of every table row whose first cell is `first`."""
    found = []
    for text in output.splitlines():
        cells = [c.strip() for c in text.strip().strip("│┃").split("│")]
        if cells and cells[0] == str(first):
            found.append(cells)
    assert found, f"no row {first} in\n{output}"
    return found


def test_loss_has_a_row_per_segment_list_and_filters_one(cli: Run) -> None:
    out = ok(cli("results", "loss", "s1", "--since", "10m")).stdout
    assert "segment list" in out
    assert [r[2:7] for r in rows(out, K0)] == [
        ["sl0", "1000", "990", "10", "1.000%"],
        ["sl1", "500", "499", "1", "0.200%"],
    ]
    assert rows(out, K0 + 1)[1][2:4] == ["sl1", "-"]
    assert rows(out, K0 + 1)[1][-1].startswith("fwd: probe lost")  # the reasons, folded
    one = json.loads(ok(cli("-o", "json", "results", "loss", "s1", "--segment-list", "sl1")).stdout)
    assert [(i["block"], i["segment_list"]) for i in one["items"]] == [(K0, "sl1"), (K0 + 1, "sl1")]


def test_delay_shows_the_histogram_counts_and_its_bins(cli: Run) -> None:
    out = ok(cli("results", "delay", "s1", "--since", "10m")).stdout
    assert "2w bins" in out
    assert "2w bins: <100, 100-500, ≥500 µs" in out
    sl0, sl1 = rows(out, K0)
    assert sl0[2] == "sl0" and "1 7 2" in sl0
    assert sl1[2] == "sl1" and "1 7 2" not in sl1
    assert "0 10 0" in rows(out, K0 + 1)[0]
    body = json.loads(ok(cli("-o", "json", "results", "delay", "s1", "--limit", "1")).stdout)
    assert body["items"][0]["two_way"]["histogram"] == {"edges_ns": EDGES, "counts": [1, 7, 2]}


def test_policy_loss_has_each_segment_list_and_the_total(cli: Run) -> None:
    out = ok(cli("results", "policy", "fwd", "--since", "10m")).stdout
    assert [r[2:7] for r in rows(out, K0)] == [
        ["sl0", "1000", "990", "10", "1.000%"],
        ["sl1", "500", "499", "1", "0.200%"],
        ["total", "1500", "1489", "11", "0.733%"],
    ]
    # sl1 could not be measured in K0+1: the total lacks it, and says so
    total = rows(out, K0 + 1)[-1]
    assert total[2:7] == ["total", "1000", "1000", "0", "0.000%"]
    assert total[-1].startswith("fwd: without sl1")
    body = json.loads(ok(cli("-o", "json", "results", "policy", "fwd")).stdout)
    assert body["items"][0]["total"]["forward"]["tx"] == 1500
    delay = ok(cli("results", "policy", "fwd", "--delay", "--since", "10m")).stdout
    assert [r[2] for r in rows(delay, K0)] == ["sl0", "sl1"]


def test_liveness_shows_each_segment_list_now_and_the_changes(cli: Run) -> None:
    out = ok(cli("liveness", "session", "s1", "--since", "10m")).stdout
    now = {r[1]: r[2] for r in rows(out, "s1")}
    assert now == {"sl0": "up", "sl1": "down"}
    body = json.loads(ok(cli("-o", "json", "liveness", "policy", "fwd", "--since", "10m")).stdout)
    assert [(c["segment_list"], c["previous"], c["state"]) for c in body["changes"]] == [
        ("sl0", None, "up"),
        ("sl1", None, "up"),
        ("sl1", "up", "down"),
    ]
    assert "3 changes" in out
    paged = ok(cli("liveness", "session", "s1", "--since", "10m", "--limit", "2")).stdout
    assert "2 changes; more: --since" in paged
    none = ok(cli("liveness", "session", "s1", "--segment-list", "sl9")).stdout
    assert "no liveness state" in none
