"""The REST API's request and response bodies (pydantic): every field validated at the door."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from ipaddress import IPv4Address, IPv6Address, IPv6Network
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode


def _text(value: object) -> object:
    """Addresses and prefixes come as text: pydantic would read the JSON number 1 as ::1."""
    if isinstance(value, str | IPv4Address | IPv6Address | IPv6Network):
        return value
    raise ValueError("must be a string")


IPv6 = Annotated[IPv6Address, BeforeValidator(_text)]
IPv4 = Annotated[IPv4Address, BeforeValidator(_text)]
Prefix6 = Annotated[IPv6Network, BeforeValidator(_text)]
Name = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"), Field(examples=["r1"])
]
Interface = Annotated[str, StringConstraints(pattern=r"^[^\s/:]{1,15}$")]
Endpoint = Annotated[
    str,
    StringConstraints(pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):[0-9]{1,5}$"),
    Field(description="node manager gRPC address host:port", examples=["10.0.0.1:50051"]),
]
Segments = Annotated[
    list[IPv6],
    Field(min_length=1, max_length=16, description="SIDs in travel order, 1..16"),
]
# Linux table ids are 32-bit unsigned, but they are kept in SQL INTEGER columns: signed 32-bit on
# PostgreSQL (a larger id was a 500 there)
Table = Annotated[int, Field(ge=0, le=0x7FFFFFFF)]
HexKey = Annotated[
    str,
    StringConstraints(pattern=r"^([0-9A-Fa-f]{2}){0,64}$"),
    Field(
        description="HMAC-SHA-256 key, hex (write-only; '' = unauthenticated; omitted: the "
        "controller's stamp_key_file, if it has one)"
    ),
]


def _utc(value: datetime) -> datetime:
    """Stored times are UTC, but SQLite returns them without a zone (PostgreSQL with one)."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


