"""Every policy and segment list between the same two routers measured on its own, in a real
lab of two disjoint paths (diamond: r1 - r2 - r4 and r1 - r3 - r4), through gRPC only. Probes
carry exactly the segment list they measure (steered by their session's mark, not by the
reflector's address), so delay injected on one path and drops on one segment list show only
there; a cut takes exactly that segment list down, and protection takes traffic off it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from conftest import Blocks, block_packets, running_lab
from srv6pm.lab import diamond, drops, scenario
from srv6pm.lab.diamond import HASHED_SL0, HASHED_SL1, MEASURED, VIA_R2, VIA_R3
from srv6pm.lab.lab import Lab
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

pytestmark = [pytest.mark.root, pytest.mark.slow]

DATA_SIZE = 400  # UDP payload: data packets are told from probes (< 300 octets) by length
DATA_MIN_LENGTH = 300
FLOWS = 16  # UDP flows (source ports) hashed over the two segment lists


@pytest.fixture(scope="module")
def diamond_lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    with running_lab(
        request, pb.MARKING_MODE_ALTMARK, apply_scenario=False, topology_name="diamond"
    ) as lab:
        diamond.host_addresses(lab)
        # flows are hashed by their ports, so each UDP flow of the test picks one list
        lab.network.sysctl("r1", {"net.ipv6.fib_multipath_hash_policy": 1})
        scenario.apply_states(lab, diamond.states(lab, histogram_edges_us=(5_000, 20_000)))
        time.sleep(1.0)  # the sessions' first replies: every segment list up
        yield lab


def results(lab: Lab, session: str, since_block: int = 0) -> pb.ReadResultsResponse:
    return scenario.stub(lab, "r1").ReadResults(
        pb.ReadResultsRequest(session=session, since_block=since_block)
    )


def loss(lab: Lab, session: str, block: int) -> records_pb2.LossRecord:
    deadline = Blocks.start(block + 4)
    while time.time() < deadline:
        found = [r for r in results(lab, session, block).loss if r.block == block]
        if found:
            return found[-1]
        time.sleep(0.2)
    raise AssertionError(f"no loss record of {session} for block {block}")


def delay(lab: Lab, session: str, block: int) -> records_pb2.DelayRecord:
    Blocks.wait_readable(block + 1)
    found = [r for r in results(lab, session, block).delay if r.block == block]
    assert found, f"no delay record of {session} for block {block}"
    return found[-1]


def send_flows(lab: Lab, address: str, per_flow: int) -> None:
    """FLOWS UDP flows of `per_flow` packets each (a socket, so a source port, per flow)."""
    for _ in range(FLOWS):
        lab.send_udp("h1", address, per_flow, size=DATA_SIZE, interval=0.0005)


def test_applying_the_same_state_again_changes_nothing(diamond_lab: Lab) -> None:
    """The multipath policy and the steering read back from the kernel equal what was asked."""
    states = diamond.states(diamond_lab, histogram_edges_us=(5_000, 20_000))
    for router, reply in scenario.apply_states(diamond_lab, states).items():
        for kind in ("policies", "local_sids", "flows", "sessions"):
            assert getattr(reply, kind).added == getattr(reply, kind).removed == 0, (router, kind)
        assert not reply.marking_changed and not reply.reflector_changed, router


def test_two_policies_between_the_same_routers_are_measured_apart(diamond_lab: Lab) -> None:
    lab = diamond_lab
    with lab.impairments.delay("r3", "r4", 20):
        block = Blocks.next()  # every probe of the block on r3's path is delayed
        lab.drop("r2", "r4", 5, dst=VIA_R2.segments[-1], min_length=DATA_MIN_LENGTH)
        lab.send_udp("h1", diamond.VIA_R2_ADDRESS, 100, size=DATA_SIZE, interval=0.001)
        lab.send_udp("h1", diamond.VIA_R3_ADDRESS, 100, size=DATA_SIZE, interval=0.001)
        time.sleep(max(0.0, Blocks.start(block + 1) - time.time()))
    lab.clear_drops("r2")
    via_r2, via_r3 = loss(lab, VIA_R2.session, block), loss(lab, VIA_R3.session, block)
    assert via_r2.valid and via_r3.valid, (via_r2.reason, via_r3.reason)
    assert (via_r2.forward.lost, via_r3.forward.lost) == (5, 0)
    # the data and the session's own probes, which share the segment list's fate and counters
    assert via_r2.forward.tx >= 100 and via_r3.forward.tx >= 100
    assert (via_r2.labels.policy, via_r3.labels.policy) == ("via-r2", "via-r3")
    assert list(via_r3.labels.segments) == list(VIA_R3.segments)
    slow, fast = delay(lab, VIA_R3.session, block), delay(lab, VIA_R2.session, block)
    assert slow.two_way.p50_ns >= 20_000_000 > fast.two_way.p90_ns
    # bins [0, 5 ms), [5 ms, 20 ms), [20 ms, inf): the delayed path's replies in the last one
    assert list(slow.histogram_edges_ns) == [5_000_000, 20_000_000]
    assert slow.two_way.histogram[2] == slow.two_way.samples > 0
    assert fast.two_way.histogram[0] == fast.two_way.samples > 0


def test_each_segment_list_of_a_policy_counts_the_flows_hashed_onto_it(diamond_lab: Lab) -> None:
    lab = diamond_lab
    block = Blocks.next()
    lab.drop("r3", "r4", 4, dst=HASHED_SL1.segments[-1], min_length=DATA_MIN_LENGTH)
    send_flows(lab, diamond.HASHED_ADDRESS, 10)
    time.sleep(max(0.0, Blocks.start(block + 1) - time.time()))
    lab.clear_drops("r3")
    sl0, sl1 = loss(lab, HASHED_SL0.session, block), loss(lab, HASHED_SL1.session, block)
    assert sl0.valid and sl1.valid, (sl0.reason, sl1.reason)
    assert (sl0.forward.lost, sl1.forward.lost) == (0, 4)
    assert (sl0.labels.segment_list, sl1.labels.segment_list) == ("sl0", "sl1")
    # both lists carried data: more packets than their own session's probes
    at_r1 = block_packets(lab, "r1", block)
    for m in (HASHED_SL0, HASHED_SL1):
        assert at_r1[m.flow] > delay(lab, m.session, block).probes_sent + 1, at_r1
    # the transit routers count only their own segment list
    assert HASHED_SL1.flow not in block_packets(lab, "r2", block)
    assert HASHED_SL0.flow not in block_packets(lab, "r3", block)


def liveness(lab: Lab, session: str) -> list[records_pb2.LivenessEvent]:
    return list(results(lab, session).liveness)


def wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"not within {timeout} s"
        time.sleep(0.02)


def routed_lists(lab: Lab) -> list[tuple[str, ...]]:
    """The hashed policy's segment lists as r1's data plane holds them now."""
    state = scenario.stub(lab, "r1").GetState(pb.GetStateRequest())
    policy = next(p for p in state.policies if p.name == "hashed")
    if policy.segment_lists:
        return sorted(tuple(sl.segments) for sl in policy.segment_lists)
    return [tuple(policy.segments)]


def test_a_cut_takes_exactly_its_segment_list_down_and_protection_moves_traffic_off_it(
    diamond_lab: Lab,
) -> None:
    lab = diamond_lab
    assert routed_lists(lab) == sorted([HASHED_SL0.segments, HASHED_SL1.segments])
    before = {m.session: len(liveness(lab, m.session)) for m in MEASURED}
    cut_at = time.time()
    lab.drop("r3", "r4", drops.MAX_COUNT)  # the r3 - r4 link: both segment lists through it
    try:
        wait_for(lambda: len(liveness(lab, HASHED_SL1.session)) > before[HASHED_SL1.session], 5)
        down = liveness(lab, HASHED_SL1.session)[-1]
        detection = down.at_unix_ns / 1e9 - cut_at
        assert down.state == records_pb2.LIVENESS_STATE_DOWN
        assert down.consecutive == diamond.DOWN_AFTER
        # within N intervals of the cut, plus one interval for the probe in flight
        assert detection <= (diamond.DOWN_AFTER + 1) * diamond.PROBE_INTERVAL_MS / 1000
        wait_for(lambda: routed_lists(lab) == [HASHED_SL0.segments], 2)
        wait_for(
            lambda: liveness(lab, VIA_R3.session)[-1].state == records_pb2.LIVENESS_STATE_DOWN, 2
        )
        for m in (VIA_R2, HASHED_SL0):  # the other path's lists stay up, with no event
            assert len(liveness(lab, m.session)) == before[m.session]
        # every flow now takes sl0: exact at both ends
        block = Blocks.next()
        send_flows(lab, diamond.HASHED_ADDRESS, 10)
        Blocks.wait_readable(block)
        at_r1, at_r4 = block_packets(lab, "r1", block), block_packets(lab, "r4", block)
        assert at_r1[HASHED_SL0.flow] == at_r4[HASHED_SL0.flow] >= FLOWS * 10
        assert at_r4[HASHED_SL1.flow] == 0
    finally:
        lab.clear_drops("r3")
    wait_for(
        lambda: liveness(lab, HASHED_SL1.session)[-1].state == records_pb2.LIVENESS_STATE_UP, 5
    )
    up = liveness(lab, HASHED_SL1.session)[-1]
    assert up.previous == records_pb2.LIVENESS_STATE_DOWN and up.consecutive == 1
    wait_for(lambda: routed_lists(lab) == sorted([HASHED_SL0.segments, HASHED_SL1.segments]), 2)
    # and flows are hashed onto sl1 again, exact at both ends
    block = Blocks.next()
    send_flows(lab, diamond.HASHED_ADDRESS, 10)
    Blocks.wait_readable(block)
    at_r1, at_r4 = block_packets(lab, "r1", block), block_packets(lab, "r4", block)
    assert at_r1 == {**at_r1, **{m.flow: at_r4[m.flow] for m in (HASHED_SL0, HASHED_SL1)}}
    assert at_r1[HASHED_SL1.flow] > delay(lab, HASHED_SL1.session, block).probes_sent
    print(
        f"cut detected in {detection * 1000:.0f} ms ({diamond.DOWN_AFTER} x "
        f"{diamond.PROBE_INTERVAL_MS} ms intervals)"
    )


def steering_rules(lab: Lab, router: str) -> list[str]:
    shown = lab.network.exec(router, ["ip", "-6", "rule", "show"], capture_output=True, text=True)
    return [line for line in shown.stdout.splitlines() if line.endswith("proto 202")]


def test_unmarked_packets_skip_the_session_rules_and_the_last_session_takes_them_away(
    diamond_lab: Lab,
) -> None:
    """Data packets meet one guard rule whatever the number of sessions; sessions removed
    leave no rule, table or route behind."""
    lab = diamond_lab
    rules = steering_rules(lab, "r1")
    assert rules[0].startswith("32000:\tnot from all fwmark 0x53520000/0xfffe0000 goto 32002")
    assert rules[-1].startswith("32002:\tfrom all nop")
    assert sorted(r.split()[4] for r in rules[1:-1]) == [
        f"{0x53520000 + m.ssid:#x}" for m in MEASURED
    ]
    states = diamond.states(lab)
    del states["r1"].sessions[:]
    try:
        scenario.apply_states(lab, states)
        assert steering_rules(lab, "r1") == []
        routes = lab.network.exec(
            "r1",
            ["ip", "-6", "route", "show", "table", "all", "proto", "202"],
            capture_output=True,
            text=True,
        )
        assert routes.stdout.strip() == ""
    finally:
        scenario.apply_states(lab, diamond.states(lab, histogram_edges_us=(5_000, 20_000)))
