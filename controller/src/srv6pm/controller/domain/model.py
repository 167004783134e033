"""The desired state of a measurement domain, as operators describe it: nodes, local SIDs, SR
policies and monitoring sessions. Pure data; the SQL store and the REST schemas convert to it."""

from __future__ import annotations

from dataclasses import dataclass, field

from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode


@dataclass(frozen=True)
class NodeInfo:
    """What a node manager said of itself (GetInfo), kept with the node."""

    driver: str
    version: str
    period_ns: int
    interfaces: tuple[str, ...]
    behaviours: tuple[str, ...] = ()
    encap_modes: tuple[str, ...] = ()
    max_flows: int = 0
    max_segments: int = 0
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Node:
    name: str
    endpoint: str  # node manager gRPC host:port
    probe_address: str = ""  # STAMP source / reflector address (reachable after decapsulation)
    core_interfaces: tuple[str, ...] = ()  # empty: every interface but lo and the boundary ones
    boundary_interfaces: tuple[str, ...] = ()
    info: NodeInfo | None = None

    def monitored_interfaces(self) -> tuple[str, ...]:
        """Where a monitored flow's programs hook on this node. Only the ingress hook counts (or
        the egress hook marks), so a packet is seen once whichever core interface it crosses."""
        if self.core_interfaces:
            return self.core_interfaces
        if self.info is None:
            return ()
        return tuple(
            i for i in self.info.interfaces if i != "lo" and i not in self.boundary_interfaces
        )


@dataclass(frozen=True)
class LocalSid:
    sid: str
    node: str
    behaviour: Behaviour
    nexthop: str = ""
    lookup_table: int = 0
    device: str = ""
    table: int = 0


@dataclass(frozen=True)
class Policy:
    name: str
    head_node: str
    tail_node: str
    segments: tuple[str, ...]
    prefix: str
    encap_mode: EncapMode = EncapMode.ENCAP
    device: str = ""
    table: int = 0
    flow_mon_id: int = 0  # allocated by the controller, unique in the domain


@dataclass(frozen=True)
class Session:
    """A STAMP session measuring a policy and its return policy, with per-block loss both ways."""

    name: str
    policy: str
    return_policy: str
    delay_interval_ms: int = 0  # 0 = one probe per block
    hmac_key: bytes = b""
    ssid: int = 0  # allocated by the controller, unique in the domain


@dataclass(frozen=True)
class Fleet:
    """Everything the controller holds, as one value the pure functions work on."""

    nodes: dict[str, Node] = field(default_factory=dict)
    sids: dict[str, LocalSid] = field(default_factory=dict)
    policies: dict[str, Policy] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    marking_mode: MarkingMode = MarkingMode.ALTMARK