Timestamp = Annotated[datetime, AfterValidator(_utc)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Page(BaseModel):
    total: int
    limit: int
    offset: int


class Status(BaseModel):
    """Where an object stands on its nodes."""

    state: Literal["pending", "applied", "failed"]
    message: str = ""
    revision: int
    nodes: list[str]


# ---- nodes ------------------------------------------------------------------------------------


class NodeIn(Strict):
    name: Name
    endpoint: Endpoint
    probe_address: IPv6 | None = Field(
        None, description="STAMP source and reflector address of this node"
    )
    core_interfaces: list[Interface] = Field(
        default_factory=list,
        max_length=256,
        description="interfaces facing the SRv6 domain, where flows are counted "
        "(empty: every interface but lo and the boundary ones)",
    )
    boundary_interfaces: list[Interface] = Field(
        default_factory=list,
        max_length=256,
        description="interfaces facing outside the domain: foreign marks are removed there",
    )


class NodePatch(Strict):
    endpoint: Endpoint | None = None
    probe_address: IPv6 | None = None
    core_interfaces: list[Interface] | None = Field(None, max_length=256)
    boundary_interfaces: list[Interface] | None = Field(None, max_length=256)


class NodeInfoOut(BaseModel):
    driver: str
    version: str
    period_s: float
    interfaces: list[str]
    behaviours: list[str]
    encap_modes: list[str]
    max_flows: int
    max_segments: int
    warnings: list[str]


class NodeOut(BaseModel):
    name: str
    endpoint: str
    probe_address: str | None
    core_interfaces: list[str]
    boundary_interfaces: list[str]
    reachable: bool | None = Field(description="null: not contacted yet")
    info: NodeInfoOut | None
    last_attempt: Timestamp | None
    status: Status


class NodeList(Page):
    items: list[NodeOut]


# ---- local SIDs -------------------------------------------------------------------------------


class LocalSidIn(Strict):
    sid: IPv6
    node: Name
    behaviour: Behaviour
    nexthop: IPv6 | IPv4 | None = Field(None, description="End.X and End.DX6: IPv6; End.DX4: IPv4")
    lookup_table: Table = 0
    device: Interface | Literal[""] = ""
    table: Table = 0

    @model_validator(mode="after")
    def _nexthop(self) -> LocalSidIn:
        need = {
            Behaviour.END_X: IPv6Address,
            Behaviour.END_DX6: IPv6Address,
            Behaviour.END_DX4: IPv4Address,
        }.get(self.behaviour)
        if need is None and self.nexthop is not None:
            raise ValueError(f"{self.behaviour.value} takes no nexthop")
        if need is not None and not isinstance(self.nexthop, need):
            family = "IPv6" if need is IPv6Address else "IPv4"
            raise ValueError(f"{self.behaviour.value} needs an {family} nexthop")
        return self


class LocalSidPatch(Strict):
    behaviour: Behaviour | None = None
    nexthop: IPv6 | IPv4 | None = None
    lookup_table: Table | None = None
    device: Interface | Literal[""] | None = None
    table: Table | None = None


class LocalSidOut(BaseModel):
    sid: str
    node: str
    behaviour: Behaviour
    nexthop: str | None
    lookup_table: int
    device: str
    table: int
    status: Status


class LocalSidList(Page):
    items: list[LocalSidOut]


# ---- policies ---------------------------------------------------------------------------------


class SegmentListIn(Strict):
    name: Name | None = Field(None, description="unique in the policy (default: sl0, sl1, ...)")
    segments: Segments
    weight: int = Field(1, ge=1, le=256, description="share of the policy's flows hashed onto it")


SegmentLists = Annotated[
    list[SegmentListIn],
    Field(
        min_length=1,
        max_length=64,
        description="several weighted SID lists (flows are hashed over them); instead of "
        "`segments`",
    ),
]


def _distinct_lists(lists: list[SegmentListIn] | None) -> list[SegmentListIn] | None:
    """Names default to sl<position>; each name and each SID list once."""
    if lists is None:
        return None
    named = [sl.model_copy(update={"name": sl.name or f"sl{i}"}) for i, sl in enumerate(lists)]
    names = [sl.name for sl in named]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    if twice:
        raise ValueError(f"segment list names {', '.join(twice)} are given more than once")
    seen: dict[tuple[IPv6Address, ...], str | None] = {}
    for sl in named:
        key = tuple(sl.segments)
        if key in seen:
            raise ValueError(f"segment lists {seen[key]} and {sl.name} have the same SIDs")
        seen[key] = sl.name
    return named


class PolicyIn(Strict):
    name: Name
    head_node: Name
    tail_node: Name
    segments: Segments | None = Field(None, description="the policy's one SID list")
    segment_lists: SegmentLists | None = None
    prefix: Prefix6 = Field(description="IPv6 prefix steered into the policy")
    encap_mode: EncapMode = EncapMode.ENCAP
    device: Interface | Literal[""] = Field("", description="required for l2encap")
    table: Table = 0
    protection: bool = Field(
        False, description="stop hashing flows onto a segment list while its liveness is down"
    )

    _lists = field_validator("segment_lists")(_distinct_lists)

    @model_validator(mode="after")
    def _device(self) -> PolicyIn:
        if self.encap_mode is EncapMode.L2ENCAP and not self.device:
            raise ValueError("l2encap needs a device")
        if (self.segments is None) == (self.segment_lists is None):
            raise ValueError("give segments (one SID list) or segment_lists, not both or none")
        if self.device and self.segment_lists and len(self.segment_lists) > 1:
            raise ValueError(
                "several segment lists take no device (each next hop goes toward its first SID)"
            )
        return self


class PolicyPatch(Strict):
    segments: Segments | None = None
    segment_lists: SegmentLists | None = None
    prefix: Prefix6 | None = None
    encap_mode: EncapMode | None = None
    device: Interface | Literal[""] | None = None
    table: Table | None = None
    protection: bool | None = None

    _lists = field_validator("segment_lists")(_distinct_lists)

    @model_validator(mode="after")
    def _one_form(self) -> PolicyPatch:
        if self.segments is not None and self.segment_lists is not None:
            raise ValueError("give segments or segment_lists, not both")
        return self


class SegmentListOut(BaseModel):
    name: str
    segments: list[str]
    weight: int
    flow_mon_id: int = Field(description="RFC 9343 FlowMonID, allocated by the controller")
    flow: str = Field(description="the monitored flow's name (records' flow tag)")
    path: list[str] = Field(description="the nodes that count its packets, in order")


class PolicyOut(BaseModel):
    name: str
    head_node: str
    tail_node: str
    segments: list[str] = Field(description="the only segment list's SIDs ([]: several)")
    segment_lists: list[SegmentListOut]
    prefix: str
    encap_mode: EncapMode
    device: str
    table: int
    protection: bool
    flow_mon_id: int | None = Field(
        description="the only segment list's FlowMonID (null: several, see segment_lists)"
    )
    path: list[str] = Field(description="the first segment list's path")
    status: Status


class PolicyList(Page):
    items: list[PolicyOut]


# ---- measurement profiles -----------------------------------------------------------------------


class LivenessIn(Strict):
    enabled: bool = True
    down_after: int = Field(3, ge=1, le=255, description="down after N probes without a reply")
    up_after: int = Field(1, ge=1, le=255, description="up after N replies in a row")
    timeout_ms: int = Field(
        0, ge=0, le=60_000, description="a reply later than this is missed (0: the probe interval)"
    )

    @field_validator("timeout_ms")
    @classmethod
    def _timeout(cls, value: int) -> int:
        if 0 < value < 10:
            raise ValueError("at least 10 ms (or 0: the probe interval)")
        return value


def _edges(value: list[int] | None) -> list[int] | None:
    if value is not None and any(b <= a for a, b in itertools.pairwise(value)):
        raise ValueError("bin edges must ascend")
    return value


HistogramEdges = Annotated[
    list[Annotated[int, Field(ge=1, le=60_000_000)]],
    Field(max_length=10, description="delay histogram bin edges in microseconds, ascending"),
    AfterValidator(_edges),
]


def _probe_interval(value: int) -> int:
    if 0 < value < 10:
        raise ValueError("at least 10 ms (or 0: one probe per block)")
    return value


DelayInterval = Annotated[
    int,
    Field(ge=0, le=60_000, description="a probe every N ms, at least 10 (0: one probe per block)"),
    AfterValidator(_probe_interval),
]
BurstSize = Annotated[
    int, Field(ge=1, le=100, description="probes sent back to back at each probe tick")
]
ComputationInterval = Annotated[
    int,
    Field(
        ge=0,
        le=3_600_000,
        description="delay also per interval of N ms: a multiple of the delay interval that "
        "divides the sender node's block (0: per block only)",
    ),
]
MeasureLoss = Annotated[
    bool,
    Field(description="loss per block both ways (false: delay only, no Direct Measurement)"),
]
DelayMetric = Literal["two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter"]


class DelayThresholdsIn(Strict):
    """Delay thresholds with hysteresis, checked on the node: an event when a metric moved by
    more than `percent` % or `absolute_us` from the value last reported."""

    percent: float = Field(0, ge=0, le=1000, allow_inf_nan=False, description="0: not by ratio")
    absolute_us: int = Field(0, ge=0, le=10_000_000, description="0: not by microseconds")
    check_each_burst: bool = Field(
        False, description="also check each burst's mean (an accelerated report)"
    )
    min_report_interval_ms: int = Field(
        0, ge=0, le=86_400_000, description="at most one event per metric per N ms"
    )
    metrics: list[DelayMetric] = Field(
        default_factory=list, max_length=5, description="the delays watched ([]: two_way_mean)"
    )

    @model_validator(mode="after")
    def _meaningful(self) -> DelayThresholdsIn:
        twice = sorted({m for m in self.metrics if self.metrics.count(m) > 1})
        if twice:
            raise ValueError(f"metrics {', '.join(twice)} are given more than once")
        tuned = self.check_each_burst or self.min_report_interval_ms or self.metrics
        if tuned and not (self.percent or self.absolute_us):
            raise ValueError(
                "give percent or absolute_us: with both 0 there are no thresholds to check"
            )
        return self


class DelayThresholdsOut(BaseModel):
    percent: float
    absolute_us: int
    check_each_burst: bool
    min_report_interval_ms: int
    metrics: list[str]


class ProfileIn(Strict):
    name: Name
    delay_interval_ms: DelayInterval = 0
    liveness: LivenessIn = Field(
        default_factory=lambda: LivenessIn.model_validate({"enabled": False})
    )
    histogram_edges_us: HistogramEdges = Field(default_factory=list)
    burst_size: BurstSize = 1
    computation_interval_ms: ComputationInterval = 0
    thresholds: DelayThresholdsIn = Field(
        default_factory=lambda: DelayThresholdsIn.model_validate({})
    )
    loss: MeasureLoss = True


class ProfilePatch(Strict):
    delay_interval_ms: DelayInterval | None = None
    liveness: LivenessIn | None = None
    histogram_edges_us: HistogramEdges | None = None
    burst_size: BurstSize | None = None
    computation_interval_ms: ComputationInterval | None = None
    thresholds: DelayThresholdsIn | None = None
    loss: MeasureLoss | None = None


class LivenessOut(BaseModel):
    enabled: bool
    down_after: int
    up_after: int
    timeout_ms: int


class ProfileOut(BaseModel):
    name: str
    delay_interval_ms: int
    liveness: LivenessOut
    histogram_edges_us: list[int]
    burst_size: int
    computation_interval_ms: int
    thresholds: DelayThresholdsOut
    loss: bool
    revision: int
    sessions: list[str] = Field(description="sessions that name it (the first 20)")


class ProfileList(Page):
    items: list[ProfileOut]


# ---- sessions ---------------------------------------------------------------------------------


class SessionIn(Strict):
    name: Name
    policy: Name = Field(description="the measured policy (probes go this way)")
    segment_list: Name | None = Field(
        None, description="measure this segment list only (default: every one of the policy)"
    )
    return_policy: Name = Field(description="the way back (replies, and the reverse loss)")
    return_segment_list: Name | None = Field(
        None, description="the return policy's segment list replies take (default: its first)"
    )
    profile: Name | None = Field(None, description="a measurement profile; fields below win")
    delay_interval_ms: DelayInterval | None = Field(
        None, description="a delay probe every N ms (0: one probe per block; default: profile's)"
    )
    liveness: LivenessIn | None = None
    histogram_edges_us: HistogramEdges | None = None
    burst_size: BurstSize | None = None
    computation_interval_ms: ComputationInterval | None = None
    thresholds: DelayThresholdsIn | None = None
    loss: MeasureLoss | None = None
    hmac_key: HexKey | None = None


class SessionPatch(Strict):
    """Null for segment_list, return_segment_list, profile or a setting (delay_interval_ms,
    liveness, histogram_edges_us, burst_size, computation_interval_ms, thresholds, loss)
    clears it (back to every segment list, the first, no profile, the profile's value)."""

    policy: Name | None = None
    segment_list: Name | None = None
    return_policy: Name | None = None
    return_segment_list: Name | None = None
    profile: Name | None = None
    delay_interval_ms: DelayInterval | None = None
    liveness: LivenessIn | None = None
    histogram_edges_us: HistogramEdges | None = None
    burst_size: BurstSize | None = None
    computation_interval_ms: ComputationInterval | None = None
    thresholds: DelayThresholdsIn | None = None
    loss: MeasureLoss | None = None
    hmac_key: HexKey | None = None


class ProbedListOut(BaseModel):
    """One segment list a session probes: a STAMP Session-Sender of its own."""

    segment_list: str
    ssid: int = Field(description="STAMP session identifier, allocated by the controller")
    sender: str = Field(description="the Session-Sender's name on the node (records' session)")
    flow_mon_ids: dict[str, int]
    path: dict[str, list[str]]


class SessionOut(BaseModel):
    name: str
    policy: str
    segment_list: str | None = Field(description="null: every segment list of the policy")
    return_policy: str
    return_segment_list: str
    profile: str | None
    delay_interval_ms: int = Field(description="in effect (the session's, its profile's or 0)")
    liveness: LivenessOut = Field(description="in effect")
    histogram_edges_us: list[int] = Field(description="in effect")
    burst_size: int = Field(description="in effect")
    computation_interval_ms: int = Field(description="in effect")
    thresholds: DelayThresholdsOut = Field(description="in effect")
    loss: bool = Field(description="in effect (false: delay only)")
    authenticated: bool = Field(description="an HMAC key is set (it is never shown)")
    ssid: int | None = Field(description="the SSID when one segment list is probed, else null")
    segment_lists: list[ProbedListOut]
    sender_node: str
    reflector_node: str
    flow_mon_ids: dict[str, int] | None = Field(description="null: several segment lists")
    path: dict[str, list[str]] | None = Field(description="null: several segment lists")
    marking_mode: MarkingMode
    period_s: float | None = Field(description="the nodes' marking period (null: not known yet)")
    status: Status


class SessionList(Page):
    items: list[SessionOut]


# ---- thresholds -------------------------------------------------------------------------------


class ThresholdIn(Strict):
    loss_ratio_max: float | None = Field(None, ge=0, le=1, description="either direction")
    delay_p99_max_ms: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="two-way p99"
    )
    invalid_blocks_max: int | None = Field(None, ge=0, le=1000)
    window_blocks: int = Field(6, ge=1, le=1000, description="blocks the rules look back over")


