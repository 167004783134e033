import pytest
from srv6pm.node_manager.domain import validation
from srv6pm.node_manager.domain.errors import InvalidArgument
from srv6pm.node_manager.domain.model import (
    Behaviour,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    Role,
    SrPolicy,
)

FLOW = MonitoredFlow("f", ("fc00:0:2::e", "fc00:0:3::d6"), Role.INGRESS, ("r1-r2",))


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
            NodeState(flows=(MonitoredFlow("f", ("not-an-address",), Role.INGRESS, ("x",)),)),
            "not an IPv6 address",
        ),
        (
            NodeState(
                flows=(
                    MonitoredFlow(
                        "f", tuple(f"fc00::{i}" for i in range(1, 18)), Role.INGRESS, ("x",)
                    ),
                )
            ),
            "1 to 16 SIDs, got 17",
        ),
        (NodeState(flows=(MonitoredFlow("f", (), Role.INGRESS, ("x",)),)), "got 0"),
        (NodeState(flows=(FLOW, FLOW)), "duplicate flow names: f"),
        (
            NodeState(flows=(FLOW, MonitoredFlow("g", FLOW.segments, Role.EGRESS, ("x",)))),
            "duplicate flow segment lists",
        ),
        (
            NodeState(flows=(MonitoredFlow("f", ("fc00::1",), Role.INGRESS, ()),)),
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
        (NodeState(marking=Marking(0x01, 0x08)), "one bit of the DSCP"),
        (NodeState(marking=Marking(0x0C, 0x10)), "one bit of the DSCP"),
        (NodeState(marking=Marking(0x04, 0x04)), "must differ"),
    ],
)
def test_bad_input_is_refused_with_a_message_naming_it(state, message):
    with pytest.raises(InvalidArgument, match=message):
        validation.node_state(state)
