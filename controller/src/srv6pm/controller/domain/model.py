"""The desired state of a measurement domain, as operators describe it: nodes, local SIDs, SR
policies (each with one or more segment lists), measurement profiles and monitoring sessions.
Pure data; the SQL store and the REST schemas convert to it."""

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


MAX_WEIGHT = 256  # multipath weight of a segment list (the node manager's limit)


@dataclass(frozen=True)
class SegmentList:
    """One SID list of a policy: its own measured path, with its own FlowMonID."""

    segments: tuple[str, ...]
    name: str = "sl0"
    weight: int = 1  # share of the policy's flows hashed onto it
    flow_mon_id: int = 0  # allocated by the controller, unique in the domain


@dataclass(frozen=True)
class Policy:
    """An SR policy: the head-end steers `prefix` into its segment list, or hashes flows over
    several weighted ones."""

    name: str
    head_node: str
    tail_node: str
    segment_lists: tuple[SegmentList, ...]
    prefix: str
    encap_mode: EncapMode = EncapMode.ENCAP
    device: str = ""
    table: int = 0
    protection: bool = False  # the head-end stops hashing onto a segment list that is down

    def segment_list(self, name: str) -> SegmentList | None:
        return next((sl for sl in self.segment_lists if sl.name == name), None)

    def flow_name(self, sl: SegmentList) -> str:
        """The monitored flow of a segment list: the policy's name while it has only one (so
        records of single-list policies read as they always did), else policy/segment list."""
        return self.name if len(self.segment_lists) == 1 else f"{self.name}/{sl.name}"


@dataclass(frozen=True)
class LivenessSettings:
    """Down after `down_after` probes in a row without a reply within `timeout_ms` (0: the
    probe interval), up again after `up_after` replies in a row."""

    enabled: bool = False
    down_after: int = 3
    up_after: int = 1
    timeout_ms: int = 0


# What a delay threshold may watch (the node manager's ThresholdMetric); the first is the default.
THRESHOLD_METRICS = ("two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter")


@dataclass(frozen=True)
class DelayThresholds:
    """Delay thresholds with hysteresis, checked on the node (docs/STAMP.md): an event when a
    metric moved by more than `percent` % or `absolute_us` from the value last reported. Both
    0: none."""

    percent: float = 0.0
    absolute_us: int = 0
    check_each_burst: bool = False  # also on each burst's mean, not only per interval
    min_report_interval_ms: int = 0  # at most one event per metric per this long
    metrics: tuple[str, ...] = ()  # of THRESHOLD_METRICS; (): the first

    @property
    def enabled(self) -> bool:
        return bool(self.percent or self.absolute_us)

    def canonical(self) -> DelayThresholds:
        """As the node manager holds it: nothing when disabled, the default metric named."""
        if not self.enabled:
            return DelayThresholds()
        return DelayThresholds(
            self.percent,
            self.absolute_us,
            self.check_each_burst,
            self.min_report_interval_ms,
            self.metrics or THRESHOLD_METRICS[:1],
        )


@dataclass(frozen=True)
class Measurement:
    """How a session measures: what a profile names, and a session may override field by
    field (each field as a whole: liveness and thresholds are not merged inside)."""

    delay_interval_ms: int = 0  # 0 = one probe per block
    liveness: LivenessSettings = LivenessSettings()
    histogram_edges_us: tuple[int, ...] = ()
    burst_size: int = 1  # probes back to back at each probe tick
    computation_interval_ms: int = 0  # delay also per interval of this length (0: per block)
    thresholds: DelayThresholds = DelayThresholds()
    loss: bool = True  # False: delay only (no Direct Measurement, no loss records)


@dataclass(frozen=True)
class Profile:
    """A named, reusable Measurement."""

    name: str
    measurement: Measurement = Measurement()


@dataclass(frozen=True)
class Probed:
    """A segment list a session probes, and the SSID its probes carry."""

    segment_list: str
    ssid: int


@dataclass(frozen=True)
class Session:
    """A STAMP session measuring a policy (each of its segment lists, or the one named) and its
    return policy, with per-block loss both ways."""

    name: str
    policy: str
    return_policy: str
    segment_list: str = ""  # "" = every segment list of the policy
    return_segment_list: str = ""  # "" = the return policy's first
    profile: str = ""
    # explicit settings; None: the profile's, else the defaults (Measurement())
    delay_interval_ms: int | None = None
    liveness: LivenessSettings | None = None
    histogram_edges_us: tuple[int, ...] | None = None
    hmac_key: bytes = b""
    ssids: tuple[Probed, ...] = ()  # allocated by the controller, unique in the domain
    burst_size: int | None = None
    computation_interval_ms: int | None = None
    thresholds: DelayThresholds | None = None
    loss: bool | None = None

    def ssid(self, segment_list: str) -> int:
        return next((p.ssid for p in self.ssids if p.segment_list == segment_list), 0)


@dataclass(frozen=True)
class Fleet:
    """Everything the controller holds, as one value the pure functions work on."""

    nodes: dict[str, Node] = field(default_factory=dict)
    sids: dict[str, LocalSid] = field(default_factory=dict)
    policies: dict[str, Policy] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    marking_mode: MarkingMode = MarkingMode.ALTMARK
    profiles: dict[str, Profile] = field(default_factory=dict)