class ThresholdOut(ThresholdIn):
    session: str
    state: Literal["unknown", "ok", "violated"]
    since: Timestamp | None
    detail: str


# ---- results ----------------------------------------------------------------------------------


class DirectionLoss(BaseModel):
    tx: int | None = None
    rx: int | None = None
    lost: int | None = None
    loss_ratio: float | None = None
    valid: bool
    reason: str | None = None


SEGMENT_LIST = Field(
    "", description="the policy's segment list the session probes ('': the policy's only one)"
)


class LossBlock(BaseModel):
    block: int
    start_ns: int
    segment_list: str = SEGMENT_LIST
    forward: DirectionLoss | None = None
    reverse: DirectionLoss | None = None


class LossPage(BaseModel):
    session: str
    items: list[LossBlock]
    next_after_block: int | None = Field(description="pass as after_block for the next page")


class LossInterval(BaseModel):
    start_ns: int
    direction: str
    blocks: int
    valid_blocks: int
    tx: int | None
    rx: int | None
    lost: int | None
    loss_ratio: float | None


class LossIntervals(BaseModel):
    session: str
    interval: str
    items: list[LossInterval]


class Histogram(BaseModel):
    """Replies per delay bin: bin i holds delays in [edges_ns[i-1], edges_ns[i]), the first
    from minus infinity, the last (len(edges_ns)) to infinity."""

    edges_ns: list[int]
    counts: list[int]


