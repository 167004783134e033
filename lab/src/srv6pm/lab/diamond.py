"""The monitoring scenario of the diamond topology (two disjoint paths r1 - r2 - r4 and
r1 - r3 - r4), through the node managers' gRPC API only: two SR policies (colours) between the
same two routers, one over each path, and one policy hashing flows over two weighted segment
lists, one over each path, with protection. Each segment list is a monitored flow of its own,
measured by its own STAMP session r1 -> r4 whose probes carry exactly that segment list, with
liveness. Replies return on one reverse policy (r4 - r2 - r1) for every session."""

from __future__ import annotations

from dataclasses import dataclass

from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

from .fleet import Api, register_nodes
from .lab import Lab

H1 = "fd00:1::2"
VIA_R2_ADDRESS, VIA_R3_ADDRESS, HASHED_ADDRESS = "fd00:2::2", "fd00:2::3", "fd00:2::4"
R1_PROBE_ADDRESS = "fcf0:12::1"
R4_REFLECTOR_ADDRESS = "fcf0:24::4"
RETURN = "r4-r1"
RETURN_SIDS = ("fc00:0:2::e", "fc00:0:1::d6")
RETURN_FLOWMON_ID = 9
PROBE_INTERVAL_MS = 100
DOWN_AFTER = 3


@dataclass(frozen=True)
class Measured:
    """One measured segment list: its policy, flow, session and the transit router."""

    policy: str
    segment_list: str  # "" for a policy of one segment list
    segments: tuple[str, ...]
    transit: str
    flow_mon_id: int
    ssid: int

    @property
    def flow(self) -> str:
        return f"{self.policy}/{self.segment_list}" if self.segment_list else self.policy

    @property
    def session(self) -> str:
        return f"{self.flow}-stamp"


# Each policy ends at a decapsulating SID of its own on r4, so a drop rule can tell them apart.
VIA_R2 = Measured("via-r2", "", ("fc00:0:2::e", "fc00:0:4::a"), "r2", 1, 1)
VIA_R3 = Measured("via-r3", "", ("fc00:0:3::e", "fc00:0:4::b"), "r3", 2, 2)
HASHED_SL0 = Measured("hashed", "sl0", ("fc00:0:2::e1", "fc00:0:4::c"), "r2", 3, 3)
HASHED_SL1 = Measured("hashed", "sl1", ("fc00:0:3::e1", "fc00:0:4::c"), "r3", 4, 4)
MEASURED = (VIA_R2, VIA_R3, HASHED_SL0, HASHED_SL1)


def _flow(m: Measured, lab: Lab, router: str, role: records_pb2.Role) -> pb.MonitoredFlow:
    peers = {"r1": ("r2", "r3"), "r4": ("r2", "r3"), "r2": ("r1", "r4"), "r3": ("r1", "r4")}
    return pb.MonitoredFlow(
        name=m.flow,
        segments=m.segments,
        role=role,
        interfaces=[lab.interface(router, p) for p in peers[router]],
        flow_mon_id=m.flow_mon_id,
    )


def _return_flow(lab: Lab, router: str, role: records_pb2.Role, peer: str) -> pb.MonitoredFlow:
    return pb.MonitoredFlow(
        name=RETURN,
        segments=RETURN_SIDS,
        role=role,
        interfaces=[lab.interface(router, peer)],
        flow_mon_id=RETURN_FLOWMON_ID,
    )


def states(
    lab: Lab, protection: bool = True, histogram_edges_us: tuple[int, ...] = ()
) -> dict[str, pb.NodeState]:
    """What each router holds: policies, SIDs, one flow per segment list, the sessions."""
    r1 = pb.NodeState(
        policies=[
            pb.SrPolicy(name="via-r2", prefix=f"{VIA_R2_ADDRESS}/128", segments=VIA_R2.segments),
            pb.SrPolicy(name="via-r3", prefix=f"{VIA_R3_ADDRESS}/128", segments=VIA_R3.segments),
            pb.SrPolicy(
                name="hashed",
                prefix=f"{HASHED_ADDRESS}/128",
                segment_lists=[
                    pb.SegmentList(name="sl0", segments=HASHED_SL0.segments, weight=1),
                    pb.SegmentList(name="sl1", segments=HASHED_SL1.segments, weight=1),
                ],
                protection=protection,
            ),
        ],
        local_sids=[pb.LocalSid(sid="fc00:0:1::d6", behaviour=pb.BEHAVIOUR_END_DT6)],
        flows=[
            *(_flow(m, lab, "r1", records_pb2.ROLE_INGRESS) for m in MEASURED),
            _return_flow(lab, "r1", records_pb2.ROLE_EGRESS, "r2"),
        ],
        sessions=[
            pb.SenderSession(
                name=m.session,
                ssid=m.ssid,
                reflector_address=R4_REFLECTOR_ADDRESS,
                source_address=R1_PROBE_ADDRESS,
                direct_segments=m.segments,
                return_segments=RETURN_SIDS,
                forward_flow=m.flow,
                reverse_flow=RETURN,
                delay_interval_ms=PROBE_INTERVAL_MS,
                policy=m.policy,
                segment_list=m.segment_list,
                reflector_node="r4",
                liveness=pb.Liveness(enabled=True, down_after=DOWN_AFTER, up_after=1),
                histogram_edges_us=histogram_edges_us,
            )
            for m in MEASURED
        ],
    )
    transit = {
        router: pb.NodeState(
            local_sids=[
                pb.LocalSid(sid=f"fc00:0:{router[1]}::{end}", behaviour=pb.BEHAVIOUR_END)
                for end in ("e", "e1")
            ],
            flows=[
                *(
                    _flow(m, lab, router, records_pb2.ROLE_TRANSIT)
                    for m in MEASURED
                    if m.transit == router
                ),
                *(
                    [_return_flow(lab, "r2", records_pb2.ROLE_TRANSIT, "r4")]
                    if router == "r2"
                    else []
                ),
            ],
        )
        for router in ("r2", "r3")
    }
    r4 = pb.NodeState(
        policies=[pb.SrPolicy(name="to-h1", prefix="fd00:1::/64", segments=RETURN_SIDS)],
        local_sids=[
            pb.LocalSid(sid=f"fc00:0:4::{end}", behaviour=pb.BEHAVIOUR_END_DT6)
            for end in ("a", "b", "c")
        ],
        flows=[
            *(_flow(m, lab, "r4", records_pb2.ROLE_EGRESS) for m in MEASURED),
            _return_flow(lab, "r4", records_pb2.ROLE_INGRESS, "r2"),
        ],
        reflector=pb.ReflectorSettings(
            enabled=True,
            address=R4_REFLECTOR_ADDRESS,
            stateful=True,
            sessions=[
                pb.ReflectorSession(
                    ssid=m.ssid,
                    forward_flow=m.flow,
                    reverse_flow=RETURN,
                    return_paths=[
                        pb.ReturnPath(sender_address=R1_PROBE_ADDRESS, segments=RETURN_SIDS)
                    ],
                )
                for m in MEASURED
            ],
        ),
    )
    return {"r1": r1, **transit, "r4": r4}


