"""The node's desired state: SR policies, local SIDs, monitored flows, marking bits. Behaviours,
head-end modes, marking modes and roles are srv6pm's shared SRv6 vocabulary (srv6pm.common.srv6);
each driver maps them to its own values (the Linux driver: maps.Mode, checked against BTF)."""

from __future__ import annotations

from dataclasses import dataclass, field

from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role

MAX_SEGMENTS = 16
DEFAULT_MONITORED_BIT = 0x04  # DSCP xxxxx1: RFC 2474 pool 2/3, for local use
DEFAULT_COLOUR_BIT = 0x08


MAX_WEIGHT = 256  # the kernel's multipath weight (rtnh_hops + 1)


@dataclass(frozen=True)
class SegmentList:
    """One of a policy's weighted SID lists: flows are hashed over them."""

    name: str
    segments: tuple[str, ...]
    weight: int = 1


@dataclass(frozen=True)
class SrPolicy:
    """Traffic to `prefix` steered into one SID list (`segments`) or hashed per flow over two
    or more weighted ones (`segment_lists`, and `segments` is empty)."""

    name: str
    prefix: str
    segments: tuple[str, ...]
    mode: EncapMode = EncapMode.ENCAP
    device: str = ""
    table: int = 0
    segment_lists: tuple[SegmentList, ...] = ()
    protection: bool = False  # take a segment list whose liveness is down out of the hash

    def paths(self) -> tuple[SegmentList, ...]:
        """Every segment list, the single one of `segments` included."""
        return self.segment_lists or (SegmentList("", self.segments),)

    def routed(self) -> tuple[object, ...]:
        """What the data plane holds of the policy: no names, no protection setting, segment
        lists in any order."""
        lists = sorted((sl.segments, sl.weight) for sl in self.paths())
        return (self.prefix, self.table, self.mode, self.device, tuple(lists))


# A ProbeRoute's mark: a base (a multiple of STEERING_MARKS) + SSID for a session's probes, + 65536
# + SSID for a reflector's replies on a session's declared return path.
REPLY_MARKS = 0x10000
STEERING_MARKS = 2 * REPLY_MARKS
SSID_MASK = 0xFFFF


@dataclass(frozen=True)
class ProbeRoute:
    """STAMP packets to `address` that carry `mark` (the sending socket's, or set by the
    in-kernel reflector) take `segments`: probes and replies follow exactly the segment list
    they measure, whatever the address's own route. Data traffic is never steered by it.
    Mark 0: packets without a mark (a /128 route in the main table)."""

    @property
    def is_reply(self) -> bool:
        """A reflector's replies on a declared return path (else a sender's probes)."""
        return bool(self.mark & REPLY_MARKS)

    @property
    def ssid(self) -> int:
        return self.mark & SSID_MASK

    mark: int
    address: str
    segments: tuple[str, ...]


@dataclass(frozen=True)
class LocalSid:
    sid: str
    behaviour: Behaviour
    nexthop: str = ""
    lookup_table: int = 0
    device: str = ""
    table: int = 0


MAX_FLOWMON_ID = (1 << 20) - 1  # FlowMonID is 20 bits (RFC 9343)


@dataclass(frozen=True)
class MonitoredFlow:
    """The packets of one SR policy: found by SID list (travel order) at the ingress node, by
    `flowmon_id` (ALTMARK mode) or SID list (DSCP mode) downstream."""

    name: str
    segments: tuple[str, ...]
    role: Role
    interfaces: tuple[str, ...]
    flowmon_id: int = 0


@dataclass(frozen=True)
class Marking:
    """The marking mode, its Traffic Class bits (DSCP mode: one says "monitored", one carries
    the colour), and the interfaces at the domain boundary where foreign marks are removed."""

    mode: MarkingMode = MarkingMode.ALTMARK
    monitored_bit: int = DEFAULT_MONITORED_BIT
    colour_bit: int = DEFAULT_COLOUR_BIT
    boundary_interfaces: tuple[str, ...] = ()


STAMP_PORT = 862  # RFC 8762 section 4.1


@dataclass(frozen=True)
class ReturnPath:
    """Replies to `sender_address` are steered into `segments` (RFC 9503 return path)."""

    sender_address: str
    segments: tuple[str, ...]


@dataclass(frozen=True)
class ReflectorSession:
    """The flows a STAMP session's Direct Measurement refers to on the reflector's node, and
    the return paths its probes may ask for (declared here, never learnt from the wire)."""

    ssid: int
    forward_flow: str
    reverse_flow: str
    return_paths: tuple[ReturnPath, ...] = ()


