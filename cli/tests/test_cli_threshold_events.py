"""`srv6pm thresholds session|policy` and `srv6pm results delay --computation-intervals` against
the real controller reading a real InfluxDB 1.8 that holds the points the collector makes of the
records (srv6pm.collector's points.lines)."""

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
HALF = PERIOD_NS // 2
T0 = K0 * PERIOD_NS + 250_000_000
EVENTS = [  # segment list, metric, at, value, reference, accelerated
    ("sl0", "two_way_mean", T0, 1_000_000, 0, False),
    ("sl0", "two_way_mean", T0 + 3_000, 1_500_000, 1_000_000, True),
    ("sl1", "jitter", T0 + HALF, 20_000, 0, False),
    ("sl0", "two_way_mean", T0 + PERIOD_NS, 900_000, 1_500_000, False),
]


def labels(segment_list: str) -> pb.SessionLabels:
    return pb.SessionLabels(
        session="s1", policy="fwd", reflector_node="r3", segment_list=segment_list
    )


def records() -> list[pb.MeasurementRecord]:
    out = []
    for segment_list, metric, at, value, reference, accelerated in EVENTS:
        event = pb.ThresholdEvent(
            session="s1",
            metric=metric,
            value_ns=value,
            reference_ns=reference,
            first=not reference,
            accelerated=accelerated,
            at_unix_ns=at,
            labels=labels(segment_list),
        )
        out.append(pb.MeasurementRecord(node="r1", threshold=event))
    for i in range(4):  # two blocks of two computation intervals, sl0 only
        k = K0 + i // 2
        delay = pb.DelayRecord(
            session="s1",
            block=k,
            probes_sent=5,
            two_way=pb.DelayStats(samples=5, p50_ns=200_000 + i, p99_ns=400_000, max_ns=450_000),
            one_way_reason="clocks not synchronised",
            block_info=pb.Block(index=k, start_unix_ns=k * PERIOD_NS, period_ns=PERIOD_NS),
            labels=labels("sl0"),
            interval_start_unix_ns=K0 * PERIOD_NS + i * HALF,
            interval_ns=HALF,
        )
        out.append(pb.MeasurementRecord(node="r1", delay=delay))
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


def cells(output: str, column: int, value: str) -> list[list[str]]:
    """The cells of every table row whose `column`-th cell is `value`."""
    found = []
    for text in output.splitlines():
        row = [c.strip() for c in text.strip().strip("│┃").split("│")]
        if len(row) > column and row[column] == value:
            found.append(row)
    assert found, f"no row with {value} in\n{output}"
    return found


def test_threshold_events_show_each_metric_s_last_report_and_the_crossings(cli: Run) -> None:
    out = ok(cli("thresholds", "session", "s1", "--since", "10m")).stdout
    assert "last reported" in out and "4 events" in out
    means = cells(out, 3, "two_way_mean")
    assert [r[2] for r in means] == ["sl0", "sl0", "sl0", "sl0"]  # the last, then 3 events
    assert means[0][4:8] == ["900.0", "1500.0", "-600.0 (-40%)", "interval"]
    assert means[2][4:8] == ["1500.0", "1000.0", "+500.0 (+50%)", "burst"]
    assert cells(out, 3, "jitter")[0][5:7] == ["-", "first"]
    body = json.loads(
        ok(cli("-o", "json", "thresholds", "policy", "fwd", "--metric", "jitter")).stdout
    )
    assert [(e["segment_list"], e["value_ns"]) for e in body["events"]] == [("sl1", 20_000)]
    paged = ok(cli("thresholds", "session", "s1", "--since", "10m", "--limit", "2")).stdout
    assert "2 events; more: --since" in paged
    bad = cli("thresholds", "session", "s1", "--metric", "p95")
    assert bad.exit_code == 2 and "p95" in bad.output
    # the objectives keep their commands
    assert "set" in ok(cli("thresholds", "--help")).stdout


def test_delay_per_computation_interval_has_a_row_per_interval(cli: Run) -> None:
    out = ok(cli("results", "delay", "s1", "--computation-intervals", "--since", "10m")).stdout
    rows = cells(out, 1, "1000.0")
    assert [r[2] for r in rows] == [str(K0), str(K0), str(K0 + 1), str(K0 + 1)]
    assert [r[3:5] for r in rows] == [["sl0", "200.0"]] * 4
    assert "4 intervals" in out
    paged = ok(
        cli("results", "delay", "s1", "--computation-intervals", "--since", "10m", "--limit", "3")
    ).stdout
    assert "3 intervals; more: --since" in paged
    more = paged.split("--since ")[-1].split()[0]
    rest = json.loads(
        ok(
            cli("-o", "json", "results", "delay", "s1", "--computation-intervals", "--since", more)
        ).stdout
    )
    assert [i["start_ns"] for i in rest["items"]] == [K0 * PERIOD_NS + 3 * HALF]
