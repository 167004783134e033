from dataclasses import replace

import pytest
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role
from srv6pm.node_manager.api import convert
from srv6pm.node_manager.domain import validation
from srv6pm.node_manager.domain.errors import InvalidArgument
from srv6pm.node_manager.domain.model import (
    Liveness,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SegmentList,
    SenderSession,
    SrPolicy,
    Thresholds,
)

FLOW = MonitoredFlow("f", ("fc00:0:2::e", "fc00:0:3::d6"), Role.INGRESS, ("r1-r2",), 1)
DSCP = Marking(mode=MarkingMode.DSCP)


def test_addresses_are_canonicalised():
    state = validation.node_state(
        NodeState(
            policies=(SrPolicy("p", "FD00:2:0::/64", ("FC00:0:2:0::E",)),),
            local_sids=(LocalSid("fc00:0:1:0:0::d6", Behaviour.END_DT6),),
        )
    )
    assert state.policies[0].prefix == "fd00:2::/64"
    assert state.policies[0].segments == ("fc00:0:2::e",)
    assert state.local_sids[0].sid == "fc00:0:1::d6"
    assert state.local_sids[0].lookup_table == 254  # End.DT6 looks up main by default


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            NodeState(flows=(MonitoredFlow("f", ("not-an-address",), Role.INGRESS, ("x",), 1),)),
            "not an IPv6 address",
        ),
        (
            NodeState(
                flows=(
                    MonitoredFlow(
                        "f", tuple(f"fc00::{i}" for i in range(1, 18)), Role.INGRESS, ("x",), 1
                    ),
                )
            ),
            "1 to 16 SIDs, got 17",
        ),
        (NodeState(flows=(MonitoredFlow("f", (), Role.INGRESS, ("x",), 1),)), "got 0"),
        (NodeState(flows=(FLOW, FLOW)), "duplicate flow names: f"),
        (
            NodeState(
                marking=DSCP,
                flows=(FLOW, MonitoredFlow("g", FLOW.segments, Role.EGRESS, ("x",))),
            ),
            "duplicate flow segment lists",
        ),
        (
            NodeState(flows=(FLOW, MonitoredFlow("g", FLOW.segments, Role.INGRESS, ("x",), 2))),
            "duplicate flow segment lists",
        ),
        (
            NodeState(flows=(FLOW, MonitoredFlow("g", ("fc00::9",), Role.EGRESS, ("x",), 1))),
            "duplicate flow FlowMonIDs: 1",
        ),
        (
            NodeState(flows=(MonitoredFlow("f", ("fc00::1",), Role.TRANSIT, ("x",)),)),
            "ALTMARK marking needs a FlowMonID",
        ),
        (
            NodeState(flows=(MonitoredFlow("f", ("fc00::1",), Role.TRANSIT, ("x",), 1 << 20),)),
            "FlowMonID 1048576 is not 1 to 1048575",
        ),
        (
            NodeState(
                marking=Marking(boundary_interfaces=("x",)),
                flows=(MonitoredFlow("f", ("fc00::1",), Role.EGRESS, ("x",), 3),),
            ),
            "cannot both count monitored flows and be at the domain boundary",
        ),
        (
            NodeState(flows=(MonitoredFlow("f", ("fc00::1",), Role.INGRESS, (), 1),)),
            "at least one interface",
        ),
        (NodeState(policies=(SrPolicy("p", "fd00:2::1/64", ("fc00::1",)),)), "host bits set"),
        (NodeState(local_sids=(LocalSid("fc00::1", Behaviour.END_X),)), "needs an IPv6 nexthop"),
        (
            NodeState(local_sids=(LocalSid("fc00::1", Behaviour.END_DX4, "fc00::2"),)),
            "IPv4 nexthop",
        ),
        (
            NodeState(local_sids=(LocalSid("fc00::1", Behaviour.END, "fc00::2"),)),
            "takes no nexthop",
        ),
        (NodeState(marking=Marking(monitored_bit=0x01)), "one bit of the DSCP"),
        (NodeState(marking=Marking(monitored_bit=0x0C, colour_bit=0x10)), "one bit of the DSCP"),
        (NodeState(marking=Marking(colour_bit=0x04)), "must differ"),
    ],
)
def test_bad_input_is_refused_with_a_message_naming_it(state, message):
    with pytest.raises(InvalidArgument, match=message):
        validation.node_state(state)


def test_two_head_ends_may_share_a_sid_list_downstream_when_flowmon_ids_tell_them_apart():
    a = MonitoredFlow("a", FLOW.segments, Role.EGRESS, ("x",), 1)
    b = MonitoredFlow("b", FLOW.segments, Role.EGRESS, ("x",), 2)
    assert validation.node_state(NodeState(flows=(a, b))).flows == (a, b)


