"""domain/derive.py on a diamond r1 - {r2, r3} - r4: policies between the same two nodes on
disjoint paths, a policy with two weighted segment lists, sessions on a whole policy or on one
segment list, return segment lists and measurement profiles, down to the wire (adapters/nodes.py).
"""

from __future__ import annotations

from srv6pm.common.srv6 import Behaviour, MarkingMode, Role
from srv6pm.controller.adapters.nodes import state_to_proto
from srv6pm.controller.domain.derive import monitored, node_states
from srv6pm.controller.domain.model import (
    Fleet,
    LivenessSettings,
    LocalSid,
    Measurement,
    Node,
    Policy,
    Probed,
    Profile,
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
from srv6pm.proto.v1 import node_manager_pb2 as pb

INGRESS, TRANSIT, EGRESS = Role.INGRESS, Role.TRANSIT, Role.EGRESS
PROBE = {f"r{i}": f"fcf0::{i}" for i in range(1, 5)}
CORE = {
    "r1": ("eth-r2", "eth-r3"),
    "r2": ("eth-r1", "eth-r4"),
    "r3": ("eth-r1", "eth-r4"),
    "r4": ("eth-r2", "eth-r3"),
}
VIA_R2 = ("fc00:0:2::e", "fc00:0:4::d6")
VIA_R3 = ("fc00:0:3::e", "fc00:0:4::d6")
BACK_VIA_R2 = ("fc00:0:2::e", "fc00:0:1::d6")
BACK_VIA_R3 = ("fc00:0:3::e", "fc00:0:1::d6")
BACK = Policy("back", "r4", "r1", (SegmentList(BACK_VIA_R2, flow_mon_id=23),), "fd00:1::/64")


def diamond(policies: list[Policy], sessions: list[Session], **extra) -> Fleet:
    nodes = {n: Node(n, f"{n}:1", PROBE[n], CORE[n]) for n in CORE}
    sids = {
        sid: LocalSid(sid, f"r{sid[7]}", behaviour)
        for sid, behaviour in (
            ("fc00:0:1::d6", Behaviour.END_DT6),
            ("fc00:0:2::e", Behaviour.END),
            ("fc00:0:3::e", Behaviour.END),
            ("fc00:0:4::d6", Behaviour.END_DT6),
        )
    }
    return Fleet(
        nodes,
        sids,
        {p.name: p for p in (*policies, BACK)},
        {s.name: s for s in sessions},
        MarkingMode.ALTMARK,
        **extra,
    )


def flow(name: str, segments: tuple[str, ...], role: Role, node: str, ident: int):
    return MonitoredFlow(name, segments, role, CORE[node], ident)


def sender(name: str, ssid: int, segments, forward: str, policy: str, sl: str = "", **more):
    return SenderSession(
        name=name,
        ssid=ssid,
        reflector_address=PROBE["r4"],
        source_address=PROBE["r1"],
        direct_segments=segments,
        return_segments=more.pop("return_segments", BACK_VIA_R2),
        forward_flow=forward,
        reverse_flow=more.pop("reverse_flow", "back"),
        delay_interval_ms=more.pop("delay_interval_ms", 0),
        hmac_key=b"",
        policy=policy,
        reflector_node="r4",
        segment_list=sl,
        **more,
    )


def reflected(ssid: int, forward: str, back: str = "back", segments=BACK_VIA_R2):
    return ReflectorSession(ssid, forward, back, (ReturnPath(PROBE["r1"], segments),))


def test_two_policies_between_the_same_nodes_on_disjoint_paths_are_measured_apart():
    low = Policy("low", "r1", "r4", (SegmentList(VIA_R2, flow_mon_id=21),), "fd00:4::/64")
    default = Policy("default", "r1", "r4", (SegmentList(VIA_R3, flow_mon_id=22),), "fd00:5::/64")
    sessions = [
        Session("sa", "low", "back", ssids=(Probed("sl0", 1),)),
        Session("sb", "default", "back", ssids=(Probed("sl0", 2),)),
    ]
    derived = node_states(diamond([low, default], sessions))
    assert derived.problems == {}
    r1, r2, r3, r4 = (derived.states[n] for n in ("r1", "r2", "r3", "r4"))
    assert r1.flows == (
        flow("back", BACK_VIA_R2, EGRESS, "r1", 23),
        flow("default", VIA_R3, INGRESS, "r1", 22),
        flow("low", VIA_R2, INGRESS, "r1", 21),
    )
    # each policy's transit node counts only its own flow
    assert r2.flows == (
        flow("back", BACK_VIA_R2, TRANSIT, "r2", 23),
        flow("low", VIA_R2, TRANSIT, "r2", 21),
    )
    assert r3.flows == (flow("default", VIA_R3, TRANSIT, "r3", 22),)
    assert r4.flows == (
        flow("back", BACK_VIA_R2, INGRESS, "r4", 23),
        flow("default", VIA_R3, EGRESS, "r4", 22),
        flow("low", VIA_R2, EGRESS, "r4", 21),
    )
    # both return on `back`, each probing its own policy's SID list with its own SSID
    assert r1.sessions == (
        sender("sa", 1, VIA_R2, "low", "low"),
        sender("sb", 2, VIA_R3, "default", "default"),
    )
    assert r4.reflector == Reflector(
        PROBE["r4"], b"", (reflected(1, "low"), reflected(2, "default"))
    )
    assert (r2.sessions, r2.reflector, r3.sessions, r3.reflector) == ((), None, (), None)


ECMP = Policy(
    "ecmp",
    "r1",
    "r4",
    (SegmentList(VIA_R2, "a", 3, 31), SegmentList(VIA_R3, "b", 1, 32)),
    "fd00:4::/64",
    protection=True,
)


def test_a_policy_with_two_segment_lists_is_two_flows_and_a_whole_policy_session_two_senders():
    session = Session("s", "ecmp", "back", ssids=(Probed("a", 5), Probed("b", 6)))
    fleet = diamond([ECMP], [session])
    assert monitored(fleet) == {"back", "ecmp/a", "ecmp/b"}
    states = node_states(fleet).states
    assert states["r1"] == NodeState(
        marking=Marking(MarkingMode.ALTMARK),
        local_sids=(fleet.sids["fc00:0:1::d6"],),
        policies=(ECMP,),
        flows=(
            flow("back", BACK_VIA_R2, EGRESS, "r1", 23),
            flow("ecmp/a", VIA_R2, INGRESS, "r1", 31),
            flow("ecmp/b", VIA_R3, INGRESS, "r1", 32),
        ),
        sessions=(
            sender("s/a", 5, VIA_R2, "ecmp/a", "ecmp", "a"),
            sender("s/b", 6, VIA_R3, "ecmp/b", "ecmp", "b"),
        ),
    )
    assert states["r2"].flows == (
        flow("back", BACK_VIA_R2, TRANSIT, "r2", 23),
        flow("ecmp/a", VIA_R2, TRANSIT, "r2", 31),
    )
    assert states["r3"].flows == (flow("ecmp/b", VIA_R3, TRANSIT, "r3", 32),)
    assert states["r4"].flows == (
        flow("back", BACK_VIA_R2, INGRESS, "r4", 23),
        flow("ecmp/a", VIA_R2, EGRESS, "r4", 31),
        flow("ecmp/b", VIA_R3, EGRESS, "r4", 32),
    )
    assert states["r4"].reflector == Reflector(
        PROBE["r4"], b"", (reflected(5, "ecmp/a"), reflected(6, "ecmp/b"))
    )
    # on the wire: the head-end hashes over both weighted lists, with protection
    wire = state_to_proto(states["r1"])
    assert list(wire.policies) == [
        pb.SrPolicy(
            name="ecmp",
            prefix="fd00:4::/64",
            segment_lists=[
                pb.SegmentList(name="a", segments=VIA_R2, weight=3),
                pb.SegmentList(name="b", segments=VIA_R3, weight=1),
            ],
            mode=pb.ENCAP_MODE_ENCAP,
            protection=True,
        )
    ]
    assert [(s.name, s.ssid, s.segment_list, list(s.direct_segments)) for s in wire.sessions] == [
        ("s/a", 5, "a", list(VIA_R2)),
        ("s/b", 6, "b", list(VIA_R3)),
    ]


def test_a_session_on_one_segment_list_probes_only_that_one():
    session = Session("s", "ecmp", "back", segment_list="b", ssids=(Probed("b", 7),))
    fleet = diamond([ECMP], [session])
    assert monitored(fleet) == {"back", "ecmp/b"}
    states = node_states(fleet).states
    assert states["r1"].sessions == (sender("s", 7, VIA_R3, "ecmp/b", "ecmp", "b"),)
    assert states["r2"].flows == (flow("back", BACK_VIA_R2, TRANSIT, "r2", 23),)
    assert states["r4"].reflector == Reflector(PROBE["r4"], b"", (reflected(7, "ecmp/b"),))


def test_replies_take_the_return_segment_list_the_session_names():
    back2 = Policy(
        "back2",
        "r4",
        "r1",
        (SegmentList(BACK_VIA_R2, "x", flow_mon_id=41), SegmentList(BACK_VIA_R3, "y", 1, 42)),
        "fd00:11::/64",
    )
    low = Policy("low", "r1", "r4", (SegmentList(VIA_R2, flow_mon_id=21),), "fd00:4::/64")
    sessions = [
        Session("sa", "low", "back2", return_segment_list="y", ssids=(Probed("sl0", 1),)),
        Session("sb", "ecmp", "back2", segment_list="a", ssids=(Probed("a", 2),)),
    ]
    states = node_states(diamond([back2, low, ECMP], sessions)).states
    assert states["r1"].sessions == (
        sender("sa", 1, VIA_R2, "low", "low", return_segments=BACK_VIA_R3, reverse_flow="back2/y"),
        sender("sb", 2, VIA_R2, "ecmp/a", "ecmp", "a", reverse_flow="back2/x"),
    )
    assert states["r4"].reflector == Reflector(
        PROBE["r4"],
        b"",
        (reflected(1, "low", "back2/y", BACK_VIA_R3), reflected(2, "ecmp/a", "back2/x")),
    )
    # only the return segment lists in use are counted
    assert [f.name for f in states["r3"].flows] == ["back2/y"]


def test_a_profile_s_settings_reach_the_senders_and_a_session_s_own_win():
    live = LivenessSettings(enabled=True, down_after=4, up_after=2, timeout_ms=50)
    fast = Profile("fast", Measurement(100, live, (100, 1000)))
    sessions = [
        Session("s", "ecmp", "back", profile="fast", ssids=(Probed("a", 1), Probed("b", 2))),
        Session(
            "t",
            "low",
            "back",
            profile="fast",
            delay_interval_ms=200,
            histogram_edges_us=(),
            ssids=(Probed("sl0", 3),),
        ),
    ]
    low = Policy(
        "low", "r1", "r4", (SegmentList(("fc00:0:4::d6",), flow_mon_id=21),), "fd00:5::/64"
    )
    fleet = diamond([ECMP, low], sessions, profiles={"fast": fast})
    senders = {s.name: s for s in node_states(fleet).states["r1"].sessions}
    assert [(s.delay_interval_ms, s.liveness, s.histogram_edges_us) for s in senders.values()] == [
        (100, live, (100, 1000)),
        (100, live, (100, 1000)),
        (200, live, ()),
    ]
    wire = {s.name: s for s in state_to_proto(node_states(fleet).states["r1"]).sessions}
    assert wire["s/a"].liveness == pb.Liveness(
        enabled=True, down_after=4, up_after=2, timeout_ms=50
    )
    assert list(wire["s/a"].histogram_edges_us) == [100, 1000]
    assert (wire["t"].delay_interval_ms, list(wire["t"].histogram_edges_us)) == (200, [])
    # liveness off is no Liveness message at all
    plain = diamond(
        [ECMP], [Session("u", "ecmp", "back", segment_list="a", ssids=(Probed("a", 9),))]
    )
    (off,) = state_to_proto(node_states(plain).states["r1"]).sessions
    assert not off.HasField("liveness")