@dataclass(frozen=True)
class Reflector:
    enabled: bool = False
    address: str = "::"
    port: int = STAMP_PORT
    stateful: bool = False
    hmac_key: bytes = b""
    sessions: tuple[ReflectorSession, ...] = ()
    allowed_dscp: tuple[int, ...] = ()  # Class of Service DSCP1 replies may take; (): any


@dataclass(frozen=True)
class KernelReflection:
    """What the data plane's STAMP reflector answers: probes to [address]:port, plain or inside
    one of `decap_sids` (End.DT6). The Linux in-kernel one takes unauthenticated 44-octet probes
    (none with an `hmac_key`) and leaves everything else to the userspace reflector; VPP's
    answers all."""

    address: str
    port: int
    stateful: bool
    error_estimate: int  # raw 16 bits, the reflector's own (RFC 8762 section 4.2.1)
    decap_sids: tuple[str, ...] = ()
    period_ns: int = 0  # Direct Measurement's blocks (0: left to userspace)
    # SSID -> (forward, reverse) flows whose closed blocks' counts it is given
    sessions: tuple[tuple[int, str, str], ...] = ()
    # (sender address, SSID, SID list): the Return Path TLVs it may honour (declared ones)
    return_paths: tuple[tuple[str, int, tuple[str, ...]], ...] = ()
    allowed_dscp: tuple[int, ...] = ()  # Class of Service DSCP1 replies may take; (): any
    reply_mark_base: int = 0  # replies on a declared return path carry this + SSID (ProbeRoute)
    hmac_key: bytes = b""  # authenticated mode (RFC 8762 section 4.4)


DEFAULT_DOWN_AFTER = 3


@dataclass(frozen=True)
class Liveness:
    """Down after `down_after` probes in a row get no reply within `timeout_ms` (0: the probe
    interval), up after `up_after` replies in a row."""

    enabled: bool = False
    down_after: int = DEFAULT_DOWN_AFTER
    up_after: int = 1
    timeout_ms: int = 0


MAX_HISTOGRAM_EDGES = 10
# What a threshold may watch (ThresholdEvent.metric); the first is the default.
THRESHOLD_METRICS = ("two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter")


@dataclass(frozen=True)
class Thresholds:
    """A delay event when a metric moved by more than `percent` % or `absolute_us` from the
    value last reported, checked per computation interval (or block) and, with
    `check_each_burst`, on each burst's mean; at most one per metric per
    `min_report_interval_ms`. Both thresholds 0: none."""

    percent: float = 0.0
    absolute_us: int = 0
    check_each_burst: bool = False
    min_report_interval_ms: int = 0
    metrics: tuple[str, ...] = ()  # of THRESHOLD_METRICS; (): two_way_mean

    @property
    def enabled(self) -> bool:
        return bool(self.percent or self.absolute_us)


@dataclass(frozen=True)
class SenderSession:
    """A STAMP Session-Sender measuring loss per block and delay along a policy."""

    name: str
    ssid: int
    reflector_address: str
    forward_flow: str
    reverse_flow: str
    reflector_port: int = STAMP_PORT
    source_address: str = ""
    direct_segments: tuple[str, ...] = ()
    return_segments: tuple[str, ...] = ()
    delay_interval_ms: int = 0
    hmac_key: bytes = b""
    policy: str = ""  # labels of its records; "": the forward flow's name, else the session's
    reflector_node: str = ""
    segment_list: str = ""  # the policy's segment list its probes carry (a label; protection)
    liveness: Liveness = field(default_factory=Liveness)
    histogram_edges_us: tuple[int, ...] = ()  # delay histogram bin edges, ascending
    burst_size: int = 1  # probes back to back at each probe interval
    computation_interval_ms: int = 0  # delay also per interval of this length (0: per block)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def policy_label(self) -> str:
        return self.policy or self.forward_flow or self.name


@dataclass(frozen=True)
class NodeState:
    marking: Marking = field(default_factory=Marking)
    policies: tuple[SrPolicy, ...] = ()
    local_sids: tuple[LocalSid, ...] = ()
    flows: tuple[MonitoredFlow, ...] = ()
    reflector: Reflector = field(default_factory=Reflector)
    sessions: tuple[SenderSession, ...] = ()


@dataclass(frozen=True)
class Changes:
    added: int = 0
    removed: int = 0
    unchanged: int = 0


@dataclass(frozen=True)
class ApplyResult:
    policies: Changes
    local_sids: Changes
    flows: Changes
    marking_changed: bool
    sessions: Changes = field(default_factory=Changes)
    reflector_changed: bool = False