def test_dscp_mode_needs_no_flowmon_id():
    f = MonitoredFlow("f", FLOW.segments, Role.TRANSIT, ("x",))
    assert validation.node_state(NodeState(marking=DSCP, flows=(f,))).flows == (f,)


def test_sessions_of_one_sender_return_on_their_own_paths_but_each_on_one():
    """Replies are steered by each session's mark, not by the sender's address: sessions from
    one sender may return on different segment lists, a session on one only."""
    one = ReturnPath("fcf0:12::1", ("fc00:0:2::e", "fc00:0:1::d6"))
    other = ReturnPath("fcf0:12::1", ("fc00:0:3::e", "fc00:0:1::d6"))
    sessions = (ReflectorSession(1, "f", "f", (one,)), ReflectorSession(2, "f", "f", (other,)))
    state = NodeState(flows=(FLOW,), reflector=Reflector(True, "fc00::9", sessions=sessions))
    assert validation.node_state(state).reflector.sessions == sessions
    twice = (ReflectorSession(1, "f", "f", (one, other)),)
    state = NodeState(flows=(FLOW,), reflector=Reflector(True, "fc00::9", sessions=twice))
    with pytest.raises(InvalidArgument, match="duplicate return paths of a session: 1 to"):
        validation.node_state(state)


def _policy(*lists: SegmentList, **kw: object) -> NodeState:
    policy = SrPolicy("p", "fd00::/64", (), segment_lists=lists)
    return NodeState(policies=(replace(policy, **kw),))  # type: ignore[arg-type]


def test_segment_lists_are_named_weighted_and_distinct():
    a, b = ("fc00:0:2::e", "fc00:0:4::d6"), ("fc00:0:3::e", "fc00:0:4::d6")
    got = validation.node_state(_policy(SegmentList("", a), SegmentList("", b, 3))).policies[0]
    assert got.segments == () and got.segment_lists == (
        SegmentList("sl0", a, 1),
        SegmentList("sl1", b, 3),
    )
    # one segment list is a plain policy
    assert validation.node_state(_policy(SegmentList("x", a, 5))).policies[0].segments == a
    for lists, kw, error in (
        ((SegmentList("", a), SegmentList("", a)), {}, "duplicate segment lists"),
        ((SegmentList("x", a), SegmentList("x", b)), {}, "duplicate segment list names"),
        ((SegmentList("", a, 257), SegmentList("", b)), {}, "weight 257 is not 1 to 256"),
        ((SegmentList("", a), SegmentList("", b)), {"mode": EncapMode.INLINE}, "encap or"),
        ((SegmentList("", a),), {"segments": a}, "segments or segment_lists, not both"),
        ((SegmentList("", a), SegmentList("", b)), {"device": "eth0"}, "take no device"),
    ):
        with pytest.raises(InvalidArgument, match=error):
            validation.node_state(_policy(*lists, **kw))


def test_liveness_and_histogram_edges_are_checked():
    s = SenderSession("s", 1, "fc00::1", forward_flow="", reverse_flow="")
    live = validation.node_state(
        NodeState(sessions=(replace(s, liveness=Liveness(True, 3, 2, 0)),))
    )
    assert live.sessions[0].liveness == Liveness(True, 3, 2, 0)
    for bad, error in (
        ({"liveness": Liveness(True, 0)}, "down_after 0 is not 1 to 255"),
        ({"liveness": Liveness(True, 3, 1, 5)}, "liveness timeout below 10 ms"),
        ({"histogram_edges_us": (100, 100)}, "ascending"),
        ({"histogram_edges_us": tuple(range(1, 12))}, "11 histogram edges, at most 10"),
    ):
        with pytest.raises(InvalidArgument, match=error):
            validation.node_state(NodeState(sessions=(replace(s, **bad),)))  # type: ignore[arg-type]


def test_sender_sessions_of_a_node_have_distinct_ssids():
    s = SenderSession("s", 1, "fc00::1", forward_flow="", reverse_flow="")
    with pytest.raises(InvalidArgument, match="duplicate session SSIDs: 1"):
        validation.node_state(NodeState(sessions=(s, replace(s, name="t"))))


def test_a_session_names_both_flows_or_neither():
    half = SenderSession("s", 1, "fc00::1", forward_flow="f", reverse_flow="")
    with pytest.raises(InvalidArgument, match=r"both monitored flows .* or neither"):
        validation.node_state(NodeState(flows=(FLOW,), sessions=(half,)))
    delay_only = SenderSession("s", 1, "fc00::1", forward_flow="", reverse_flow="")
    assert validation.node_state(NodeState(sessions=(delay_only,))).sessions == (delay_only,)