class DelayStats(BaseModel):
    probes_sent: int | None = None
    probes_lost: int | None = None
    samples: int | None = None
    min_ns: int | None = None
    p50_ns: int | None = None
    p90_ns: int | None = None
    p99_ns: int | None = None
    max_ns: int | None = None
    mean_ns: int | None = None
    jitter_ns: int | None = None
    valid: bool
    reason: str | None = None
    histogram: Histogram | None = Field(None, description="null: the session has no bin edges")


class DelayBlock(BaseModel):
    block: int
    start_ns: int
    segment_list: str = SEGMENT_LIST
    two_way: DelayStats | None = None
    forward: DelayStats | None = None
    reverse: DelayStats | None = None


class DelayPage(BaseModel):
    session: str
    items: list[DelayBlock]
    next_after_block: int | None


# ---- a policy's results over its segment lists ---------------------------------------------------


class SegmentListLoss(LossBlock):
    session: str


class PolicyLossTotal(BaseModel):
    """A direction's sum over the block's valid segment lists."""

    tx: int | None
    rx: int | None
    lost: int | None
    loss_ratio: float | None
    segment_lists: int = Field(description="segment lists summed")
    not_measured: list[str] = Field(
        description="segment lists measured around this block but not in it: the sum lacks them"
    )


class PolicyLossBlock(BaseModel):
    block: int
    start_ns: int
    segment_lists: list[SegmentListLoss]
    total: dict[Literal["forward", "reverse"], PolicyLossTotal]


