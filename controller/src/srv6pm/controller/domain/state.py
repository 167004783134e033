"""What one node manager is told to hold (its desired state), and what it says an apply would
change. Domain values: adapters/nodes.py turns them into the node-manager contract (proto/) and
back, so nothing above the adapters sees a protobuf message."""

from __future__ import annotations

from dataclasses import dataclass, field

from srv6pm.common.srv6 import MarkingMode, Role

from .model import DelayThresholds, LivenessSettings, LocalSid, Policy


@dataclass(frozen=True)
class Marking:
    mode: MarkingMode
    # Interfaces facing outside the measurement domain: marks arriving there are neutralised.
    boundary_interfaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class MonitoredFlow:
    """The packets of one segment list of an SR policy, as one node counts (or marks) them."""

    name: str
    segments: tuple[str, ...]
    role: Role
    interfaces: tuple[str, ...]
    flow_mon_id: int


@dataclass(frozen=True)
class SenderSession:
    """A STAMP Session-Sender on a policy's head-end probing one of its segment lists (RFC 8762
    section 4.2, RFC 9503)."""

    name: str
    ssid: int
    reflector_address: str
    source_address: str
    direct_segments: tuple[str, ...]
    return_segments: tuple[str, ...]
    forward_flow: str  # "" with reverse_flow "": delay only (no Direct Measurement)
    reverse_flow: str
    delay_interval_ms: int
    hmac_key: bytes
    policy: str
    reflector_node: str
    segment_list: str = ""  # the name of the probed segment list (a label; protection acts on it)
    liveness: LivenessSettings = field(default_factory=LivenessSettings)
    histogram_edges_us: tuple[int, ...] = ()
    burst_size: int = 1
    computation_interval_ms: int = 0
    thresholds: DelayThresholds = field(default_factory=DelayThresholds)  # canonical form


@dataclass(frozen=True)
class ReturnPath:
    sender_address: str
    segments: tuple[str, ...]


@dataclass(frozen=True)
class ReflectorSession:
    ssid: int
    forward_flow: str
    reverse_flow: str
    return_paths: tuple[ReturnPath, ...]


@dataclass(frozen=True)
class Reflector:
    """The node's STAMP Session-Reflector (RFC 8762 section 4.3); a node without one has none."""

    address: str
    hmac_key: bytes
    sessions: tuple[ReflectorSession, ...]
    stateful: bool = True  # own sequence numbers per session (section 4.3.2)


@dataclass(frozen=True)
class NodeState:
    """Everything one node holds: the operator's SIDs and policies placed on it, and the flows,
    sessions and reflector derived for it."""

    marking: Marking
    local_sids: tuple[LocalSid, ...] = ()
    policies: tuple[Policy, ...] = ()
    flows: tuple[MonitoredFlow, ...] = ()
    sessions: tuple[SenderSession, ...] = ()
    reflector: Reflector | None = None


@dataclass(frozen=True)
class Changes:
    added: int = 0
    removed: int = 0
    unchanged: int = 0

    def __str__(self) -> str:
        return f"+{self.added} -{self.removed}"


@dataclass(frozen=True)
class StateDiff:
    """What applying a state changes (or would change, in a dry run) on a node."""

    policies: Changes = Changes()
    local_sids: Changes = Changes()
    flows: Changes = Changes()
    sessions: Changes = Changes()
    marking_changed: bool = False
    reflector_changed: bool = False

    @property
    def changed(self) -> bool:
        parts = (self.policies, self.local_sids, self.flows, self.sessions)
        return (
            any(c.added or c.removed for c in parts)
            or self.marking_changed
            or self.reflector_changed
        )
