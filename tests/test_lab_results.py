"""Results leave the node and lose nothing: a real lab whose node managers journal their records
and publish them to a real Kafka broker, a real collector, a real InfluxDB. Every block must be
in InfluxDB exactly once per direction, with exactly the injected loss, and every node's count of
each flow (the per-hop view), across crashes and outages of every part."""

from __future__ import annotations

import time

import pytest
from conftest import PERIOD_S, running_lab
from srv6pm.lab import scenario
from srv6pm.lab.pipeline import ResultsPipeline
from srv6pm.lab.scenario import FORWARD, FORWARD_SIDS, H1, H2, REVERSE, REVERSE_SIDS, SESSION
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]
WAIT_S = 20.0


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    with ResultsPipeline(tmp_path_factory.mktemp("pipeline")) as running:
        yield running


@pytest.fixture(scope="module")
def results_lab(request, pipeline):
    with running_lab(request, pb.MARKING_MODE_ALTMARK, pipeline.node_manager_settings) as lab:
        scenario.apply_states(lab, scenario.stamp_states(lab))
        yield lab


def rows(pipeline, query: str) -> dict[tuple, list[dict]]:
    """Points of an InfluxQL query grouped by tags: {tag values: [{column: value}]}."""
    out = {}
    for series in pipeline.query(query):
        key = tuple(sorted((series.get("tags") or {}).items()))
        out[key] = [dict(zip(series["columns"], v, strict=True)) for v in series["values"]]
    return out


def wait_rows(pipeline, query: str, groups: int, timeout: float = WAIT_S) -> dict[tuple, list]:
    deadline = time.monotonic() + timeout
    while True:
        found = rows(pipeline, query)
        if len(found) >= groups or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def inject_loss(lab, blocks) -> int:
    """5 of 100 packets h1 -> h2 and 3 of 60 h2 -> h1 dropped on r2 in one block; that block."""
    blocks.next()
    block = blocks.next()  # the session has probed at least one block before
    lab.drop("r2", "r3", 5, dst=FORWARD_SIDS[1])
    lab.drop("r2", "r1", 3, dst=REVERSE_SIDS[1])
    lab.send_udp("h1", H2, 100, interval=0.0005)
    lab.send_udp("h2", H1, 60, interval=0.0005)
    time.sleep(max(0.0, blocks.start(block) + 0.5 - time.time()))
    lab.clear_drops("r2")
    return block


def by(found: dict[tuple, list], tag: str) -> dict[str, list]:
    return {dict(k)[tag]: v for k, v in found.items()}


def test_loss_delay_and_flow_counts_reach_influxdb_exactly_once(results_lab, pipeline, blocks):
    block = inject_loss(results_lab, blocks)
    loss = by(
        wait_rows(
            pipeline,
            f"SELECT tx, rx, lost, loss_ratio, valid, reason FROM loss "
            f"WHERE session = '{SESSION}' AND block = {block} GROUP BY *",
            groups=2,
        ),
        "direction",
    )
    # +1 each way: the probe of the block before and its reply, counted like any packet
    assert [(p["tx"], p["rx"], p["lost"], p["valid"]) for p in loss["forward"]] == [
        (101, 96, 5, True)
    ]
    assert [(p["tx"], p["rx"], p["lost"], p["valid"]) for p in loss["reverse"]] == [
        (61, 58, 3, True)
    ]
    assert loss["forward"][0]["time"] == int(block * PERIOD_S * 1e9)
    (tags,) = [
        dict(k)
        for k in wait_rows(
            pipeline,
            f"SELECT lost FROM loss WHERE block = {block} AND direction = 'forward' GROUP BY *",
            1,
        )
    ]
    assert tags == {
        "session": SESSION,
        "policy": "to-h2",
        "direction": "forward",
        "src_node": "r1",
        "dst_node": "r3",
    }

    # every node's own count of each flow: lost between r2 and r3 = r2 - r3
    flows = wait_rows(
        pipeline,
        f"SELECT packets, valid FROM flow WHERE block = {block} GROUP BY flow, node",
        groups=6,
    )
    counts = {
        (dict(k)["flow"], dict(k)["node"]): [p["packets"] for p in v] for k, v in flows.items()
    }
    assert counts == {
        (FORWARD, "r1"): [101],
        (FORWARD, "r2"): [101],
        (FORWARD, "r3"): [96],
        (REVERSE, "r3"): [61],
        (REVERSE, "r2"): [61],
        (REVERSE, "r1"): [58],
    }

    delay = by(
        wait_rows(
            pipeline,
            f"SELECT samples, probes_sent, p50_ns, valid FROM delay "
            f"WHERE session = '{SESSION}' AND block = {block} GROUP BY direction",
            groups=3,
        ),
        "direction",
    )
    assert set(delay) == {"two_way", "forward", "reverse"}
    for direction, points in delay.items():
        assert len(points) == 1, direction
        assert points[0]["valid"] and points[0]["samples"] == points[0]["probes_sent"] == 1
        assert 0 < points[0]["p50_ns"] < 50_000_000