class PolicyLossPage(BaseModel):
    policy: str
    items: list[PolicyLossBlock]
    next_after_block: int | None = Field(description="pass as after_block for the next page")


class SegmentListDelay(DelayBlock):
    session: str


class PolicyDelayBlock(BaseModel):
    block: int
    start_ns: int
    segment_lists: list[SegmentListDelay]


class PolicyDelayPage(BaseModel):
    policy: str
    items: list[PolicyDelayBlock]
    next_after_block: int | None


# ---- liveness ---------------------------------------------------------------------------------


class LivenessChange(BaseModel):
    at_ns: int = Field(description="send time of the probe that decided it (ns)")
    session: str
    segment_list: str = SEGMENT_LIST
    src_node: str
    dst_node: str
    state: Literal["up", "down", "unknown"]
    previous: Literal["up", "down"] | None = Field(description="null: the first state")
    consecutive: int = Field(description="replies received (up) or missed (down) in a row")


class Liveness(BaseModel):
    current: list[LivenessChange] = Field(
        description="per session and segment list, its last change: the state now and since when"
    )
    changes: list[LivenessChange] = Field(description="the changes in the range, oldest first")
    next_start: int | None = Field(description="pass as start for the next page of changes")


class SessionLiveness(Liveness):
    session: str


class PolicyLiveness(Liveness):
    policy: str


