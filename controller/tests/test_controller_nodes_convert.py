"""adapters/nodes.py: the protobuf messages the derived states become on the wire (the
node-manager contract), and the replies read back as domain values."""

from __future__ import annotations

import dataclasses

import pytest
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode
from srv6pm.controller.adapters.nodes import diff_of, info_of, state_to_proto
from srv6pm.controller.domain.derive import node_states
from srv6pm.controller.domain.model import Fleet, LocalSid, Node, Policy, SegmentList
from srv6pm.controller.domain.state import Changes, StateDiff
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2
from test_controller_derive import FORWARD, KEY, PROBE, REVERSE, lab

INGRESS, TRANSIT, EGRESS = (
    records_pb2.ROLE_INGRESS,
    records_pb2.ROLE_TRANSIT,
    records_pb2.ROLE_EGRESS,
)


def flow(name: str, role: int, interfaces: tuple[str, ...]) -> pb.MonitoredFlow:
    segments, flow_mon_id = (FORWARD, 11) if name == "to-h2" else (REVERSE, 12)
    return pb.MonitoredFlow(
        name=name, segments=segments, role=role, interfaces=interfaces, flow_mon_id=flow_mon_id
    )


def sender(name: str, node: str, reflector: str, forward: str, back: str) -> pb.SenderSession:
    segments = {"to-h2": FORWARD, "to-h1": REVERSE}
    return pb.SenderSession(
        name=name,
        ssid=int(name[1]),
        reflector_address=PROBE[reflector],
        source_address=PROBE[node],
        direct_segments=segments[forward],
        return_segments=segments[back],
        forward_flow=forward,
        reverse_flow=back,
        delay_interval_ms=100 if name == "s1" else 0,
        hmac_key=KEY,
        policy=forward,
        reflector_node=reflector,
        burst_size=1,
    )


def reflector(
    node: str, ssid: int, forward: str, back: str, sender_node: str
) -> pb.ReflectorSettings:
    segments = {"to-h2": FORWARD, "to-h1": REVERSE}
    return pb.ReflectorSettings(
        enabled=True,
        address=PROBE[node],
        stateful=True,
        hmac_key=KEY,
        sessions=[
            pb.ReflectorSession(
                ssid=ssid,
                forward_flow=forward,
                reverse_flow=back,
                return_paths=[
                    pb.ReturnPath(sender_address=PROBE[sender_node], segments=segments[back])
                ],
            )
        ],
    )


def marking(*boundary: str) -> pb.MarkingSettings:
    return pb.MarkingSettings(mode=pb.MARKING_MODE_ALTMARK, boundary_interfaces=boundary)


def wire(node: str, fleet: Fleet | None = None) -> pb.NodeState:
    return state_to_proto(node_states(fleet or lab()).states[node])


def test_every_node_of_the_lab_gets_its_roles_sids_policies_and_stamp_settings_on_the_wire():
    expected = {
        "r1": pb.NodeState(
            marking=marking("eth-h1"),
            local_sids=[pb.LocalSid(sid="fc00:0:1::d6", behaviour=pb.BEHAVIOUR_END_DT6, table=254)],
            policies=[
                pb.SrPolicy(
                    name="to-h2", prefix="fd00:2::/64", segments=FORWARD, mode=pb.ENCAP_MODE_ENCAP
                )
            ],
            flows=[flow("to-h1", EGRESS, ("eth-r2",)), flow("to-h2", INGRESS, ("eth-r2",))],
            sessions=[sender("s1", "r1", "r3", "to-h2", "to-h1")],
            reflector=reflector("r1", 2, "to-h1", "to-h2", "r3"),
        ),
        "r2": pb.NodeState(
            marking=marking(),
            local_sids=[pb.LocalSid(sid="fc00:0:2::e", behaviour=pb.BEHAVIOUR_END)],
            flows=[
                flow("to-h1", TRANSIT, ("eth-r1", "eth-r3")),
                flow("to-h2", TRANSIT, ("eth-r1", "eth-r3")),
            ],
        ),
        "r3": pb.NodeState(
            marking=marking("eth-h2"),
            local_sids=[pb.LocalSid(sid="fc00:0:3::d6", behaviour=pb.BEHAVIOUR_END_DT6)],
            policies=[
                pb.SrPolicy(
                    name="to-h1",
                    prefix="fd00:1::/64",
                    segments=REVERSE,
                    mode=pb.ENCAP_MODE_ENCAP_RED,
                )
            ],
            flows=[flow("to-h1", INGRESS, ("eth-r2",)), flow("to-h2", EGRESS, ("eth-r2",))],
            sessions=[sender("s2", "r3", "r1", "to-h1", "to-h2")],
            reflector=reflector("r3", 1, "to-h2", "to-h1", "r1"),
        ),
    }
    for node, message in expected.items():
        assert wire(node) == message, node
        # the same bytes, not only equal messages
        assert wire(node).SerializeToString(deterministic=True) == message.SerializeToString(
            deterministic=True
        )
    assert not wire("r2").HasField("reflector")


