"""VPP routers next to Linux routers in one lab, through the node managers' gRPC API only: the
same scenario as the Linux lab (r1 ingress, r2 transit, r3 egress for h1 -> h2, the reverse for
h2 -> h1), with a VPP at each position and everywhere. Every count is exact, in both marking
modes: a Linux node and a VPP node agree on every packet's flow, colour and block."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import PERIOD_S, Blocks, block_counts, block_packets, running_lab
from srv6pm.lab import scenario
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import FORWARD, H1, H2, REVERSE
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]
ROUTERS = ("r1", "r2", "r3")
ALTMARK, DSCP = pb.MARKING_MODE_ALTMARK, pb.MARKING_MODE_DSCP
# (topology, marking mode): the VPP router(s) of each
CASES = {
    "vpp-transit-altmark": ("mixed", ALTMARK),
    "vpp-transit-dscp": ("mixed", DSCP),
    "vpp-ingress-altmark": ("vpp-ingress", ALTMARK),
    "vpp-ingress-dscp": ("vpp-ingress", DSCP),
    "vpp-egress-altmark": ("vpp-egress", ALTMARK),
    "vpp-chain-altmark": ("vpp-chain", ALTMARK),
}


@pytest.fixture(scope="module", params=list(CASES))
def lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    topology, mode = CASES[request.param]
    with running_lab(request, mode, topology_name=topology, prefix_start="tv") as instance:
        yield instance


def test_the_node_managers_report_the_driver_they_run(lab):
    for router in ROUTERS:
        info = scenario.stub(lab, router).GetInfo(pb.GetInfoRequest(), timeout=10)
        assert info.driver == lab.topology.routers[router].driver, router
        assert lab.interface(router, "r2" if router != "r2" else "r1") in info.interfaces


def test_every_role_counts_exactly_in_both_directions(lab, blocks):
    block = blocks.next()
    sent = lab.send_udp("h1", H2, 300, interval=0.0005)
    back = lab.send_udp("h2", H1, 70, interval=0.0005)
    assert (sent.sent, back.sent) == (300, 70) and blocks.current() == block
    blocks.wait_readable(block)
    for router in ROUTERS:
        assert block_packets(lab, router, block) == {FORWARD: 300, REVERSE: 70}, router
    # bytes as on the wire, from the Ethernet header, equal on Linux and VPP nodes
    octets = {router: block_counts(lab, router, block)[FORWARD][1] for router in ROUTERS}
    assert len(set(octets.values())) == 1, octets


@pytest.mark.parametrize(("at", "to"), [("r1", "r2"), ("r2", "r3")])
def test_injected_drops_are_the_loss_of_their_segment(lab, blocks, at, to):
    block = blocks.next()
    # the forward flow's packets carry the next SID as destination on each segment
    sid = scenario.FORWARD_SIDS[0] if at == "r1" else scenario.FORWARD_SIDS[1]
    rule = lab.drop(at, to, 9, dst=sid)
    try:
        lab.send_udp("h1", H2, 200, interval=0.0005)
        blocks.wait_readable(block)
        dropped = lab.drop_counters(at)[rule.handle].dropped
    finally:
        lab.clear_drops(at)
    r1, r2, r3 = (block_packets(lab, r, block)[FORWARD] for r in ROUTERS)
    assert dropped == 9
    if at == "r2":
        expected = (200, 0, 9)
    elif lab.topology.routers["r1"].driver == "vpp":
        expected = (200, 9, 9)  # dropped on the wire after VPP marked and counted them
    else:
        expected = (191, 0, 0)  # Linux drops in its forward hook, before it marks and counts
    assert (r1, r1 - r2, r1 - r3) == expected


def test_tcp_is_counted_segment_for_segment(lab, blocks):
    first = blocks.next()
    sent, received = lab.tcp_transfer("h1", "h2", H2, 4 << 20)
    last = blocks.current()
    blocks.wait_readable(last)
    assert received.bytes == 4 << 20
    totals = {}
    for router in ROUTERS:
        counts = [block_counts(lab, router, b) for b in range(first, last + 1)]
        totals[router] = tuple(sum(c[flow][0] for c in counts) for flow in (FORWARD, REVERSE))
    assert totals["r1"] == (sent.segments, received.segments)
    assert totals["r2"] == totals["r1"] == totals["r3"]


def test_flows_added_and_removed_while_traffic_runs_leave_the_others_exact(lab, blocks):
    """10,000 more monitored flows on each VPP router (their own SID lists and FlowMonIDs),
    then none again, while h1 sends: the scenario's flows count every packet of every block."""
    states = scenario.desired_states(lab, _mode(lab))
    vpp_routers = [r for r in ROUTERS if lab.topology.routers[r].driver == "vpp"]
    crowded = {}
    for router in vpp_routers:
        crowd = pb.NodeState()
        crowd.CopyFrom(states[router])
        interface = lab.interface(router, "r2" if router != "r2" else "r1")
        for i in range(10_000):
            crowd.flows.append(
                pb.MonitoredFlow(
                    name=f"extra-{i}",
                    segments=[f"fc00:0:9:{i // 256:x}::{i % 256 + 1:x}"],
                    role=states[router].flows[0].role,
                    interfaces=[interface],
                    flow_mon_id=1000 + i,
                )
            )
        crowded[router] = crowd
    first = blocks.next()
    with ThreadPoolExecutor(1) as pool:
        traffic = pool.submit(lab.send_udp, "h1", H2, 2500, interval=0.002)
        # each change just after a block's snapshot (mid-block), so none holds it up
        _after_snapshot(blocks, first)
        scenario.apply_states(lab, crowded)
        for router in vpp_routers:
            assert len(_flows(lab, router)) == 10_002, router
        _after_snapshot(blocks, first + 1)
        scenario.apply_states(lab, {r: states[r] for r in vpp_routers})
        sent = traffic.result()
    last = blocks.current()
    blocks.wait_readable(last)
    per_router = {
        router: sum(block_packets(lab, router, b)[FORWARD] for b in range(first, last + 1))
        for router in ROUTERS
    }
    assert per_router == dict.fromkeys(ROUTERS, sent.sent)
    for router in vpp_routers:
        assert len(_flows(lab, router)) == 2, router


