"""Validation and normalisation of a desired node state, before anything is changed.

Every address is rewritten in canonical form so that state read back from the kernel compares
equal to what was asked for; every problem is reported with the object it was found in.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role

from .errors import InvalidArgument
from .model import (
    MAX_FLOWMON_ID,
    MAX_HISTOGRAM_EDGES,
    MAX_SEGMENTS,
    MAX_WEIGHT,
    THRESHOLD_METRICS,
    Liveness,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SegmentList,
    SenderSession,
    SrPolicy,
    Thresholds,
)

DSCP_MASK = 0xFC  # Traffic Class bits outside ECN
NEEDS_NEXTHOP6 = {Behaviour.END_X, Behaviour.END_DX6}
NEEDS_TABLE = {Behaviour.END_T, Behaviour.END_DT4, Behaviour.END_DT6, Behaviour.END_DT46}
MAX_TABLE = 0xFFFFFFFF
MAIN_TABLE = 254


def ipv6_address(value: str, where: str) -> str:
    try:
        return ipaddress.IPv6Address(value).compressed
    except ValueError:
        raise InvalidArgument(f"{where}: {value!r} is not an IPv6 address") from None


def ipv6_prefix(value: str, where: str) -> str:
    try:
        return ipaddress.IPv6Network(value, strict=True).compressed
    except ValueError as e:
        raise InvalidArgument(f"{where}: {value!r} is not an IPv6 prefix ({e})") from None


def segment_list(segments: Iterable[str], where: str) -> tuple[str, ...]:
    sids = tuple(segments)
    if not 1 <= len(sids) <= MAX_SEGMENTS:
        raise InvalidArgument(
            f"{where}: a segment list holds 1 to {MAX_SEGMENTS} SIDs, got {len(sids)}"
        )
    return tuple(ipv6_address(s, f"{where} segment {i}") for i, s in enumerate(sids))


def _name(name: str, kind: str) -> str:
    if not name or len(name) > 128 or not name.isprintable():
        raise InvalidArgument(f"{kind} name {name!r} must be 1 to 128 printable characters")
    return name


def _table(table: int, where: str) -> int:
    """Canonical table id: 0 stands for main (254), as the kernel reads it back."""
    if not 0 <= table <= MAX_TABLE:
        raise InvalidArgument(f"{where}: table {table} is out of range")
    return 0 if table == MAIN_TABLE else table


def _unique(names: Iterable[str], kind: str) -> None:
    dup = [n for n, c in Counter(names).items() if c > 1]
    if dup:
        raise InvalidArgument(f"duplicate {kind}: {', '.join(sorted(dup))}")


def _segment_lists(p: SrPolicy, where: str) -> tuple[SegmentList, ...]:
    """Named (default sl0, sl1, ...), weighted 1..256, each SID list once."""
    lists = []
    for i, sl in enumerate(p.segment_lists):
        name = _name(sl.name or f"sl{i}", f"{where} segment list")
        at = f"{where} segment list {name!r}"
        weight = sl.weight or 1
        if not 1 <= weight <= MAX_WEIGHT:
            raise InvalidArgument(f"{at}: weight {weight} is not 1 to {MAX_WEIGHT}")
        lists.append(SegmentList(name, segment_list(sl.segments, at), weight))
    _unique((sl.name for sl in lists), f"segment list names in {where}")
    _unique((" ".join(sl.segments) for sl in lists), f"segment lists in {where}")
    return tuple(lists)


def policy(p: SrPolicy) -> SrPolicy:
    where = f"policy {_name(p.name, 'policy')!r}"
    if p.mode is EncapMode.L2ENCAP and not p.device:
        raise InvalidArgument(f"{where}: l2encap needs a device")
    if p.segments and p.segment_lists:
        raise InvalidArgument(f"{where}: give segments or segment_lists, not both")
    lists = _segment_lists(p, where)
    if len(lists) > 1 and p.mode in (EncapMode.INLINE, EncapMode.L2ENCAP):
        raise InvalidArgument(f"{where}: several segment lists need encap or encap-red mode")
    if len(lists) > 1 and p.device:
        raise InvalidArgument(
            f"{where}: several segment lists take no device (each next hop goes toward its "
            "list's first SID)"
        )
    # One segment list is a plain policy: its name is only a label, its weight meaningless.
    segments = lists[0].segments if len(lists) == 1 else () if lists else p.segments
    return replace(
        p,
        prefix=ipv6_prefix(p.prefix, where),
        segments=segment_list(segments, where) if segments or not lists else (),
        segment_lists=lists if len(lists) > 1 else (),
        table=_table(p.table, where),
    )


def local_sid(s: LocalSid) -> LocalSid:
    where = f"local SID {s.sid!r}"
    sid = ipv6_address(s.sid, where)
    nexthop = ""
    if s.behaviour in NEEDS_NEXTHOP6:
        if not s.nexthop:
            raise InvalidArgument(f"{where}: {s.behaviour.value} needs an IPv6 nexthop")
        nexthop = ipv6_address(s.nexthop, where)
    elif s.behaviour is Behaviour.END_DX4:
        try:
            nexthop = ipaddress.IPv4Address(s.nexthop).compressed
        except ValueError:
            raise InvalidArgument(
                f"{where}: End.DX4 needs an IPv4 nexthop, got {s.nexthop!r}"
            ) from None
    elif s.nexthop:
        raise InvalidArgument(f"{where}: {s.behaviour.value} takes no nexthop")
    if s.lookup_table and s.behaviour not in NEEDS_TABLE:
        raise InvalidArgument(f"{where}: {s.behaviour.value} takes no lookup table")
    if not 0 <= s.lookup_table <= MAX_TABLE:
        raise InvalidArgument(f"{where}: lookup table {s.lookup_table} is out of range")
    lookup_table = (s.lookup_table or MAIN_TABLE) if s.behaviour in NEEDS_TABLE else 0
    return replace(
        s, sid=sid, nexthop=nexthop, lookup_table=lookup_table, table=_table(s.table, where)
    )


def flow(f: MonitoredFlow, mode: MarkingMode) -> MonitoredFlow:
    where = f"flow {_name(f.name, 'flow')!r}"
    if not f.interfaces:
        raise InvalidArgument(f"{where}: name at least one interface to hook")
    _unique(f.interfaces, f"interfaces in {where}")
    if not 0 <= f.flowmon_id <= MAX_FLOWMON_ID:
        raise InvalidArgument(f"{where}: FlowMonID {f.flowmon_id} is not 1 to {MAX_FLOWMON_ID}")
    if mode is MarkingMode.ALTMARK and not f.flowmon_id:
        raise InvalidArgument(f"{where}: ALTMARK marking needs a FlowMonID (flow_mon_id)")
    return replace(f, segments=segment_list(f.segments, where))


def marking(m: Marking) -> Marking:
    for name, bit in (("monitored_bit", m.monitored_bit), ("colour_bit", m.colour_bit)):
        if bit == 0 or bit & (bit - 1) or bit & ~DSCP_MASK:
            raise InvalidArgument(
                f"marking {name} {bit:#04x} must be one bit of the DSCP field (mask 0xfc)"
            )
    if m.monitored_bit == m.colour_bit:
        raise InvalidArgument("marking monitored_bit and colour_bit must differ")
    _unique(m.boundary_interfaces, "boundary interfaces")
    return m


def _flows(flows: tuple[MonitoredFlow, ...], m: Marking) -> None:
    """What the data plane can tell apart: FlowMonIDs, and SID lists where it keys by them."""
    _unique((f.name for f in flows), "flow names")
    _unique((str(f.flowmon_id) for f in flows if f.flowmon_id), "flow FlowMonIDs")
    # The ingress node (and DSCP mode everywhere) keys a flow by its SID list.
    by_sids = [f for f in flows if m.mode is MarkingMode.DSCP or f.role is Role.INGRESS]
    _unique((" ".join(f.segments) for f in by_sids), "flow segment lists")
    counting = {i for f in flows if f.role is not Role.INGRESS for i in f.interfaces}
    both = sorted(counting & set(m.boundary_interfaces))
    if both:
        raise InvalidArgument(
            f"interface(s) {', '.join(both)} cannot both count monitored flows and be at the "
            "domain boundary"
        )


MAX_KEY = 64  # HMAC-SHA-256 keys longer than the block size gain nothing (RFC 2104)


def _port(port: int, where: str) -> int:
    if not 1 <= port <= 65535:
        raise InvalidArgument(f"{where}: port {port} is out of range")
    return port


def _key(key: bytes, where: str) -> bytes:
    if len(key) > MAX_KEY:
        raise InvalidArgument(f"{where}: HMAC key longer than {MAX_KEY} octets")
    return key


def _ssid(ssid: int, where: str) -> int:
    if not 1 <= ssid <= 0xFFFF:
        raise InvalidArgument(f"{where}: SSID {ssid} must be 1 to 65535")
    return ssid


def reflector(r: Reflector, flow_names: set[str]) -> Reflector:
    where = "reflector"
    sessions = []
    for s in r.sessions:
        if bool(s.forward_flow) != bool(s.reverse_flow):
            raise InvalidArgument(
                f"{where} session {s.ssid}: name both monitored flows (Direct Measurement) or "
                "neither (delay only)"
            )
        missing = {s.forward_flow, s.reverse_flow} - flow_names - {""}
        if missing:
            raise InvalidArgument(
                f"{where} session {s.ssid}: no monitored flow named "
                f"{', '.join(sorted(missing))} on this node"
            )
        paths = tuple(
            ReturnPath(
                ipv6_address(path.sender_address, f"{where} session {s.ssid} return path"),
                segment_list(path.segments, f"{where} session {s.ssid} return path"),
            )
            for path in s.return_paths
        )
        sessions.append(
            ReflectorSession(_ssid(s.ssid, where), s.forward_flow, s.reverse_flow, paths)
        )
    _unique((str(s.ssid) for s in sessions), "reflector session SSIDs")
    # replies of one session are steered by one mark: one return path per sender
    _unique(
        (f"{s.ssid} to {p.sender_address}" for s in sessions for p in s.return_paths),
        "return paths of a session",
    )
    address = ipv6_address(r.address or "::", where)
    if r.enabled and ipaddress.IPv6Address(address).is_unspecified:
        # A reflector answers anyone who reaches it: it listens only where it is told to.
        raise InvalidArgument(f"{where}: give the address to listen on (not any address)")
    for dscp in r.allowed_dscp:
        if not 0 <= dscp < 64:
            raise InvalidArgument(f"{where}: allowed DSCP {dscp} is not 0..63")
    _unique((str(d) for d in r.allowed_dscp), "allowed DSCP values")
    return replace(
        r,
        address=address,
        port=_port(r.port, where),
        allowed_dscp=tuple(sorted(r.allowed_dscp)),
        hmac_key=_key(r.hmac_key, where),
        sessions=tuple(sessions),
    )


def sender(s: SenderSession, flow_names: set[str], period_ns: int | None = None) -> SenderSession:
    where = f"session {_name(s.name, 'session')!r}"
    if bool(s.forward_flow) != bool(s.reverse_flow):
        raise InvalidArgument(
            f"{where}: name both monitored flows (loss and delay) or neither (delay only)"
        )
    missing = {s.forward_flow, s.reverse_flow} - flow_names - {""}
    if missing:
        raise InvalidArgument(
            f"{where}: no monitored flow named {', '.join(sorted(missing))} on this node"
        )
    if s.delay_interval_ms and s.delay_interval_ms < 10:
        raise InvalidArgument(f"{where}: delay interval below 10 ms")
    for label, value in (
        ("policy", s.policy),
        ("reflector node", s.reflector_node),
        ("segment list", s.segment_list),
    ):
        if value:
            _name(value, f"{where}: {label}")
    return replace(
        s,
        ssid=_ssid(s.ssid, where),
        reflector_address=ipv6_address(s.reflector_address, where),
        reflector_port=_port(s.reflector_port, where),
        source_address=ipv6_address(s.source_address, where) if s.source_address else "",
        direct_segments=segment_list(s.direct_segments, where) if s.direct_segments else (),
        return_segments=segment_list(s.return_segments, where) if s.return_segments else (),
        hmac_key=_key(s.hmac_key, where),
        liveness=_liveness(s.liveness, where),
        histogram_edges_us=_histogram_edges(s.histogram_edges_us, where),
        burst_size=_burst_size(s.burst_size, where),
        computation_interval_ms=_computation_interval(s, where, period_ns),
        thresholds=_thresholds(s.thresholds, where),
    )


MAX_BURST = 100


def _burst_size(size: int, where: str) -> int:
    if not 1 <= size <= MAX_BURST:
        raise InvalidArgument(f"{where}: burst size {size} is not 1 to {MAX_BURST}")
    return size


def _computation_interval(s: SenderSession, where: str, period_ns: int | None) -> int:
    """A whole number of probe intervals, a whole number of intervals per block: each interval
    holds the same number of probe ticks and lies inside one block."""
    interval = s.computation_interval_ms
    if not interval:
        return 0
    if not s.delay_interval_ms:
        raise InvalidArgument(
            f"{where}: a computation interval needs a delay interval (with one probe per "
            "block, the block is the only interval)"
        )
    if interval % s.delay_interval_ms:
        raise InvalidArgument(
            f"{where}: computation interval {interval} ms is not a multiple of the delay "
            f"interval ({s.delay_interval_ms} ms)"
        )
    if period_ns is not None and period_ns % (interval * 1_000_000):
        raise InvalidArgument(
            f"{where}: computation interval {interval} ms does not divide the node's "
            f"{period_ns / 1e6:g} ms block"
        )
    return interval


MAX_PERCENT = 1000.0
MAX_ABSOLUTE_US = 10_000_000  # 10 s: more than any probe waits for its reply
MAX_REPORT_INTERVAL_MS = 86_400_000  # a day


def _thresholds(t: Thresholds, where: str) -> Thresholds:
    if not math.isfinite(t.percent) or not 0 <= t.percent <= MAX_PERCENT:
        raise InvalidArgument(f"{where}: threshold percent {t.percent} is not 0 to {MAX_PERCENT:g}")
    if t.absolute_us > MAX_ABSOLUTE_US:
        raise InvalidArgument(
            f"{where}: absolute threshold {t.absolute_us} µs is above {MAX_ABSOLUTE_US} µs"
        )
    if t.min_report_interval_ms > MAX_REPORT_INTERVAL_MS:
        raise InvalidArgument(
            f"{where}: minimum report interval {t.min_report_interval_ms} ms is above a day"
        )
    unknown = sorted(set(t.metrics) - set(THRESHOLD_METRICS))
    if unknown:
        raise InvalidArgument(
            f"{where}: unknown threshold metric(s) {', '.join(unknown)}; expected "
            f"{', '.join(THRESHOLD_METRICS)}"
        )
    _unique(t.metrics, f"threshold metrics in {where}")
    if not t.enabled:
        return Thresholds()  # nothing to check: the other settings mean nothing
    return replace(t, metrics=t.metrics or THRESHOLD_METRICS[:1])


MAX_MISSES = 255


def _liveness(live: Liveness, where: str) -> Liveness:
    if not live.enabled:
        return Liveness()
    for label, count in (("down_after", live.down_after), ("up_after", live.up_after)):
        if not 1 <= count <= MAX_MISSES:
            raise InvalidArgument(f"{where}: liveness {label} {count} is not 1 to {MAX_MISSES}")
    if live.timeout_ms and live.timeout_ms < 10:
        raise InvalidArgument(f"{where}: liveness timeout below 10 ms")
    return live


def _histogram_edges(edges: tuple[int, ...], where: str) -> tuple[int, ...]:
    if len(edges) > MAX_HISTOGRAM_EDGES:
        raise InvalidArgument(
            f"{where}: {len(edges)} histogram edges, at most {MAX_HISTOGRAM_EDGES}"
        )
    if any(e <= 0 for e in edges) or any(b <= a for a, b in itertools.pairwise(edges)):
        raise InvalidArgument(
            f"{where}: histogram edges must be positive microseconds in ascending order"
        )
    return tuple(edges)


def node_state(state: NodeState, period_ns: int | None = None) -> NodeState:
    """The canonical form of `state`, or InvalidArgument naming the first problem; with the
    node's block period, sessions' computation intervals are checked against it."""
    policies = tuple(policy(p) for p in state.policies)
    sids = tuple(local_sid(s) for s in state.local_sids)
    mark = marking(state.marking)
    flows = tuple(flow(f, mark.mode) for f in state.flows)
    _flows(flows, mark)
    names = {f.name for f in flows}
    sessions = tuple(sender(s, names, period_ns) for s in state.sessions)
    _unique((s.name for s in sessions), "session names")
    _unique((str(s.ssid) for s in sessions), "session SSIDs")  # each steers its own probes
    _unique((p.name for p in policies), "policy names")
    _unique((f"{p.prefix} (table {p.table})" for p in policies), "policy prefixes")
    _unique((f"{s.sid} (table {s.table})" for s in sids), "local SIDs")
    return NodeState(mark, policies, sids, flows, reflector(state.reflector, names), sessions)
