"""Bursts, computation intervals, delay thresholds and delay-only sessions: a profile's settings
and a session's own, merged field by field into the SenderSessions (domain/derive.py) and on
the wire (adapters/nodes.py); the settings a node manager would refuse, refused by the domain
(domain/measured.py, domain/paths.py) with the sender node's block period."""

from __future__ import annotations

import dataclasses

import pytest
from srv6pm.controller.adapters.nodes import metric_to_proto, state_to_proto
from srv6pm.controller.domain.derive import monitored, node_states
from srv6pm.controller.domain.errors import Invalid
from srv6pm.controller.domain.measured import check_measurement, measurement
from srv6pm.controller.domain.model import (
    THRESHOLD_METRICS,
    DelayThresholds,
    Measurement,
    NodeInfo,
    Probed,
    Profile,
    Session,
)
from srv6pm.controller.domain.paths import check_profile, check_session
from srv6pm.controller.domain.state import Reflector
from srv6pm.proto.v1 import node_manager_pb2 as pb
from test_controller_derive_segment_lists import (
    BACK_VIA_R2,
    ECMP,
    PROBE,
    VIA_R2,
    VIA_R3,
    diamond,
    reflected,
    sender,
)

WATCH = DelayThresholds(20.0, 500, True, 5_000, ("two_way_p99", "jitter"))
TUNED = Profile(
    "tuned",
    Measurement(
        delay_interval_ms=100,
        burst_size=5,
        computation_interval_ms=1_000,
        thresholds=DelayThresholds(absolute_us=300),
    ),
)


def fleet_of(*sessions: Session, period_ns: int | None = None):
    fleet = diamond([ECMP], list(sessions), profiles={"tuned": TUNED})
    if period_ns is not None:
        info = NodeInfo("linux", "x", period_ns, ("eth-r2", "eth-r3"))
        fleet.nodes["r1"] = dataclasses.replace(fleet.nodes["r1"], info=info)
    return fleet


def test_a_profile_s_bursts_intervals_and_thresholds_reach_every_sender_of_its_sessions():
    session = Session("s", "ecmp", "back", profile="tuned", ssids=(Probed("a", 1), Probed("b", 2)))
    states = node_states(fleet_of(session)).states
    # the default metric is named: the node manager holds it so and reads it back so
    held = DelayThresholds(absolute_us=300, metrics=("two_way_mean",))
    tuned = {
        "delay_interval_ms": 100,
        "burst_size": 5,
        "computation_interval_ms": 1_000,
        "thresholds": held,
    }
    assert states["r1"].sessions == (
        sender("s/a", 1, VIA_R2, "ecmp/a", "ecmp", "a", **tuned),
        sender("s/b", 2, VIA_R3, "ecmp/b", "ecmp", "b", **tuned),
    )
    wire = state_to_proto(states["r1"]).sessions[0]
    assert (wire.burst_size, wire.computation_interval_ms) == (5, 1_000)
    assert wire.thresholds == pb.Thresholds(
        absolute_us=300, metrics=[pb.THRESHOLD_METRIC_TWO_WAY_MEAN]
    )


def test_a_session_s_own_settings_win_field_by_field_and_thresholds_as_a_whole():
    session = Session(
        "s",
        "ecmp",
        "back",
        segment_list="a",
        profile="tuned",
        ssids=(Probed("a", 1),),
        burst_size=10,
        thresholds=WATCH,
    )
    fleet = fleet_of(session)
    assert measurement(session, fleet) == Measurement(
        delay_interval_ms=100, burst_size=10, computation_interval_ms=1_000, thresholds=WATCH
    )
    (only,) = node_states(fleet).states["r1"].sessions
    assert only == sender(
        "s",
        1,
        VIA_R2,
        "ecmp/a",
        "ecmp",
        "a",
        delay_interval_ms=100,
        burst_size=10,
        computation_interval_ms=1_000,
        thresholds=WATCH,
    )
    (wire,) = state_to_proto(node_states(fleet).states["r1"]).sessions
    assert wire == pb.SenderSession(
        name="s",
        ssid=1,
        reflector_address=PROBE["r4"],
        source_address=PROBE["r1"],
        direct_segments=VIA_R2,
        return_segments=BACK_VIA_R2,
        forward_flow="ecmp/a",
        reverse_flow="back",
        delay_interval_ms=100,
        policy="ecmp",
        reflector_node="r4",
        segment_list="a",
        burst_size=10,
        computation_interval_ms=1_000,
        thresholds=pb.Thresholds(
            percent=20.0,
            absolute_us=500,
            check_each_burst=True,
            min_report_interval_ms=5_000,
            metrics=[pb.THRESHOLD_METRIC_TWO_WAY_P99, pb.THRESHOLD_METRIC_JITTER],
        ),
    )