def _after_snapshot(blocks: type[Blocks], block: int) -> None:
    time.sleep(max(0.0, blocks.start(block) + PERIOD_S / 2 + 0.1 - time.time()))


def _mode(lab: Lab) -> pb.MarkingMode:
    state = scenario.stub(lab, "r1").GetState(pb.GetStateRequest(), timeout=10)
    return state.marking.mode


def _flows(lab: Lab, router: str) -> list[str]:
    state = scenario.stub(lab, router).GetState(pb.GetStateRequest(), timeout=30)
    return [f.name for f in state.flows]


def test_blocks_are_exact_across_a_kill_9_of_a_vpp_routers_node_manager(lab, blocks):
    router = next(r for r in ROUTERS if lab.topology.routers[r].driver == "vpp")
    block = blocks.next()
    lab.send_udp("h1", H2, 40, interval=0.002)
    lab.stop_node_manager(router, kill=True)  # VPP keeps counting
    lab.send_udp("h1", H2, 60, interval=0.002)
    assert blocks.current() == block, "the machine is too slow for this test's timing"
    lab.start_node_manager(router)
    blocks.wait_readable(block + 1)
    lab.send_udp("h1", H2, 5, interval=0.002)  # block+2: counted after the restart as well
    blocks.wait_readable(block + 2)
    assert block_packets(lab, router, block + 1)[FORWARD] == 0
    assert block_packets(lab, router, block + 2)[FORWARD] == 5
    # the block it was killed in: the snapshot before it was taken by the killed one
    assert block_packets(lab, router, block)[FORWARD] == 100


def test_a_vpp_restart_invalidates_the_blocks_it_spans_and_counting_resumes(lab, blocks):
    """VPP loses its flows, counters, policies and SIDs: the node manager notices (the plugin's
    instance id), gives it its state again, and the blocks whose counters straddle the restart
    are refused with that reason, never read as zero or as a difference across the reset."""
    router = next(r for r in ROUTERS if lab.topology.routers[r].driver == "vpp")
    block = blocks.next()
    lab.send_udp("h1", H2, 30, interval=0.002)
    lab.restart_vpp(router)
    deadline = time.monotonic() + 10 * PERIOD_S
    while not _restored(lab, router):
        assert time.monotonic() < deadline, f"{router}'s node manager did not restore VPP"
        time.sleep(0.2)
    after = blocks.next()
    lab.send_udp("h1", H2, 50, interval=0.002)
    blocks.wait_readable(after)
    for r in ROUTERS:
        assert block_packets(lab, r, after)[FORWARD] == 50, r
    with pytest.raises(grpc.RpcError) as refused:
        block_packets(lab, router, block)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "data plane restarted" in (refused.value.details() or "")


def _restored(lab: Lab, router: str) -> bool:
    """Has the restarted VPP its local SID again (the node manager's restore ran)?"""
    out = lab.vpp(router).cli("show sr localsids")
    return all(sid.sid in out for sid in scenario.desired_states(lab)[router].local_sids)