def test_a_fleet_without_sessions_sends_no_reflector():
    fleet = lab()
    fleet.sessions.clear()
    assert all(not wire(n, fleet).HasField("reflector") for n in fleet.nodes)
    assert all(not wire(n, fleet).flows for n in fleet.nodes)


def test_dscp_marking_is_sent_as_the_proto_mode():
    assert wire("r1", lab(MarkingMode.DSCP)).marking.mode == pb.MARKING_MODE_DSCP


@pytest.mark.parametrize("behaviour", list(Behaviour))
def test_every_behaviour_and_encap_mode_has_its_proto_value(behaviour):
    fleet = Fleet(
        nodes={"r1": Node("r1", "r1:1")},
        sids={
            "fc00::1": LocalSid(
                "fc00::1", "r1", behaviour, nexthop="fe80::1", device="eth0", lookup_table=5
            )
        },
        policies={
            m.value: Policy(
                m.value, "r1", "r2", (SegmentList(("fc00::1",)),), f"fd00:{i}::/64", m, "eth1", 7
            )
            for i, m in enumerate(EncapMode)
        },
    )
    state = wire("r1", fleet)
    (sid,) = state.local_sids
    assert pb.Behaviour.Name(sid.behaviour) == "BEHAVIOUR_" + behaviour.name
    assert (sid.nexthop, sid.device, sid.lookup_table) == ("fe80::1", "eth0", 5)
    assert [pb.EncapMode.Name(p.mode) for p in state.policies] == [
        "ENCAP_MODE_" + m.name for m in EncapMode
    ]
    assert {(p.device, p.table) for p in state.policies} == {("eth1", 7)}


def test_an_apply_reply_is_read_as_a_diff():
    reply = pb.ApplyStateResponse(
        policies=pb.Changes(added=1, removed=2, unchanged=3),
        flows=pb.Changes(unchanged=4),
        reflector_changed=True,
    )
    diff = diff_of(reply)
    assert diff == StateDiff(
        policies=Changes(1, 2, 3), flows=Changes(0, 0, 4), reflector_changed=True
    )
    assert diff.changed
    assert str(diff.policies) == "+1 -2"
    assert not diff_of(pb.ApplyStateResponse(flows=pb.Changes(unchanged=9))).changed
    for field in ("local_sids", "sessions"):
        changes = {field: pb.Changes(removed=1)}
        assert diff_of(pb.ApplyStateResponse(**changes)).changed
    assert diff_of(pb.ApplyStateResponse(marking_changed=True)).changed


def test_node_info_keeps_the_behaviours_and_modes_it_knows():
    reply = pb.NodeInfo(
        driver="linux",
        version="1",
        period_ns=10**9,
        interfaces=["lo", "eth0"],
        behaviours=[pb.BEHAVIOUR_END, pb.BEHAVIOUR_END_DT46, pb.BEHAVIOUR_UNSPECIFIED, 99],
        encap_modes=[pb.ENCAP_MODE_ENCAP_RED, pb.ENCAP_MODE_UNSPECIFIED],
        max_flows=10,
        max_segments=16,
        warnings=["open reflector"],
    )
    info = info_of(reply)
    assert info.behaviours == ("End", "End.DT46")
    assert info.encap_modes == ("encap-red",)
    assert dataclasses.astuple(info)[:4] == ("linux", "1", 10**9, ("lo", "eth0"))
    assert (info.max_flows, info.max_segments, info.warnings) == (10, 16, ("open reflector",))
