"""Which routes steer STAMP probes and replies (desired.probe_routes): one per session by its
mark, and an unmarked one only where every session to a peer agrees on the SID list."""

from srv6pm.node_manager.domain.model import (
    NodeState,
    ProbeRoute,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SenderSession,
)
from srv6pm.node_manager.service.desired import probe_routes

BASE = 0x5352_0000
VIA_R2, VIA_R3 = ("fc00:0:2::e", "fc00:0:4::a"), ("fc00:0:3::e", "fc00:0:4::b")
BACK = ("fc00:0:2::e", "fc00:0:1::d6")
PEER, SENDER = "fcf0:24::4", "fcf0:12::1"


def session(ssid: int, segments: tuple[str, ...]) -> SenderSession:
    return SenderSession(f"s{ssid}", ssid, PEER, "", "", direct_segments=segments)


def test_two_segment_lists_to_one_peer_are_steered_by_mark_only() -> None:
    state = NodeState(sessions=(session(1, VIA_R2), session(2, VIA_R3)))
    assert probe_routes(state, BASE) == (
        ProbeRoute(BASE + 1, PEER, VIA_R2),
        ProbeRoute(BASE + 2, PEER, VIA_R3),
    )


def test_sessions_that_agree_also_steer_unmarked_packets() -> None:
    state = NodeState(sessions=(session(1, VIA_R2), session(2, VIA_R2)))
    assert probe_routes(state, BASE)[-1] == ProbeRoute(0, PEER, VIA_R2)


def test_replies_of_each_declared_session_carry_a_mark_of_their_own() -> None:
    path = (ReturnPath(SENDER, BACK),)
    reflector = Reflector(
        True,
        PEER,
        sessions=(ReflectorSession(1, "f", "r", path), ReflectorSession(2, "g", "r", path)),
    )
    assert probe_routes(NodeState(reflector=reflector), BASE) == (
        ProbeRoute(BASE + 0x10000 + 1, SENDER, BACK),
        ProbeRoute(BASE + 0x10000 + 2, SENDER, BACK),
        ProbeRoute(0, SENDER, BACK),
    )
