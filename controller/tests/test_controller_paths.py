"""domain/paths.py: where a policy's packets go, and which policies and sessions make sense."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srv6pm.common.srv6 import Behaviour, EncapMode
from srv6pm.controller.domain.errors import Conflict, Invalid
from srv6pm.controller.domain.model import Fleet, LocalSid, Node, Policy, SegmentList, Session
from srv6pm.controller.domain.paths import check_policy, check_session, path

FORWARD = ("fc00:0:2::e", "fc00:0:3::d6")
REVERSE = ("fc00:0:2::e", "fc00:0:1::d6")


def lab() -> Fleet:
    """r1 - r2 - r3 with End SIDs on each node and End.DT6 SIDs on r1, r2 and r3."""
    nodes = {
        n: Node(n, f"{n}:50051", probe_address=f"fcf0::{i}")
        for i, n in enumerate(("r1", "r2", "r3"), 1)
    }
    sids = {}
    for i, node in enumerate(("r1", "r2", "r3"), 1):
        sids[f"fc00:0:{i}::e"] = LocalSid(f"fc00:0:{i}::e", node, Behaviour.END)
        sids[f"fc00:0:{i}::d6"] = LocalSid(f"fc00:0:{i}::d6", node, Behaviour.END_DT6)
    policies = {
        "to-h2": one("to-h2", "r1", "r3", FORWARD, "fd00:2::/64", 1),
        "to-h1": one("to-h1", "r3", "r1", REVERSE, "fd00:1::/64", 2),
        "r2-r3": one("r2-r3", "r2", "r3", ("fc00:0:3::d6",), "fd00:23::/64", 3),
        "r3-r2": one("r3-r2", "r3", "r2", ("fc00:0:2::d6",), "fd00:32::/64", 4),
    }
    return Fleet(nodes=nodes, sids=sids, policies=policies)


def one(name, head, tail, segments, prefix, flow_mon_id) -> Policy:
    """A policy with one segment list."""
    return Policy(name, head, tail, (SegmentList(segments, flow_mon_id=flow_mon_id),), prefix)


def policy(segments=None, **changes) -> Policy:
    if segments is not None:
        changes["segment_lists"] = (SegmentList(segments),)
    return dataclasses.replace(
        lab().policies["to-h2"], **{"name": "new", "prefix": "fd00:9::/64", **changes}
    )


def test_a_path_is_the_head_end_then_each_sid_s_node_in_travel_order():
    fleet = lab()
    assert path(fleet.policies["to-h2"], fleet) == ("r1", "r2", "r3")
    assert path(fleet.policies["r2-r3"], fleet) == ("r2", "r3")
    # SIDs of the head-end, or two SIDs of one node in a row, add no hop
    local = policy(segments=("fc00:0:1::e", "fc00:0:2::e", "fc00:0:3::e", "fc00:0:3::d6"))
    assert path(local, fleet) == ("r1", "r2", "r3")


owners = st.lists(st.sampled_from(["r1", "r2", "r3"]), min_size=1, max_size=16)


@given(owners)
def test_a_path_collapses_consecutive_sids_of_one_node(nodes):
    fleet = lab()
    segments = tuple(f"fc00:0:{n[1]}::e" for n in nodes)
    found = path(policy(segments=segments), fleet)
    assert found == tuple(k for k, _ in itertools.groupby(["r1", *nodes]))
    assert all(a != b for a, b in itertools.pairwise(found))


def test_the_lab_policies_are_valid():
    fleet = lab()
    for p in fleet.policies.values():
        check_policy(p, fleet)
    # an inline policy may end at an End SID: it removes no header
    check_policy(policy(segments=("fc00:0:3::e",), encap_mode=EncapMode.INLINE), fleet)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"head_node": "r9"}, Invalid, "head node 'r9' does not exist"),
        ({"tail_node": "r9"}, Invalid, "tail node 'r9' does not exist"),
        ({"tail_node": "r1"}, Invalid, "head and tail node are the same node"),
        ({"segments": ("fc00::1", "fc00::2")}, Invalid, "SIDs fc00::1, fc00::2 are not local"),
        ({"segments": ("fc00:0:2::d6",)}, Invalid, "is on node r2, not on the tail node r3"),
        ({"segments": ("fc00:0:3::e",)}, Invalid, "the last SID fc00:0:3::e is End on r3"),
        (
            {"segments": ("fc00:0:3::e",), "encap_mode": EncapMode.L2ENCAP},
            Invalid,
            "must end at a decapsulating SID",
        ),
        ({"segments": ("fc00:0:2::d6", "fc00:0:3::d6")}, Invalid, "decapsulates before the end"),
        (
            {"segments": ("fc00:0:2::e", "fc00:0:1::e", "fc00:0:3::d6")},
            Invalid,
            "the path r1 -> r2 -> r1 -> r3 visits r1 more than once",
        ),
        ({"prefix": "fd00:2::/64"}, Conflict, "policy to-h2 already steers fd00:2::/64 at r1"),
        ({"segments": FORWARD}, Conflict, "policy to-h2 has the same SID list at r1"),
    ],
)
def test_policies_that_make_no_sense_are_refused(changes, error, message):
    with pytest.raises(error, match=message):
        check_policy(policy(**changes), lab())


def test_a_prefix_in_another_table_or_at_another_head_end_is_another_route():
    fleet = lab()
    check_policy(policy(prefix="fd00:2::/64", table=10, segments=("fc00:0:3::d6",)), fleet)
    check_policy(dataclasses.replace(fleet.policies["to-h2"], name="to-h2"), fleet)  # itself


def session(name: str, forward: str, back: str, key: bytes = b"") -> Session:
    return Session(name, forward, back, hmac_key=key)


def with_sessions(*sessions: Session) -> Fleet:
    return dataclasses.replace(lab(), sessions={s.name: s for s in sessions})


def test_sessions_both_ways_between_two_nodes_run_together():
    s1, s2 = session("s1", "to-h2", "to-h1", b"k"), session("s2", "to-h1", "to-h2", b"k")
    fleet = with_sessions(s1, s2)
    check_session(s1, fleet)
    check_session(s2, fleet)


@pytest.mark.parametrize(
    ("others", "new", "error", "message"),
    [
        ((), session("s", "nope", "to-h1"), Invalid, "policy 'nope' does not exist"),
        ((), session("s", "to-h2", "r3-r2"), Invalid, "return policy r3-r2 goes r3 -> r2"),
        (
            (session("s1", "to-h2", "to-h1"),),
            session("s", "to-h2", "to-h1"),
            Conflict,
            "session s1 already measures policy to-h2",
        ),
        (
            (session("s1", "to-h2", "to-h1", b"a"),),
            session("s", "r2-r3", "r3-r2", b"b"),
            Invalid,
            "session s1 is reflected by r3 with another HMAC key",
        ),
        (
            (session("s1", "to-h2", "to-h1"),),
            session("s", "r2-r3", "r3-r2", b"b"),
            Invalid,
            "session s1 is reflected by r3 with no HMAC key",
        ),
    ],
)
def test_sessions_that_cannot_run_are_refused(others, new, error, message):
    with pytest.raises(error, match=message):
        check_session(new, with_sessions(*others))


def test_sessions_between_two_nodes_may_use_any_policies():
    """Each session's probes are steered into their own segment list (a mark per SSID), so a
    second policy between r1 and r3 is measured apart, and both return on to-h1."""
    fleet = with_sessions(session("s1", "to-h2", "to-h1"))
    fleet.policies["direct"] = one("direct", "r1", "r3", ("fc00:0:3::d6",), "fd00:3::/64", 9)
    check_session(session("s", "direct", "to-h1"), fleet)


def test_a_session_needs_probe_addresses_at_both_ends():
    fleet = lab()
    fleet.nodes["r3"] = dataclasses.replace(fleet.nodes["r3"], probe_address="")
    with pytest.raises(Invalid, match="node r3 has no probe_address"):
        check_session(session("s", "to-h2", "to-h1"), fleet)
    # r2 is on the path but no end: it needs none
    fleet = lab()
    fleet.nodes["r2"] = dataclasses.replace(fleet.nodes["r2"], probe_address="")
    check_session(session("s", "to-h2", "to-h1"), fleet)


# ---- several segment lists -----------------------------------------------------------------------

VIA_R2 = SegmentList(FORWARD, "via-r2", 3)
DIRECT = SegmentList(("fc00:0:3::d6",), "direct", 1)


def multi(*lists: SegmentList, **changes) -> Policy:
    return dataclasses.replace(policy(), segment_lists=lists, **changes)


def test_a_policy_with_several_segment_lists_checks_each_one():
    fleet = lab()
    fleet.policies.pop("to-h2")
    check_policy(multi(VIA_R2, DIRECT, prefix="fd00:2::/64"), fleet)
    assert path(multi(VIA_R2, DIRECT), fleet, DIRECT) == ("r1", "r3")
    assert path(multi(VIA_R2, DIRECT), fleet) == ("r1", "r2", "r3")  # the first one's


@pytest.mark.parametrize(
    ("lists", "changes", "message"),
    [
        ((VIA_R2, dataclasses.replace(DIRECT, name="via-r2")), {}, "names via-r2 are given more"),
        (
            (VIA_R2, dataclasses.replace(VIA_R2, name="again")),
            {},
            "segment lists via-r2 and again have the same SIDs",
        ),
        ((VIA_R2, dataclasses.replace(DIRECT, weight=257)), {}, "direct: weight 257 is not 1 to"),
        ((VIA_R2, dataclasses.replace(DIRECT, weight=0)), {}, "direct: weight 0 is not 1 to"),
        ((VIA_R2, DIRECT), {"encap_mode": EncapMode.INLINE}, "inline cannot hash flows over"),
        (
            (VIA_R2, SegmentList(("fc00:0:2::d6",), "bad")),
            {},
            "the last SID fc00:0:2::d6 in segment list bad is on node r2, not on the tail",
        ),
        (
            (VIA_R2, SegmentList(("fc00::99",), "bad")),
            {},
            "SIDs fc00::99 in segment list bad are not local SIDs",
        ),
        ((), {}, "a policy needs at least one segment list"),
    ],
)
def test_segment_lists_that_make_no_sense_are_refused(lists, changes, message):
    with pytest.raises(Invalid, match=message):
        check_policy(multi(*lists, **changes), lab())


def test_a_segment_list_may_not_repeat_another_policy_s_sid_list_at_the_head_end():
    with pytest.raises(
        Conflict, match="policy to-h2 has the same SID list at r1 \\(segment list via-r2\\)"
    ):
        check_policy(multi(DIRECT, VIA_R2), lab())


def with_multi(*sessions: Session) -> Fleet:
    fleet = with_sessions(*sessions)
    fleet.policies["to-h2"] = multi(VIA_R2, DIRECT, name="to-h2", prefix="fd00:2::/64")
    return fleet


def test_sessions_share_a_policy_one_segment_list_each():
    on_direct = Session("s1", "to-h2", "to-h1", segment_list="direct")
    fleet = with_multi(on_direct)
    check_session(Session("s2", "to-h2", "to-h1", segment_list="via-r2"), fleet)
    with pytest.raises(
        Conflict, match="session s1 already measures segment list direct of policy to-h2"
    ):
        check_session(Session("s2", "to-h2", "to-h1"), fleet)  # every one, direct too
    with pytest.raises(Invalid, match="policy to-h2 has no segment list 'nope'"):
        check_session(Session("s2", "to-h2", "to-h1", segment_list="nope"), fleet)
    with pytest.raises(Invalid, match="return policy to-h1 has no segment list 'nope'"):
        check_session(
            Session("s2", "to-h2", "to-h1", segment_list="via-r2", return_segment_list="nope"),
            fleet,
        )
    with pytest.raises(Invalid, match="profile 'slow' does not exist"):
        check_session(Session("s2", "to-h2", "to-h1", segment_list="via-r2", profile="slow"), fleet)
