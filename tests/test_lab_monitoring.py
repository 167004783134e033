"""End to end in a real lab (h1 - r1 - r2 - r3 - h2, kernel SRv6, eBPF on tc), through the
node managers' gRPC API only. Every count is exact."""

from __future__ import annotations

import grpc
import pytest
from conftest import block_packets
from srv6pm.lab import scenario
from srv6pm.lab.scenario import FORWARD, H1, H2, REVERSE
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

pytestmark = [pytest.mark.root, pytest.mark.slow]
ROUTERS = ("r1", "r2", "r3")


@pytest.fixture(
    scope="module", params=[pb.MARKING_MODE_ALTMARK, pb.MARKING_MODE_DSCP], ids=["altmark", "dscp"]
)
def marking_mode(request: pytest.FixtureRequest) -> pb.MarkingMode:
    return request.param


def test_one_flow_is_counted_exactly_at_ingress_transit_and_egress(lab, blocks):
    block = blocks.next()
    sent = lab.send_udp("h1", H2, 300, interval=0.0005)
    assert sent.sent == 300 and blocks.current() == block  # all inside the block
    blocks.wait_readable(block)
    for router in ROUTERS:
        assert block_packets(lab, router, block) == {FORWARD: 300, REVERSE: 0}, router


def test_both_directions_are_counted_separately(lab, blocks):
    block = blocks.next()
    lab.send_udp("h1", H2, 40, interval=0.0005)
    lab.send_udp("h2", H1, 25, interval=0.0005)
    blocks.wait_readable(block)
    for router in ROUTERS:
        assert block_packets(lab, router, block) == {FORWARD: 40, REVERSE: 25}, router


def test_injected_drops_between_r2_and_r3_are_the_loss_of_that_block(lab, blocks):
    block = blocks.next()
    rule = lab.drop("r2", "r3", 7, dst=scenario.FORWARD_SIDS[1])
    lab.send_udp("h1", H2, 200, interval=0.0005)
    blocks.wait_readable(block)
    dropped = lab.drop_counters("r2")[rule.handle].dropped
    lab.clear_drops("r2")
    r1, r2, r3 = (block_packets(lab, r, block)[FORWARD] for r in ROUTERS)
    assert dropped == 7
    assert (r1, r1 - r2, r1 - r3) == (200, 0, 7)


def test_packets_around_a_block_edge_are_split_exactly_as_sent(lab, blocks):
    block = blocks.next()
    edge = blocks.start(block + 1)
    before = lab.send_udp("h1", H2, 20, at=edge - 0.060, interval=0.002)
    after = lab.send_udp("h1", H2, 30, at=edge + 0.005, interval=0.002)
    assert before.last < edge <= after.first  # the sender's own clock agrees
    blocks.wait_readable(block + 1)
    for router in ROUTERS:
        assert block_packets(lab, router, block)[FORWARD] == 20, router
        assert block_packets(lab, router, block + 1)[FORWARD] == 30, router


def test_kill_9_of_a_node_manager_mid_block_loses_no_count(lab, blocks):
    block = blocks.next()
    lab.send_udp("h1", H2, 50, interval=0.0005)
    lab.stop_node_manager("r1", kill=True)
    lab.send_udp("h1", H2, 60, interval=0.0005)  # counted while nobody is watching
    lab.start_node_manager("r1")
    lab.send_udp("h1", H2, 70, interval=0.0005)
    assert blocks.current() == block
    blocks.wait_readable(block)
    for router in ROUTERS:
        assert block_packets(lab, router, block)[FORWARD] == 180, router


def test_applying_the_same_state_again_changes_nothing(lab, marking_mode):
    for reply in scenario.apply(lab, marking_mode).values():
        assert reply.policies.added == reply.policies.removed == 0
        assert reply.local_sids.added == reply.local_sids.removed == 0
        assert reply.flows.added == reply.flows.removed == 0
        assert not reply.marking_changed


