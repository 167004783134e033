"""`srv6pm results` against the real controller reading a real InfluxDB 1.8
(srv6pm.lab.servers.InfluxServer) that holds `loss`, `delay` and `flow` points in the schema of
docs/RESULTS.md, written with the line protocol as the collector writes them."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_harness import Controller, Run, build_domain, ok, runner_for, running_controller
from srv6pm.cli.client import Unreachable
from srv6pm.cli.commands import results
from srv6pm.lab.servers import InfluxServer

pytestmark = pytest.mark.slow

PERIOD_NS = 2 * 10**9
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def line(measurement: str, tags: dict[str, str], fields: dict[str, object], t_ns: int) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return f"{v}i"
        if isinstance(v, float):
            return repr(v)
        return '"' + str(v).replace('"', '\\"') + '"'

    tag_part = "".join(f",{k}={v}" for k, v in sorted(tags.items()))
    field_part = ",".join(f"{k}={value(v)}" for k, v in sorted(fields.items()))
    return f"{measurement}{tag_part} {field_part} {t_ns}"


def loss_point(block: int, direction: str, tx: int | None, rx: int | None, reason: str = "") -> str:
    src, dst = ("r1", "r3") if direction == "forward" else ("r3", "r1")
    tags = {
        "session": "s1",
        "policy": "fwd" if direction == "forward" else "rev",
        "direction": direction,
        "src_node": src,
        "dst_node": dst,
    }
    fields: dict[str, object] = {"block": block, "valid": tx is not None, "reason": reason}
    if tx is not None and rx is not None:
        fields |= {"tx": tx, "rx": rx, "lost": tx - rx, "loss_ratio": (tx - rx) / tx}
    return line("loss", tags, fields, block * PERIOD_NS)


def delay_point(block: int, direction: str, p50_us: int) -> str:
    tags = {"session": "s1", "policy": "fwd", "direction": direction}
    tags |= {"src_node": "r1", "dst_node": "r3"}
    us = 1000
    fields: dict[str, object] = {
        "block": block,
        "probes_sent": 10,
        "probes_lost": 0,
        "samples": 10,
        "min_ns": (p50_us - 20) * us,
        "p50_ns": p50_us * us,
        "p90_ns": (p50_us + 50) * us,
        "p99_ns": (p50_us + 150) * us,
        "max_ns": (p50_us + 300) * us,
        "mean_ns": p50_us * us,
        "jitter_ns": 5 * us,
        "valid": True,
        "reason": "",
    }
    return line("delay", tags, fields, block * PERIOD_NS)


def flow_point(block: int, node: str, flow: str, role: str, packets: int) -> str:
    fields: dict[str, object] = {
        "block": block,
        "packets": packets,
        "bytes": packets * 100,
        "flow_mon_id": 1 if flow == "fwd" else 2,
        "valid": True,
        "reason": "",
    }
    return line("flow", {"node": node, "flow": flow, "role": role}, fields, block * PERIOD_NS)


# The measurement: blocks K0..K0+4, a minute ago.
K0 = time.time_ns() // PERIOD_NS - 30
LOSS = {  # block: (forward tx, rx), (reverse tx, rx) or None: could not be measured
    K0: ((1000, 1000), (1000, 1000)),
    K0 + 1: ((1000, 995), (1000, 1000)),
    K0 + 2: ((1000, 1000), None),
    K0 + 3: ((2000, 1990), (2000, 2000)),
    K0 + 4: ((1000, 1000), (1000, 999)),
}
P50_US = {k: 100 + 10 * (k - K0) for k in LOSS}  # two-way; one-way forward on the last 2 blocks


def points() -> list[str]:
    out = []
    for block, (fwd, rev) in LOSS.items():
        out.append(loss_point(block, "forward", *fwd))
        if rev is None:
            out.append(loss_point(block, "reverse", None, None, "no snapshot"))
        else:
            out.append(loss_point(block, "reverse", *rev))
        out.append(delay_point(block, "two_way", P50_US[block]))
        if block >= K0 + 3:
            out.append(delay_point(block, "forward", P50_US[block] // 2))
    for node, role, packets in (("r1", "ingress", 1000), ("r2", "transit", 1000)):
        out.append(flow_point(K0 + 1, node, "fwd", role, packets))
    out.append(flow_point(K0 + 1, "r3", "fwd", "egress", 995))
    for node, role in (("r3", "ingress"), ("r2", "transit"), ("r1", "egress")):
        out.append(flow_point(K0 + 1, node, "rev", role, 1000))
    return out


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxServer]:
    with InfluxServer(tmp_path_factory.mktemp("influxdb")) as server:
        server.create_database("srv6pm")
        reply = httpx.post(
            f"{server.url}/write",
            params={"db": "srv6pm", "precision": "ns"},
            content="\n".join(points()),
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


def row(output: str, first: object) -> list[str]:
    """The cells of the table row whose first cell is `first`."""
    for text in output.splitlines():
        cells = [c.strip() for c in text.strip().strip("│┃").split("│")]
        if cells and cells[0] == str(first):
            return cells
    raise AssertionError(f"no row {first} in\n{output}")


def test_loss_table_has_both_directions_of_every_block(cli: Run) -> None:
    out = ok(cli("results", "loss", "s1", "--since", "10m")).stdout
    assert row(out, K0)[2:11] == ["1000", "1000", "0", "0.000%", "1000", "1000", "0", "0.000%", "-"]
    assert row(out, K0 + 1)[2:10] == ["1000", "995", "5", "0.500%", "1000", "1000", "0", "0.000%"]
    # the reverse direction of K0+2 could not be measured: no numbers, the reason instead
    assert row(out, K0 + 2)[6:11] == ["-", "-", "-", "-", "rev: no snapshot"]
    assert row(out, K0 + 3)[2:6] == ["2000", "1990", "10", "0.500%"]
    assert row(out, K0 + 4)[6:10] == ["1000", "999", "1", "0.100%"]
    assert "5 blocks" in out and "more" not in out


def test_loss_json_is_the_apis_and_pages_on(cli: Run, measured: Controller) -> None:
    page = json.loads(ok(cli("-o", "json", "results", "loss", "s1", "--limit", "2")).stdout)
    assert [i["block"] for i in page["items"]] == [K0, K0 + 1]
    assert page["items"][1]["forward"] == {
        "tx": 1000,
        "rx": 995,
        "lost": 5,
        "loss_ratio": 0.005,
        "valid": True,
        "reason": "",
    }
    assert page["next_after_block"] == K0 + 1

    first = ok(cli("results", "loss", "s1", "--limit", "2")).stdout
    assert f"2 blocks; more: --after-block {K0 + 1}" in first
    rest = ok(cli("results", "loss", "s1", "--limit", "2", "--after-block", str(K0 + 1))).stdout
    assert row(rest, K0 + 2) and row(rest, K0 + 3)
    assert str(K0 + 1) not in rest and str(K0 + 4) not in rest


def test_delay_table_in_microseconds_with_one_way_when_present(cli: Run) -> None:
    out = ok(cli("results", "delay", "s1", "--since", "10m")).stdout
    assert "2w p50 (µs)" in out and "fwd p50 (µs)" in out and "rev p50 (µs)" not in out
    assert row(out, K0)[2:5] == ["100.0", "250.0", "400.0"]
    assert row(out, K0)[5:8] == ["-", "-", "-"]  # no one-way delay for that block
    assert row(out, K0 + 4)[2:8] == ["140.0", "290.0", "440.0", "70.0", "220.0", "370.0"]
    assert row(out, K0 + 4)[8:10] == ["10", "0"]


def test_hops_localise_the_loss_on_its_segment(cli: Run) -> None:
    out = ok(cli("results", "hops", "s1", "--block", str(K0 + 1))).stdout
    assert "r1 [1000] --0--> r2 [1000] --5--> r3 [995]" in out
    assert "forward (policy fwd): 5 lost end to end" in out
    assert row(out, "r2 -> r3")[2] == "5"
    assert row(out, "r1 -> r2")[2] == "0"
    assert "r3 [1000] --0--> r2 [1000] --0--> r1 [1000]" in out
    assert "reverse (policy rev): 0 lost end to end" in out

    hops = json.loads(ok(cli("-o", "json", "results", "hops", "s1", "--block", str(K0 + 1))).stdout)
    forward = hops["directions"][0]
    assert [s["lost"] for s in forward["segments"]] == [0, 5]


def test_watch_refreshes_count_times_then_exits(cli: Run) -> None:
    args = ["results", "watch", "s1", "--interval", "0.1", "--blocks", "3", "--count", "2"]
    out = ok(cli(*args)).stdout
    for block in (K0 + 2, K0 + 3, K0 + 4):
        assert row(out, block)
    assert str(K0 + 1) not in out
    assert row(out, K0 + 3)[2:4] == ["10", "0.500%"]
    assert row(out, K0 + 4)[6:8] == ["140.0", "290.0"]
    assert "Ctrl-C to stop" in out

    lines = ok(cli("-o", "json", *args)).stdout.splitlines()
    assert len(lines) == 2
    assert [b["block"] for b in json.loads(lines[1])["loss"]] == [K0 + 2, K0 + 3, K0 + 4]


def test_watch_ends_with_status_0_on_ctrl_c(monkeypatch: pytest.MonkeyPatch, cli: Run) -> None:
    real_sleep = time.sleep

    def interrupted(seconds: float) -> None:
        if threading.current_thread() is threading.main_thread():  # the CLI, not the server
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", interrupted)
    result = cli("results", "watch", "s1", "--interval", "5")
    assert result.exit_code == 0, result.output
    assert row(result.stdout, K0 + 4)


def test_watch_keeps_going_when_a_refresh_fails(monkeypatch: pytest.MonkeyPatch, cli: Run) -> None:
    real = results.latest
    calls = []

    def flaky(*args: object) -> object:
        calls.append(args)
        if len(calls) == 2:
            raise Unreachable("http://controller", "connection reset")
        return real(*args)

    monkeypatch.setattr(results, "latest", flaky)
    args = ["results", "watch", "s1", "--interval", "0.1", "--count", "3"]
    out = ok(cli(*args)).stdout
    assert len(calls) == 3 and row(out, K0 + 4)  # the third refresh worked again

    calls.clear()
    args[-1] = "2"
    json_mode = ok(cli("-o", "json", *args))
    assert len(json_mode.stdout.splitlines()) == 1
    assert "last refresh failed: cannot reach the controller at http://controller" in (
        json_mode.stderr
    )


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_writes_a_png_of_loss_and_delay(cli: Run, tmp_path: Path) -> None:
    for extra in ([], ["--ratio"]):
        out = tmp_path / f"s1{'-ratio' if extra else ''}.png"
        result = ok(cli("results", "plot", "s1", "--out", str(out), "--since", "10m", *extra))
        assert f"{out}: 5 blocks of session s1" in result.stdout
        data = out.read_bytes()
        assert png_size(data) == (1100, 700)
        assert len(data) > 30_000  # two panels of lines, labels and legends, not an empty canvas


def test_plot_of_an_empty_window_says_so(cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "none.png"
    result = cli("results", "plot", "s1", "--out", str(out), "--since", "2h", "--until", "1h")
    assert result.exit_code == 1
    assert "error: session s1 has no results from 2h to 1h" in result.stderr
    assert not out.exists()
