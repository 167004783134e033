"""domain/derive.py: the NodeState every node of the lab-like fleet r1 - r2 - r3 gets, with two
sessions (s1 measures to-h2 from r1, s2 measures to-h1 from r3)."""

from __future__ import annotations

import dataclasses

import pytest
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role
from srv6pm.controller.domain.derive import monitored, node_states
from srv6pm.controller.domain.model import (
    Fleet,
    LocalSid,
    Node,
    NodeInfo,
    Policy,
    Probed,
    SegmentList,
    Session,
)
from srv6pm.controller.domain.state import (
    Marking,
    MonitoredFlow,
    NodeState,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SenderSession,
)

FORWARD = ("fc00:0:2::e", "fc00:0:3::d6")
REVERSE = ("fc00:0:2::e", "fc00:0:1::d6")
PROBE = {"r1": "fcf0:12::1", "r2": "fcf0:12::2", "r3": "fcf0:23::3"}
KEY = b"\x01" * 32
INGRESS, TRANSIT, EGRESS = Role.INGRESS, Role.TRANSIT, Role.EGRESS


def info(*interfaces: str) -> NodeInfo:
    return NodeInfo("linux", "x", 2_000_000_000, interfaces)


def lab(marking: MarkingMode = MarkingMode.ALTMARK) -> Fleet:
    nodes = {
        # r1 and r3: flows hook on every interface they reported, but lo and the boundary
        "r1": Node("r1", "r1:1", PROBE["r1"], (), ("eth-h1",), info("lo", "eth-h1", "eth-r2")),
        "r2": Node("r2", "r2:1", PROBE["r2"], ("eth-r1", "eth-r3"), (), info("lo", "eth9")),
        "r3": Node("r3", "r3:1", PROBE["r3"], (), ("eth-h2",), info("eth-r2", "lo", "eth-h2")),
    }
    sids = {
        "fc00:0:1::d6": LocalSid("fc00:0:1::d6", "r1", Behaviour.END_DT6, table=254),
        "fc00:0:2::e": LocalSid("fc00:0:2::e", "r2", Behaviour.END),
        "fc00:0:3::d6": LocalSid("fc00:0:3::d6", "r3", Behaviour.END_DT6),
    }
    policies = {
        "to-h2": Policy(
            "to-h2", "r1", "r3", (SegmentList(FORWARD, flow_mon_id=11),), "fd00:2::/64"
        ),
        "to-h1": Policy(
            "to-h1",
            "r3",
            "r1",
            (SegmentList(REVERSE, flow_mon_id=12),),
            "fd00:1::/64",
            EncapMode.ENCAP_RED,
        ),
    }
    sessions = {
        "s1": Session(
            "s1", "to-h2", "to-h1", delay_interval_ms=100, hmac_key=KEY, ssids=(Probed("sl0", 1),)
        ),
        "s2": Session("s2", "to-h1", "to-h2", hmac_key=KEY, ssids=(Probed("sl0", 2),)),
    }
    return Fleet(nodes, sids, policies, sessions, marking)


def flow(name: str, role: Role, interfaces: tuple[str, ...]) -> MonitoredFlow:
    segments, flow_mon_id = (FORWARD, 11) if name == "to-h2" else (REVERSE, 12)
    return MonitoredFlow(
        name=name, segments=segments, role=role, interfaces=interfaces, flow_mon_id=flow_mon_id
    )


def sender(name: str, node: str, reflector: str, forward: str, back: str) -> SenderSession:
    segments = {"to-h2": FORWARD, "to-h1": REVERSE}
    return SenderSession(
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
    )


def reflector(node: str, ssid: int, forward: str, back: str, sender_node: str) -> Reflector:
    segments = {"to-h2": FORWARD, "to-h1": REVERSE}
    return Reflector(
        address=PROBE[node],
        stateful=True,
        hmac_key=KEY,
        sessions=(
            ReflectorSession(
                ssid=ssid,
                forward_flow=forward,
                reverse_flow=back,
                return_paths=(
                    ReturnPath(sender_address=PROBE[sender_node], segments=segments[back]),
                ),
            ),
        ),
    )


def marking(*boundary: str) -> Marking:
    return Marking(mode=MarkingMode.ALTMARK, boundary_interfaces=boundary)


def test_every_node_of_the_lab_gets_its_roles_sids_policies_and_stamp_settings():
    derived = node_states(lab())
    assert derived.problems == {}
    fleet = lab()
    assert derived.states["r1"] == NodeState(
        marking=marking("eth-h1"),
        local_sids=(fleet.sids["fc00:0:1::d6"],),
        policies=(fleet.policies["to-h2"],),
        flows=(flow("to-h1", EGRESS, ("eth-r2",)), flow("to-h2", INGRESS, ("eth-r2",))),
        sessions=(sender("s1", "r1", "r3", "to-h2", "to-h1"),),
        reflector=reflector("r1", 2, "to-h1", "to-h2", "r3"),
    )
    assert derived.states["r2"] == NodeState(
        marking=marking(),
        local_sids=(fleet.sids["fc00:0:2::e"],),
        flows=(
            flow("to-h1", TRANSIT, ("eth-r1", "eth-r3")),
            flow("to-h2", TRANSIT, ("eth-r1", "eth-r3")),
        ),
    )
    assert derived.states["r2"].reflector is None
    assert derived.states["r3"] == NodeState(
        marking=marking("eth-h2"),
        local_sids=(fleet.sids["fc00:0:3::d6"],),
        policies=(fleet.policies["to-h1"],),
        flows=(flow("to-h1", INGRESS, ("eth-r2",)), flow("to-h2", EGRESS, ("eth-r2",))),
        sessions=(sender("s2", "r3", "r1", "to-h1", "to-h2"),),
        reflector=reflector("r3", 1, "to-h2", "to-h1", "r1"),
    )


def test_only_measured_policies_are_monitored_flows():
    fleet = lab()
    del fleet.sessions["s2"]
    assert monitored(fleet) == {"to-h2", "to-h1"}  # s1's return policy counts too
    fleet.sessions.clear()
    assert monitored(fleet) == set()
    derived = node_states(fleet)
    assert all(not s.flows and not s.sessions for s in derived.states.values())
    assert all(s.reflector is None for s in derived.states.values())
    assert [p.name for p in derived.states["r1"].policies] == ["to-h2"]


def test_a_node_with_no_known_interface_is_a_problem_and_gets_no_flow():
    fleet = lab()
    fleet.nodes["r2"] = dataclasses.replace(fleet.nodes["r2"], core_interfaces=(), info=None)
    derived = node_states(fleet)
    assert "no interface to hook monitored flows on" in derived.problems["r2"]
    assert derived.states["r2"].flows == ()
    assert len(derived.states["r1"].flows) == 2
    assert set(derived.problems) == {"r2"}


def test_dscp_marking_is_the_whole_domain_s():
    derived = node_states(lab(MarkingMode.DSCP))
    assert {s.marking.mode for s in derived.states.values()} == {MarkingMode.DSCP}


@pytest.mark.parametrize("behaviour", list(Behaviour))
def test_every_behaviour_and_encap_mode_reaches_the_node_as_given(behaviour):
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
    state = node_states(fleet).states["r1"]
    assert state.local_sids == tuple(fleet.sids.values())
    assert state.policies == tuple(fleet.policies.values())