def test_thresholds_turned_off_by_a_session_are_no_thresholds_message():
    session = Session(
        "s",
        "ecmp",
        "back",
        segment_list="a",
        profile="tuned",
        ssids=(Probed("a", 1),),
        thresholds=DelayThresholds(),
    )
    (wire,) = state_to_proto(node_states(fleet_of(session)).states["r1"]).sessions
    assert not wire.HasField("thresholds")


def test_a_delay_only_session_names_no_flows_and_places_none():
    """No Direct Measurement TLV, so no loss, and nothing of the data to mark or count: the
    reflector session names no flows but still steers the replies into the return list."""
    delay_only = Session("d", "ecmp", "back", segment_list="b", ssids=(Probed("b", 3),), loss=False)
    fleet = fleet_of(delay_only)
    assert monitored(fleet) == set()
    states = node_states(fleet).states
    assert states["r1"].sessions == (sender("d", 3, VIA_R3, "", "ecmp", "b", reverse_flow=""),)
    assert states["r4"].reflector == Reflector(PROBE["r4"], b"", (reflected(3, "", back=""),))
    assert all(not state.flows for state in states.values())
    (wire,) = state_to_proto(states["r1"]).sessions
    assert (wire.forward_flow, wire.reverse_flow) == ("", "")
    # a profile that measures delay only, and a session that measures loss all the same
    quiet = Profile("quiet", Measurement(loss=False))
    loud = Session("l", "ecmp", "back", segment_list="a", profile="quiet", loss=True)
    fleet = diamond(
        [ECMP], [dataclasses.replace(loud, ssids=(Probed("a", 4),))], profiles={"quiet": quiet}
    )
    (only,) = node_states(fleet).states["r1"].sessions
    assert (only.forward_flow, only.reverse_flow) == ("ecmp/a", "back")


@pytest.mark.parametrize(
    ("m", "message"),
    [
        (Measurement(delay_interval_ms=5), "x: delay interval below 10 ms"),
        (
            Measurement(computation_interval_ms=1_000),
            "x: a computation interval needs a delay interval",
        ),
        (
            Measurement(delay_interval_ms=300, computation_interval_ms=1_000),
            "x: computation interval 1000 ms is not a multiple of the delay interval (300 ms)",
        ),
        (
            Measurement(delay_interval_ms=100, computation_interval_ms=3_000),
            "x: computation interval 3000 ms does not divide the 10000 ms block of its sender's "
            "node",
        ),
    ],
)
def test_settings_a_node_manager_would_refuse_are_invalid(m, message):
    with pytest.raises(Invalid) as refused:
        check_measurement(m, "x", 10_000_000_000)
    assert str(refused.value).startswith(message)


def test_the_block_is_checked_only_once_the_sender_s_node_manager_said_it():
    every_3s = Session(
        "s",
        "ecmp",
        "back",
        segment_list="a",
        profile="tuned",
        computation_interval_ms=3_000,
        ssids=(Probed("a", 1),),
    )
    check_session(every_3s, fleet_of(every_3s))  # no GetInfo yet: the node manager checks
    check_session(every_3s, fleet_of(every_3s, period_ns=6_000_000_000))
    with pytest.raises(Invalid) as refused:
        check_session(every_3s, fleet_of(every_3s, period_ns=10_000_000_000))
    assert str(refused.value) == (
        "session s (profile tuned): computation interval 3000 ms does not divide the 10000 ms "
        "block of its sender's node"
    )
    check_profile(TUNED)
    with pytest.raises(Invalid, match="profile p: a computation interval needs a delay"):
        check_profile(Profile("p", Measurement(computation_interval_ms=1_000)))


def test_every_threshold_metric_is_sent_as_the_proto_member_of_its_name():
    for metric in THRESHOLD_METRICS:
        assert pb.ThresholdMetric.Name(metric_to_proto(metric)) == (
            f"THRESHOLD_METRIC_{metric.upper()}"
        )
    # and the proto has none the controller cannot ask for
    named = {pb.ThresholdMetric.Name(v) for v in pb.ThresholdMetric.values() if v}
    assert named == {f"THRESHOLD_METRIC_{m.upper()}" for m in THRESHOLD_METRICS}