def host_addresses(lab: Lab) -> None:
    """h2 answers on every policy's address (one per policy: policies steer by prefix)."""
    interface = lab.kernel_interface("h2", "r4")
    for address in (VIA_R3_ADDRESS, HASHED_ADDRESS):
        lab.network.exec(
            "h2", ["ip", "-6", "addr", "replace", f"{address}/64", "dev", interface, "nodad"]
        )


# ---- the same, described to the controller (REST): what the demo and controller tests drive ----

PROBE_ADDRESSES = {
    "r1": R1_PROBE_ADDRESS,
    "r2": "fcf0:12::2",
    "r3": "fcf0:13::3",
    "r4": "fcf0:24::4",
}
HOST_OF = {"r1": "h1", "r4": "h2"}  # the interfaces toward hosts are the domain's boundary
REST_SIDS = (
    {"sid": "fc00:0:1::d6", "node": "r1", "behaviour": "End.DT6"},
    *(
        {"sid": f"fc00:0:{r[1]}::{end}", "node": r, "behaviour": "End"}
        for r in ("r2", "r3")
        for end in ("e", "e1")
    ),
    *({"sid": f"fc00:0:4::{end}", "node": "r4", "behaviour": "End.DT6"} for end in "abc"),
)
REST_POLICIES = (
    {
        "name": VIA_R2.policy,
        "head_node": "r1",
        "tail_node": "r4",
        "segments": list(VIA_R2.segments),
        "prefix": f"{VIA_R2_ADDRESS}/128",
    },
    {
        "name": VIA_R3.policy,
        "head_node": "r1",
        "tail_node": "r4",
        "segments": list(VIA_R3.segments),
        "prefix": f"{VIA_R3_ADDRESS}/128",
    },
    {
        "name": HASHED_SL0.policy,
        "head_node": "r1",
        "tail_node": "r4",
        "segment_lists": [
            {"name": m.segment_list, "segments": list(m.segments)} for m in (HASHED_SL0, HASHED_SL1)
        ],
        "prefix": f"{HASHED_ADDRESS}/128",
        "protection": True,
    },
    {
        "name": RETURN,
        "head_node": "r4",
        "tail_node": "r1",
        "segments": list(RETURN_SIDS),
        "prefix": "fd00:1::/64",
    },
)
PROFILE = "liveness-100ms"


def register(
    api: Api, lab: Lab, histogram_edges_us: tuple[int, ...] = (1_000, 5_000, 20_000)
) -> None:
    """The diamond's routers as nodes, their SIDs, the policies, and a measurement profile:
    a probe every 100 ms, liveness (down after 3 missed), delay histogram bins."""
    register_nodes(api, lab, PROBE_ADDRESSES, HOST_OF)
    for sid in REST_SIDS:
        api.post("/v1/local-sids", sid)
    for policy in REST_POLICIES:
        api.post("/v1/policies", policy)
    api.post(
        "/v1/profiles",
        {
            "name": PROFILE,
            "delay_interval_ms": PROBE_INTERVAL_MS,
            "liveness": {"enabled": True, "down_after": DOWN_AFTER, "up_after": 1},
            "histogram_edges_us": list(histogram_edges_us),
        },
    )


def add_sessions(api: Api, policies: tuple[str, ...] = ("via-r2", "via-r3", "hashed")) -> None:
    """A session per policy (every segment list of it), returning on r4 - r2 - r1."""
    for policy in policies:
        api.post(
            "/v1/sessions",
            {"name": policy, "policy": policy, "return_policy": RETURN, "profile": PROFILE},
        )
