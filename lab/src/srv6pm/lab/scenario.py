"""The monitoring scenario of the default topology, through the node managers' gRPC API only:
SRv6 policies h1 <-> h2 over r1 - r2 - r3, with r1 ingress / r2 transit / r3 egress for
h1 -> h2 and the reverse roles for h2 -> h1. Used by the demo and the lab tests."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc
from srv6pm.proto.v1 import records_pb2

from .lab import Lab

FORWARD = "h1-h2"
REVERSE = "h2-h1"
FORWARD_SIDS = ("fc00:0:2::e", "fc00:0:3::d6")  # End at r2, End.DT6 at r3
REVERSE_SIDS = ("fc00:0:2::e", "fc00:0:1::d6")  # End at r2, End.DT6 at r1
FLOWMON_IDS = {FORWARD: 1, REVERSE: 2}  # RFC 9343 FlowMonIDs, the same on every node
H1, H2 = "fd00:1::2", "fd00:2::2"


def _flows(
    lab: Lab,
    router: str,
    forward: records_pb2.Role,
    reverse: records_pb2.Role,
    fwd_peer: str,
    rev_peer: str,
) -> list[pb.MonitoredFlow]:
    return [
        pb.MonitoredFlow(
            name=FORWARD,
            segments=FORWARD_SIDS,
            role=forward,
            interfaces=[lab.interface(router, fwd_peer)],
            flow_mon_id=FLOWMON_IDS[FORWARD],
        ),
        pb.MonitoredFlow(
            name=REVERSE,
            segments=REVERSE_SIDS,
            role=reverse,
            interfaces=[lab.interface(router, rev_peer)],
            flow_mon_id=FLOWMON_IDS[REVERSE],
        ),
    ]


def desired_states(
    lab: Lab, marking: pb.MarkingMode = pb.MARKING_MODE_ALTMARK
) -> dict[str, pb.NodeState]:
    """What each router must hold for the scenario, in the given marking mode."""
    states = {
        "r1": pb.NodeState(
            policies=[
                pb.SrPolicy(
                    name="to-h2",
                    prefix="fd00:2::/64",
                    segments=FORWARD_SIDS,
                    mode=pb.ENCAP_MODE_ENCAP,
                )
            ],
            local_sids=[pb.LocalSid(sid="fc00:0:1::d6", behaviour=pb.BEHAVIOUR_END_DT6)],
            flows=_flows(lab, "r1", records_pb2.ROLE_INGRESS, records_pb2.ROLE_EGRESS, "r2", "r2"),
        ),
        "r2": pb.NodeState(
            local_sids=[pb.LocalSid(sid="fc00:0:2::e", behaviour=pb.BEHAVIOUR_END)],
            flows=_flows(lab, "r2", records_pb2.ROLE_TRANSIT, records_pb2.ROLE_TRANSIT, "r1", "r3"),
        ),
        "r3": pb.NodeState(
            policies=[
                pb.SrPolicy(
                    name="to-h1",
                    prefix="fd00:1::/64",
                    segments=REVERSE_SIDS,
                    mode=pb.ENCAP_MODE_ENCAP,
                )
            ],
            local_sids=[pb.LocalSid(sid="fc00:0:3::d6", behaviour=pb.BEHAVIOUR_END_DT6)],
            flows=_flows(lab, "r3", records_pb2.ROLE_EGRESS, records_pb2.ROLE_INGRESS, "r2", "r2"),
        ),
    }
    for state in states.values():
        state.marking.mode = marking
    return states


def stub(lab: Lab, router: str) -> pb_grpc.NodeManagerStub:
    """A NodeManager client of ``router`` on :meth:`Lab.channel` (mutual TLS in a TLS lab)."""
    return pb_grpc.NodeManagerStub(lab.channel(router))


def apply(
    lab: Lab, marking: pb.MarkingMode = pb.MARKING_MODE_ALTMARK
) -> dict[str, pb.ApplyStateResponse]:
    return apply_states(lab, desired_states(lab, marking))


SESSION = "h1-h2-stamp"
SSID = 1
# The session's delay histogram bins (µs) and thresholds: what the dashboards' histogram,
# liveness and threshold panels show. A veth path's two-way delay is tens of µs.
HISTOGRAM_EDGES_US = (20, 50, 100, 200, 500, 1000)
LIVENESS = pb.Liveness(enabled=True, down_after=3, up_after=1)
# Each metric's first value is always reported; then a move of half its value or 200 µs
THRESHOLDS = pb.Thresholds(
    percent=50.0,
    absolute_us=200,
    metrics=[pb.THRESHOLD_METRIC_TWO_WAY_MEAN, pb.THRESHOLD_METRIC_JITTER],
)
R1_PROBE_ADDRESS = "fcf0:12::1"  # r1's address on the r1-r2 link
R3_REFLECTOR_ADDRESS = "fcf0:23::3"  # r3's address on the r2-r3 link


def stamp_states(
    lab: Lab,
    sender_key: bytes = b"",
    reflector_key: bytes = b"",
    delay_interval_ms: int = 0,
    computation_interval_ms: int = 0,
) -> dict[str, pb.NodeState]:
    """The scenario plus a STAMP session r1 -> r3 along h1-h2's SID list, replies along
    h2-h1's (told to r3's reflector in the Return Path TLV), with a delay histogram, liveness
    and delay thresholds (none of which changes what it sends); a computation interval needs
    a delay interval."""
    states = desired_states(lab)
    states["r1"].sessions.append(
        pb.SenderSession(
            name=SESSION,
            ssid=SSID,
            reflector_address=R3_REFLECTOR_ADDRESS,
            source_address=R1_PROBE_ADDRESS,
            direct_segments=FORWARD_SIDS,
            return_segments=REVERSE_SIDS,
            forward_flow=FORWARD,
            reverse_flow=REVERSE,
            delay_interval_ms=delay_interval_ms,
            hmac_key=sender_key,
            policy="to-h2",
            reflector_node="r3",
            histogram_edges_us=HISTOGRAM_EDGES_US,
            burst_size=1,  # as GetState gives it back (0 means 1)
            liveness=LIVENESS,
            computation_interval_ms=computation_interval_ms,
            thresholds=THRESHOLDS,
        )
    )
    states["r3"].reflector.CopyFrom(
        pb.ReflectorSettings(
            enabled=True,
            address=R3_REFLECTOR_ADDRESS,
            stateful=True,
            hmac_key=reflector_key,
            sessions=[
                pb.ReflectorSession(
                    ssid=SSID,
                    forward_flow=FORWARD,
                    reverse_flow=REVERSE,
                    return_paths=[
                        pb.ReturnPath(sender_address=R1_PROBE_ADDRESS, segments=REVERSE_SIDS)
                    ],
                )
            ],
        )
    )
    return states


def apply_states(lab: Lab, states: dict[str, pb.NodeState]) -> dict[str, pb.ApplyStateResponse]:
    """Every router's state, applied on all routers at once (as the controller pushes them)."""
    with ThreadPoolExecutor(max(1, len(states))) as pool:
        replies = {
            router: pool.submit(stub(lab, router).ApplyState, pb.ApplyStateRequest(desired=state))
            for router, state in states.items()
        }
        return {router: reply.result() for router, reply in replies.items()}