def test_state_not_created_by_the_node_manager_is_never_touched(lab, marking_mode):
    lab.exec("r1", ["ip", "-6", "route", "add", "fd00:99::/64", "via", "fcf0:12::2"], check=True)
    try:
        scenario.apply(lab, marking_mode)
        routes = lab.exec(
            "r1",
            ["ip", "-6", "route", "show", "fd00:99::/64"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "fd00:99::/64 via fcf0:12::2" in routes
    finally:
        lab.exec("r1", ["ip", "-6", "route", "del", "fd00:99::/64"], check=False)


def _code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details()


@pytest.mark.parametrize(
    ("mutate", "code", "message"),
    [
        (
            lambda s: s.flows[0].segments.append("fc00::zz"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not an IPv6 address",
        ),
        (
            lambda s: s.flows[0].segments.extend(f"fc00::{i}" for i in range(1, 16)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "1 to 16 SIDs, got 17",
        ),
        (
            lambda s: s.flows[0].interfaces.append("eth42"),
            grpc.StatusCode.FAILED_PRECONDITION,
            "eth42",
        ),
        (
            lambda s: s.flows.append(s.flows[0]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "duplicate flow names",
        ),
        (
            lambda s: s.local_sids.add(sid="fc00:0:1::d4", behaviour=pb.BEHAVIOUR_END_DT4),
            grpc.StatusCode.FAILED_PRECONDITION,
            "does not support End.DT4",
        ),
        (
            lambda s: s.local_sids.add(sid="fc00:0:1::99", behaviour=42),
            grpc.StatusCode.INVALID_ARGUMENT,
            "unknown value 42",
        ),
        (  # a valid new policy with a reflector on an address r1 does not have: neither lands
            lambda s: (
                s.policies.add(name="x", prefix="fd00:77::/64", segments=["fc00:0:2::e"]),
                s.reflector.CopyFrom(pb.ReflectorSettings(enabled=True, address="2001:db8::77")),
            ),
            grpc.StatusCode.FAILED_PRECONDITION,
            "cannot open a STAMP socket on [2001:db8::77]:862",
        ),
    ],
)
def test_bad_input_is_refused_clearly_and_changes_nothing(lab, marking_mode, mutate, code, message):
    stub = scenario.stub(lab, "r1")
    before = stub.GetState(pb.GetStateRequest())
    desired = scenario.desired_states(lab, marking_mode)["r1"]
    mutate(desired)
    got_code, details = _code(lambda: stub.ApplyState(pb.ApplyStateRequest(desired=desired)))
    assert got_code == code
    assert message in details
    assert stub.GetState(pb.GetStateRequest()) == before


def test_a_block_outside_its_safe_window_is_refused(lab, blocks):
    stub = scenario.stub(lab, "r1")
    code, details = _code(lambda: stub.ReadBlock(pb.ReadBlockRequest(block=blocks.current())))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "not readable yet" in details


def test_info_reports_what_this_kernel_can_do(lab):
    info = scenario.stub(lab, "r1").GetInfo(pb.GetInfoRequest())
    assert info.node_id == "r1" and info.driver == "linux"
    assert pb.BEHAVIOUR_END_DT6 in info.behaviours
    assert pb.BEHAVIOUR_END_DT4 not in info.behaviours  # no CONFIG_NET_VRF in this kernel
    assert info.max_flows >= 10_000 and info.max_segments == 16
    assert info.period_ns == 2_000_000_000


def test_ten_thousand_monitored_flows_still_count_exactly(lab, marking_mode, blocks):
    extra = [
        pb.MonitoredFlow(
            name=f"bulk-{i}",
            segments=[f"fc00:0:9::{i:x}", "fc00:0:3::d6"],
            role=records_pb2.ROLE_INGRESS,
            interfaces=[lab.interface("r1", "r2")],
            flow_mon_id=1000 + i,
        )
        for i in range(10_000)
    ]
    desired = scenario.desired_states(lab, marking_mode)["r1"]
    desired.flows.extend(extra)
    stub = scenario.stub(lab, "r1")
    reply = stub.ApplyState(pb.ApplyStateRequest(desired=desired), timeout=120)
    assert reply.flows.added == 10_000 and reply.flows.unchanged == 2
    try:
        block = blocks.next()
        lab.send_udp("h1", H2, 123, interval=0.0005)
        blocks.wait_readable(block)
        got = scenario.stub(lab, "r1").ReadBlock(
            pb.ReadBlockRequest(block=block, flows=[FORWARD, "bulk-0", "bulk-9999"])
        )
        assert {f.flow: f.packets for f in got.flows} == {FORWARD: 123, "bulk-0": 0, "bulk-9999": 0}
        assert block_packets(lab, "r3", block)[FORWARD] == 123
    finally:
        scenario.apply(lab, marking_mode)


def test_every_supported_behaviour_and_encap_mode_round_trips_through_the_kernel(lab, marking_mode):
    stub = scenario.stub(lab, "r1")
    info = stub.GetInfo(pb.GetInfoRequest())
    assert set(info.encap_modes) >= {
        pb.ENCAP_MODE_ENCAP,
        pb.ENCAP_MODE_ENCAP_RED,
        pb.ENCAP_MODE_INLINE,
    }
    desired = scenario.desired_states(lab, marking_mode)["r1"]
    extra_policies = [
        pb.SrPolicy(
            name=f"p-{pb.EncapMode.Name(m)}",
            prefix=f"fd00:7:{m}::/64",
            segments=["fc00:0:2::e", "fc00:0:3::d6"],
            mode=m,
            device=lab.interface("r1", "r2"),
        )
        for m in info.encap_modes
    ]
    extra_sids = [
        pb.LocalSid(sid="fc00:0:1::e", behaviour=pb.BEHAVIOUR_END),
        pb.LocalSid(sid="fc00:0:1::e1", behaviour=pb.BEHAVIOUR_END_X, nexthop="fcf0:12::2"),
        pb.LocalSid(sid="fc00:0:1::e2", behaviour=pb.BEHAVIOUR_END_T, lookup_table=254),
        pb.LocalSid(sid="fc00:0:1::e3", behaviour=pb.BEHAVIOUR_END_DX6, nexthop="fd00:1::2"),
        pb.LocalSid(sid="fc00:0:1::e4", behaviour=pb.BEHAVIOUR_END_DX4, nexthop="192.0.2.2"),
    ]
    desired.policies.extend(extra_policies)
    desired.local_sids.extend(extra_sids)
    try:
        reply = stub.ApplyState(pb.ApplyStateRequest(desired=desired))
        assert reply.policies.added == len(extra_policies)
        assert reply.local_sids.added == len(extra_sids)
        state = stub.GetState(pb.GetStateRequest())
        modes = {p.prefix: p.mode for p in state.policies}
        assert all(modes[p.prefix] == p.mode for p in extra_policies)
        held = {(s.sid, s.behaviour) for s in state.local_sids}
        assert {(s.sid, s.behaviour) for s in extra_sids} <= held
        again = stub.ApplyState(pb.ApplyStateRequest(desired=desired))
        assert again.policies.added == again.local_sids.added == 0
    finally:
        removed = scenario.apply(lab, marking_mode)["r1"]
    assert removed.policies.removed == len(extra_policies)
    assert removed.local_sids.removed == len(extra_sids)