def test_an_enabled_reflector_listens_on_a_named_address_only():
    with pytest.raises(InvalidArgument, match="give the address to listen on"):
        validation.node_state(NodeState(reflector=Reflector(True)))


def test_allowed_dscp_values_are_checked_and_sorted():
    def reflector(*dscp: int) -> NodeState:
        return NodeState(reflector=Reflector(True, "fc00::9", allowed_dscp=dscp))

    assert validation.node_state(reflector(46, 0, 10)).reflector.allowed_dscp == (0, 10, 46)
    with pytest.raises(InvalidArgument, match=r"allowed DSCP 64 is not 0\.\.63"):
        validation.node_state(reflector(64))
    with pytest.raises(InvalidArgument, match="duplicate allowed DSCP values: 46"):
        validation.node_state(reflector(46, 46))


def test_the_reflector_round_trips_through_the_contract():
    state = NodeState(reflector=Reflector(True, "fc00::9", allowed_dscp=(0, 46)))
    assert convert.node_state(convert.node_state_pb(state)).reflector == state.reflector


def test_bursts_computation_intervals_and_thresholds_are_checked():
    s = SenderSession("s", 1, "fc00::1", forward_flow="", reverse_flow="", delay_interval_ms=100)
    period = 10 * 10**9

    def check(session: SenderSession) -> SenderSession:
        return validation.node_state(NodeState(sessions=(session,)), period).sessions[0]

    ok = check(
        replace(
            s,
            burst_size=5,
            computation_interval_ms=1000,
            thresholds=Thresholds(percent=20, metrics=("two_way_p99", "jitter")),
        )
    )
    assert (ok.burst_size, ok.computation_interval_ms) == (5, 1000)
    # unset metrics mean the two-way mean; settings without a threshold mean nothing
    assert check(replace(s, thresholds=Thresholds(absolute_us=500))).thresholds.metrics == (
        "two_way_mean",
    )
    assert check(replace(s, thresholds=Thresholds(check_each_burst=True))).thresholds == (
        Thresholds()
    )
    for bad, error in (
        ({"burst_size": 0}, "burst size 0 is not 1 to 100"),
        ({"burst_size": 101}, "burst size 101 is not 1 to 100"),
        ({"computation_interval_ms": 250}, r"250 ms is not a multiple of the delay interval"),
        ({"computation_interval_ms": 3000}, "3000 ms does not divide the node's 10000 ms block"),
        (
            {"computation_interval_ms": 1000, "delay_interval_ms": 0},
            "a computation interval needs a delay interval",
        ),
        ({"thresholds": Thresholds(percent=1001)}, "threshold percent 1001 is not 0 to 1000"),
        ({"thresholds": Thresholds(percent=float("nan"))}, "threshold percent nan"),
        ({"thresholds": Thresholds(absolute_us=10**8)}, "above 10000000 µs"),
        (
            {"thresholds": Thresholds(percent=5, min_report_interval_ms=10**9)},
            "minimum report interval .* above a day",
        ),
        (
            {"thresholds": Thresholds(percent=5, metrics=("p42",))},
            "unknown threshold metric",
        ),
        (
            {"thresholds": Thresholds(percent=5, metrics=("jitter", "jitter"))},
            "duplicate threshold metrics",
        ),
    ):
        with pytest.raises(InvalidArgument, match=error):
            check(replace(s, **bad))  # type: ignore[arg-type]
    # without the node's period (a dry check elsewhere), only what the session says is checked
    lone = replace(s, computation_interval_ms=3000)
    assert validation.node_state(NodeState(sessions=(lone,))).sessions == (lone,)


def test_bursts_intervals_and_thresholds_round_trip_through_the_contract():
    s = SenderSession(
        "s",
        1,
        "fc00::1",
        forward_flow="",
        reverse_flow="",
        delay_interval_ms=100,
        burst_size=3,
        computation_interval_ms=500,
        thresholds=Thresholds(12.5, 300, True, 2000, ("two_way_mean", "forward_mean")),
    )
    state = NodeState(sessions=(s,))
    assert convert.node_state(convert.node_state_pb(state)).sessions == (s,)
    msg = convert.node_state_pb(state)
    msg.sessions[0].burst_size = 0  # 0 = 1
    del msg.sessions[0].thresholds.metrics[:]
    msg.sessions[0].thresholds.metrics.append(0)  # unspecified: the two-way mean
    back = convert.node_state(msg).sessions[0]
    assert (back.burst_size, back.thresholds.metrics) == (1, ("two_way_mean",))
    msg.sessions[0].thresholds.metrics.append(99)
    with pytest.raises(InvalidArgument, match="threshold metric: unknown value 99"):
        convert.node_state(msg)