# ---- threshold events ---------------------------------------------------------------------------

ThresholdMetric = Literal["two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter"]


class ThresholdEvent(BaseModel):
    at_ns: int = Field(description="end of the computation interval, or the burst's last T1 (ns)")
    session: str
    segment_list: str = SEGMENT_LIST
    src_node: str
    dst_node: str
    metric: ThresholdMetric
    value_ns: int = Field(description="the value that crossed")
    reference_ns: int | None = Field(description="the value last reported; null: the first")
    first: bool = Field(description="the metric's first report by this session")
    accelerated: bool = Field(description="decided on one burst, before its interval ended")


class ThresholdEvents(BaseModel):
    latest: list[ThresholdEvent] = Field(
        description="per session, segment list and metric, its last event: the value its node "
        "compares against now"
    )
    events: list[ThresholdEvent] = Field(description="the events in the range, oldest first")
    next_start: int | None = Field(description="pass as start for the next page of events")


class SessionThresholdEvents(ThresholdEvents):
    session: str


class PolicyThresholdEvents(ThresholdEvents):
    policy: str


# ---- delay per computation interval --------------------------------------------------------------


class IntervalDelay(BaseModel):
    start_ns: int
    interval_ns: int
    block: int = Field(description="the block the interval lies in")
    session: str
    segment_list: str = SEGMENT_LIST
    two_way: DelayStats | None = None
    forward: DelayStats | None = None
    reverse: DelayStats | None = None


class IntervalDelays(BaseModel):
    items: list[IntervalDelay]
    next_start: int | None = Field(description="pass as start for the next page")


class SessionIntervalDelays(IntervalDelays):
    session: str


class PolicyIntervalDelays(IntervalDelays):
    policy: str


class HopCountOut(BaseModel):
    node: str
    packets: int | None
    reason: str


class SegmentOut(BaseModel):
    src: str
    dst: str
    lost: int | None


class HopDirection(BaseModel):
    direction: str
    policy: str
    path: list[str]
    counts: list[HopCountOut]
    segments: list[SegmentOut]
    end_to_end: int | None


class Hops(BaseModel):
    session: str
    block: int
    directions: list[HopDirection]


# ---- tokens and audit -------------------------------------------------------------------------


class TokenIn(Strict):
    name: Name
    scope: Literal["read", "admin"]


class TokenCreated(BaseModel):
    name: str
    scope: str
    token: str = Field(description="shown once; only its SHA-256 is stored")


class TokenOut(BaseModel):
    name: str
    scope: str
    created_at: Timestamp


class AuditEntry(BaseModel):
    id: int
    at: Timestamp
    actor: str
    action: str
    kind: str
    name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class AuditPage(Page):
    items: list[AuditEntry]
