"""STAMP sessions with VPP routers at their ends, through the controller's REST API only: the
operator registers the routers and creates the sessions h1-h2 (r1 sends, r3 reflects) and h2-h1
(r3 sends, r1 reflects), with r3 a VPP router (Linux -> VPP and VPP -> Linux) or every router a
VPP one (VPP -> VPP). Loss per block is exact in both directions and localised to its segment;
two-way delay shows an injected delay, one-way delays come with the clocks' state."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from conftest import (
    FORWARD_DROPS,
    REVERSE_DROPS,
    block_packets,
    controller_settings,
    inject_drops,
    running_lab,
)
from srv6pm.lab.fleet import Api, add_sessions, register, session_hops, session_loss, wait_applied
from srv6pm.lab.lab import Lab
from srv6pm.lab.pipeline import ResultsPipeline
from srv6pm.lab.servers import ControllerProcess
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]
# Linux routers only first: its delays are what the others are held against
TOPOLOGIES = {"linux-only": "default", "linux-and-vpp": "vpp-egress", "vpp-only": "vpp-chain"}
LINUX_DELAY_MS: dict[str, tuple[float, float]] = {}  # session -> (path, with 10 ms injected)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResultsPipeline]:
    with ResultsPipeline(tmp_path_factory.mktemp("pipeline")) as running:
        yield running


@pytest.fixture(scope="module", params=list(TOPOLOGIES))
def lab(request: pytest.FixtureRequest, pipeline: ResultsPipeline) -> Iterator[Lab]:
    with running_lab(
        request,
        pb.MARKING_MODE_ALTMARK,
        pipeline.node_manager_settings,
        tls=True,
        apply_scenario=False,
        topology_name=TOPOLOGIES[request.param],
        prefix_start="tc",
    ) as instance:
        yield instance


@pytest.fixture(scope="module")
def api(
    tmp_path_factory: pytest.TempPathFactory, lab: Lab, pipeline: ResultsPipeline
) -> Iterator[Api]:
    settings = controller_settings(lab, pipeline.influx.url)
    with ControllerProcess(tmp_path_factory.mktemp("controller"), settings) as controller:
        client = Api(controller.url, controller.token)
        register(client, lab)
        add_sessions(client, ("h1-h2", "h2-h1"), delay_interval_ms=50)
        wait_applied(client)
        yield client
        client.close()


def test_the_nodes_report_their_drivers(api: Api, lab: Lab) -> None:
    nodes = {n["name"]: n["info"]["driver"] for n in api.get("/v1/nodes")["items"]}
    assert nodes == {r: lab.topology.routers[r].driver for r in ("r1", "r2", "r3")}


def test_loss_is_exact_in_both_directions_of_both_sessions(api: Api, lab: Lab, blocks) -> None:
    blocks.next()
    block = inject_drops(lab, blocks, data_only=True)  # the sessions probe 20 times a second
    blocks.wait_readable(block)
    counted = {r: block_packets(lab, r, block) for r in ("r1", "r2", "r3")}

    forward = session_loss(api, "h1-h2", block)  # r1 -> r3
    assert forward["forward"]["tx"] == counted["r1"]["to-h2"]
    assert forward["forward"]["rx"] == counted["r3"]["to-h2"]
    assert (forward["forward"]["lost"], forward["reverse"]["lost"]) == (
        FORWARD_DROPS,
        REVERSE_DROPS,
    )
    back = session_loss(api, "h2-h1", block)  # r3 -> r1: the same flows the other way
    assert (back["forward"]["lost"], back["reverse"]["lost"]) == (REVERSE_DROPS, FORWARD_DROPS)

    hops = session_hops(api, "h1-h2", block)
    assert [(s["src"], s["dst"], s["lost"]) for s in hops["forward"]["segments"]] == [
        ("r1", "r2", 0),
        ("r2", "r3", FORWARD_DROPS),
    ]
    assert [(s["src"], s["dst"], s["lost"]) for s in hops["reverse"]["segments"]] == [
        ("r3", "r2", 0),
        ("r2", "r1", REVERSE_DROPS),
    ]


def delay_of(api: Api, session: str, block: int) -> dict:
    deadline = time.monotonic() + 30.0
    while True:
        page = api.get(f"/v1/sessions/{session}/delay", after_block=block - 1, limit=1)
        if page["items"] and page["items"][0]["block"] == block:
            return dict(page["items"][0])
        assert time.monotonic() < deadline, f"no delay of block {block} for {session}: {page}"
        time.sleep(0.5)


def test_delay_is_measured_as_a_linux_session_measures_it(api: Api, lab: Lab, blocks) -> None:
    """A VPP endpoint measures a path's delay as a Linux endpoint does: each session's median
    two-way delay is a Linux session's on the same links plus what VPP's I/O adds to the path in
    this lab (af_packet polled with 100 us sleeps), at most 0.2 ms per reception by a VPP router
    on the round trip. A block with 10 ms more on r2 -> r3 (where r2 is a Linux router: the lab
    cannot delay what a VPP router forwards) adds to the two-way delay and to the delayed
    direction's one-way delay (the lab's routers share one clock) what it adds to a Linux
    session's; the lab's delay tool, a userspace queue, itself adds 0.05-0.35 ms more from one
    run to the next, so that is held to 0.4 ms."""
    injecting = not lab.topology.is_vpp("r2")
    base = blocks.next() - 1  # the whole block before
    with lab.delay("r2", "r3", 10.0) if injecting else contextlib.nullcontext():
        delayed = blocks.next()  # the whole block after the delay began
        time.sleep(max(0.0, blocks.start(delayed + 1) - time.time()))
    # probes received by r2 and r3, replies by r2 and r1 (either session, either way)
    receptions = sum(lab.topology.is_vpp(r) for r in ("r2", "r3", "r2", "r1"))
    for session in ("h1-h2", "h2-h1"):
        before, after = delay_of(api, session, base), delay_of(api, session, delayed)
        assert after["two_way"]["samples"] >= 20 and after["two_way"]["valid"], session
        measured = (before["two_way"]["p50_ns"] / 1e6, after["two_way"]["p50_ns"] / 1e6)
        print(f"{session}: path {measured[0]:.3f} ms, the next block {measured[1]:.3f} ms")
        # one way: r2 -> r3 is h1-h2's forward direction and h2-h1's reverse one
        one_way = "forward" if session == "h1-h2" else "reverse"
        assert before[one_way]["valid"] and after[one_way]["valid"], session
        added = (after[one_way]["p50_ns"] - before[one_way]["p50_ns"]) / 1e6
        if injecting:  # medians of two blocks: either may sit a little off its path's delay
            assert 9.8 < measured[1] - measured[0] < 11.0 and 9.8 < added < 11.0, session
        if not receptions:
            LINUX_DELAY_MS[session] = measured
            continue
        assert session in LINUX_DELAY_MS, "the Linux-only lab runs first: run the whole module"
        path, injected = LINUX_DELAY_MS[session]
        assert 0.0 < measured[0] - path < 0.2 * receptions, (session, measured[0], path)
        if injecting:
            assert abs((measured[1] - measured[0]) - (injected - path)) < 0.4, session
