"""Session-Sender sessions (RFC 8762 section 4.2) measuring loss per block and delay.

Loss (RFC 9341 with RFC 8972 Direct Measurement): once per block, in the safe window of block
k+1, the probe carries this node's TX count of block k of the forward flow (S_TxC); the reflector
adds its RX count of the forward flow and TX count of the reverse flow for block k (the block is
derived from the probe's timestamp at both ends); the reply adds this node's RX count of the
reverse flow. Delay: every probe gives T1..T4; delay probes may be sent more often than one per
block; with histogram edges, each block's delays are also counted per bin. A probe without a
reply before `timeout_ns` is lost, and so is its block's loss result. With liveness, every probe
also tells whether the path is up (liveness.py): misses are decided at their deadline by the send
loop, not when a later reply comes, so a failure is reported about `down_after` intervals after
it began.

Bursts: at each probe tick, `burst_size` probes leave back to back, each a probe of its own
(sequence number, delay, loss of the probe); the first of a loss tick carries the counters.
Liveness takes a burst as one probe, answered when any of its probes is, so `down_after` still
counts probe intervals. Computation intervals: delay is also aggregated per interval of the
session's (windows.py). Thresholds (thresholds.py) are checked on each interval's delay (each
block's without intervals) and, when asked, on each burst's mean once all its probes are
answered or lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import codec
from .counters import BlockCounters
from .error_estimate import clock_error_estimate, is_ptp, is_synchronised
from .errors import AuthenticationFailed, InvalidTimestamp, StampError
from .liveness import LivenessChange, LivenessConfig, LivenessMonitor
from .maths import block_of, two_way_delay_ns
from .results import (
    DelayBlock,
    DelayResult,
    DirectionLoss,
    LossResult,
    ResultSink,
    ResultStore,
)
from .thresholds import Metric, ThresholdConfig, ThresholdEvent, ThresholdMonitor
from .timestamps import ntp_from_unix_ns, to_unix_ns, unix_ns_from_ntp
from .tlv import FLAG_I, FLAG_M, FLAG_U, DirectMeasurement, ReturnPath, Tlv
from .transport import Datagram
from .windows import DelayWindows

log = logging.getLogger(__name__)
MASK32 = 0xFFFFFFFF
# Blocks a resumed session reports as not measured, at most: a restart or an outage; a session
# away for longer has a gap instead of thousands of records.
MAX_GAP_BLOCKS = 1024
NOT_RUNNING = "not measured: the session was not running"


@dataclass(frozen=True)
class SenderConfig:
    name: str
    ssid: int
    reflector: tuple[str, int]
    forward_flow: str  # counted here when sent (ingress)
    reverse_flow: str  # counted here when received (egress)
    period_ns: int
    delay_interval_ns: int = 0  # 0: only the loss probe of each block
    return_segments: tuple[str, ...] = ()  # RFC 9503 Return Path for the reflector
    key: bytes | None = None
    read_offset_ns: int = 0  # when in block k+1 block k is probed (0: the middle)
    timeout_ns: int = 2_000_000_000
    clock_synchronised: bool = False
    # The first block with no loss result yet, when the session measured before (a restarted
    # node manager): blocks from there on get a result, measured or "not running".
    resume_from_block: int | None = None
    liveness: LivenessConfig | None = None  # None: no liveness state
    histogram_edges_ns: tuple[int, ...] = ()  # delay histogram bins of each block (none: ())
    burst_size: int = 1  # probes back to back at each probe tick
    computation_interval_ns: int = 0  # delay also per interval of this length (0: per block)
    thresholds: ThresholdConfig | None = None  # None: no threshold events

    def __post_init__(self) -> None:
        if self.burst_size < 1:
            raise ValueError(f"burst size must be >= 1, not {self.burst_size}")
        interval = self.computation_interval_ns
        if interval < 0 or (interval and self.period_ns % interval):
            raise ValueError(
                f"computation interval {interval} ns does not divide the {self.period_ns} ns block"
            )


@dataclass
class SenderStats:
    sent: int = 0
    received: int = 0
    lost: int = 0
    malformed: int = 0
    auth_failures: int = 0
    unmatched: int = 0
    results_evicted: int = 0  # filled from the session's ResultStore when read


@dataclass
class _Pending:
    sent_ns: int
    block: int | None  # the block whose loss this probe carries
    s_txc: int | None
    leader: int  # sequence number of its burst's first probe (its own when first)


@dataclass
class _Burst:
    """A burst's probes until each is answered or lost (for the accelerated threshold check)."""

    pending: int = 0
    last_sent_ns: int = 0
    replies: list[DelayResult] = field(default_factory=list)


@dataclass
class SenderSession:
    config: SenderConfig
    counters: BlockCounters
    send: Callable[[bytes, tuple[str, int]], bool]
    clock: Callable[[], int] = time.time_ns
    results: ResultSink = field(default_factory=ResultStore)
    stats: SenderStats = field(default_factory=SenderStats)
    # the transport writes T1 into each probe as it sends it (a data plane that sends the probes
    # itself): delay takes T1 from the reply, which echoes it, rather than from the clock here
    t1_on_the_wire: bool = False

    def __post_init__(self) -> None:
        self._seq = 0
        self._pending: dict[int, _Pending] = {}
        config = self.config
        self._blocks = DelayWindows(
            config.name, config.period_ns, config.period_ns, config.histogram_edges_ns
        )
        self._intervals = (
            DelayWindows(
                config.name,
                config.computation_interval_ns,
                config.period_ns,
                config.histogram_edges_ns,
            )
            if config.computation_interval_ns
            else None
        )
        self._error_estimate = clock_error_estimate(config.clock_synchronised)
        self.liveness = self._liveness_monitor()
        self.thresholds = (
            ThresholdMonitor(config.name, config.thresholds) if config.thresholds else None
        )
        # bursts by their first probe's sequence number, only for the accelerated check
        self._bursts: dict[int, _Burst] | None = (
            {} if config.thresholds and config.thresholds.check_each_burst else None
        )

    def _liveness_monitor(self) -> LivenessMonitor | None:
        """The session's liveness; its timeout defaults to the probe interval and never
        exceeds the probe timeout, after which a reply is not matched any more."""
        config = self.config
        if config.liveness is None:
            return None
        interval = config.delay_interval_ns or config.period_ns
        timeout = min(config.liveness.timeout_ns or interval, config.timeout_ns)
        return LivenessMonitor(config.name, config.liveness, timeout)

    def set_clock_synchronised(self, synchronised: bool) -> None:
        """The clock gained or lost its external source: probes say so from now on (S bit),
        and loss is valid only while both ends are synchronised."""
        self.config = dataclasses.replace(self.config, clock_synchronised=synchronised)
        self._error_estimate = clock_error_estimate(synchronised)

    # ---- sending -----------------------------------------------------------------------------

    def _burst(self, block: int | None) -> None:
        """The probes of one tick: the first carries the loss counters of `block`, if any."""
        leader = self._probe(block)
        for _ in range(self.config.burst_size - 1):
            self._probe(None, leader)

    def _probe(self, block: int | None, leader: int | None = None) -> int:
        """Send one probe, the first of a burst unless `leader` names that burst's first; with
        `block`, it carries the loss counters of that block. Its sequence number."""
        tlvs: list[Tlv] = []
        s_txc = None
        # RFC 8972 section 4: a Session-Sender sends every TLV with U set; the reflector clears
        # it on the TLVs it recognises.
        if block is not None:
            s_txc = self.counters.block_packets(self.config.forward_flow, block)
            tlvs.append(DirectMeasurement(s_txc=(s_txc or 0) & MASK32, flags=FLAG_U))
        if self.config.return_segments:
            tlvs.append(ReturnPath(segments=self.config.return_segments, flags=FLAG_U))
        seq = self._seq
        self._seq = (self._seq + 1) & MASK32
        t1 = self.clock()
        packet = codec.SenderPacket(
            seq=seq,
            timestamp=ntp_from_unix_ns(t1),
            error_estimate=self._error_estimate,
            ssid=self.config.ssid,
            tlvs=tuple(tlvs),
        )
        self._pending[seq] = _Pending(t1, block, s_txc, seq if leader is None else leader)
        if self.liveness and leader is None:
            self.liveness.sent(seq, t1)  # a burst is one liveness probe
        if self._bursts is not None:
            burst = self._bursts.setdefault(seq if leader is None else leader, _Burst())
            burst.pending += 1
            burst.last_sent_ns = t1
        self._blocks.sent(t1)
        if self._intervals:
            self._intervals.sent(t1)
        self.stats.sent += 1
        self.send(codec.encode_sender(packet, self.config.key), self.config.reflector)
        return seq

    async def run(self) -> None:
        """Send probes until cancelled: the loss probe of each block, delay probes between."""
        period = self.config.period_ns
        offset = self.config.read_offset_ns or period // 2
        interval = self.config.delay_interval_ns
        now = self.clock()
        next_loss = (block_of(now, period) + 1) * period + offset
        resume = self.config.resume_from_block
        if self.config.forward_flow and resume is not None:
            next_loss = self._resume(now, offset, resume)
        next_delay = now if interval else None
        while True:
            now = self.clock()
            if now >= next_loss:
                # it measures delay too; a delay-only session (no flows) carries no counters
                self._burst(block_of(now, period) - 1 if self.config.forward_flow else None)
                # from the clock, not += period: after a stall, no burst for one block
                next_loss = (block_of(now, period) + 1) * period + offset
                next_delay = now + interval if interval else None
            elif next_delay is not None and now >= next_delay:
                self._burst(None)
                next_delay = now + interval
            self.expire(now)
            # also at the next window's start: the one just ended may be complete (delay record)
            window = self.config.computation_interval_ns or period
            next_window = (now // window + 1) * window
            wake = min(next_loss, next_window, next_loss if next_delay is None else next_delay)
            missed_at = self.liveness.deadline() if self.liveness else None
            if missed_at is not None:
                wake = min(wake, missed_at)
            await asyncio.sleep(max(0.0, (wake - self.clock()) / 1e9))

    def _resume(self, now: int, offset: int, resume: int) -> int:
        """When the first loss probe goes, for a session that measured before. The block before
        this one stays readable at both ends until the next block starts (RFC 9341: a colour is
        reused two blocks later), so a quick restart can still measure it: at this block's read
        point, or at once if that has passed, unless too near the block's end for the reply to
        come back in time. Blocks no probe can measure any more get a "not running" result."""
        period = self.config.period_ns
        current = block_of(now, period)
        first, next_loss = current, (current + 1) * period + offset
        if resume <= current - 1 and now < (current + 1) * period - period // 4:
            first, next_loss = current - 1, max(now, current * period + offset)
        for block in range(max(resume, first - MAX_GAP_BLOCKS), first):
            gap = LossResult(self.config.name, block, None, None, False, NOT_RUNNING)
            self.results.add_loss(gap)
        return next_loss

    # ---- receiving ---------------------------------------------------------------------------

    def handle(self, datagram: Datagram) -> None:
        try:
            # A reply whose base verifies but whose HMAC TLV does not still gives delay.
            reply = codec.decode_reflector(datagram.data, self.config.key, tlv_integrity="mark")
        except AuthenticationFailed:
            self.stats.auth_failures += 1
            return
        except StampError:
            self.stats.malformed += 1
            return
        pending = self._pending.get(reply.sender_seq)
        # SSID 0: a reflector without SSID support (TWAMP-Light) leaves those octets zero.
        if pending is None or reply.ssid not in (self.config.ssid, 0):
            self.stats.unmatched += 1  # late (already counted lost), duplicated or foreign
            return
        # the reflector's Error Estimate says which format its T2 and T3 are in
        ptp = is_ptp(reply.error_estimate)
        try:
            t2, t3 = to_unix_ns(reply.receive_timestamp, ptp), to_unix_ns(reply.timestamp, ptp)
        except InvalidTimestamp:
            self.stats.malformed += 1  # PTP nanoseconds out of range: a late reply may still come
            return
        del self._pending[reply.sender_seq]
        self.stats.received += 1
        if self.liveness:
            self._liveness_changed(self.liveness.replied(pending.leader, datagram.received_ns))
        if self.t1_on_the_wire:
            pending = dataclasses.replace(pending, sent_ns=unix_ns_from_ntp(reply.sender_timestamp))
        self._record_delay(reply, t2, t3, datagram.received_ns, pending)
        if pending.block is not None:
            self.results.add_loss(self._loss(reply, pending))
        self._close_windows(datagram.received_ns)

    def _record_delay(
        self, reply: codec.ReflectorPacket, t2: int, t3: int, t4: int, pending: _Pending
    ) -> None:
        t1 = pending.sent_ns
        synced = is_synchronised(reply.error_estimate) and self.config.clock_synchronised
        result = DelayResult(
            session=self.config.name,
            seq=reply.sender_seq,
            sent_ns=t1,
            two_way_ns=two_way_delay_ns(t1, t2, t3, t4),
            forward_ns=t2 - t1 if synced else None,
            reverse_ns=t4 - t3 if synced else None,
        )
        self.results.add_delay(result)
        self._blocks.answered(result)
        if self._intervals:
            self._intervals.answered(result)
        self._burst_probe_done(pending.leader, result)

    def _close_windows(self, now: int) -> None:
        """Report, in order, each past block and interval whose probes are all answered or
        lost; thresholds are checked on intervals, or on blocks when there are none."""
        for block in self._blocks.close(now):
            self.results.add_delay_block(block)
            if not self._intervals:
                self._check_thresholds(block, self._blocks)
        if self._intervals:
            for interval in self._intervals.close(now):
                self.results.add_delay_interval(interval)
                self._check_thresholds(interval, self._intervals)

    def _check_thresholds(self, result: DelayBlock, windows: DelayWindows) -> None:
        if self.thresholds is None:
            return
        start = result.interval_start_ns or result.block * self.config.period_ns
        self._thresholds_crossed(
            self.thresholds.interval(threshold_values(result), start + windows.length_ns)
        )

    def _burst_probe_done(self, leader: int, reply: DelayResult | None) -> None:
        """One of a burst's probes was answered (`reply`) or lost: once none is pending, the
        accelerated check on the burst's means."""
        if self._bursts is None or leader not in self._bursts:
            return
        burst = self._bursts[leader]
        burst.pending -= 1
        if reply is not None:
            burst.replies.append(reply)
        if burst.pending or self.thresholds is None:
            return
        del self._bursts[leader]
        if burst.replies:
            means = burst_means(burst.replies)
            self._thresholds_crossed(self.thresholds.burst(means, burst.last_sent_ns))

    def _thresholds_crossed(self, events: list[ThresholdEvent]) -> None:
        for event in events:
            log.info(
                "STAMP session %s: %s %d ns (reference %d ns)",
                event.session,
                event.metric.value,
                event.value_ns,
                event.reference_ns,
            )
            self.results.add_threshold(event)

    def _loss(self, reply: codec.ReflectorPacket, pending: _Pending) -> LossResult:
        assert pending.block is not None
        block = pending.block
        dm = next((t for t in reply.tlvs if isinstance(t, DirectMeasurement)), None)
        rx_reverse = self.counters.block_packets(self.config.reverse_flow, block)
        reason = ""
        if reply.integrity_failed:
            reason = "reply's HMAC TLV did not verify: its counters cannot be trusted"
        elif dm is None:
            reason = "reflector returned no Direct Measurement TLV (TWAMP-Light or no TLV support)"
        elif dm.flags & FLAG_I:
            reason = "reflector found the probe's HMAC TLV wrong (check both ends' keys)"
        elif dm.flags & FLAG_M:
            reason = "reflector found the Direct Measurement TLV malformed"
        elif dm.flags & FLAG_U:
            reason = "reflector counters unavailable"
        elif pending.s_txc is None or rx_reverse is None:
            reason = "sender counters unavailable"
        elif not (self.config.clock_synchronised and is_synchronised(reply.error_estimate)):
            reason = "clocks not synchronised: blocks may not align"
        if reason or dm is None or pending.s_txc is None or rx_reverse is None:
            return LossResult(self.config.name, block, None, None, False, reason)
        return LossResult(
            self.config.name,
            block,
            forward=DirectionLoss(pending.s_txc & MASK32, dm.r_rxc),
            reverse=DirectionLoss(dm.r_txc, rx_reverse & MASK32),
            valid=True,
        )

    def expire(self, now: int) -> None:
        """Probes unanswered for `timeout_ns` are lost; a lost loss probe voids its block."""
        for seq, pending in list(self._pending.items()):
            if now - pending.sent_ns >= self.config.timeout_ns:
                del self._pending[seq]
                self.stats.lost += 1
                self._blocks.lost(pending.sent_ns)
                if self._intervals:
                    self._intervals.lost(pending.sent_ns)
                self._burst_probe_done(pending.leader, None)
                if pending.block is not None:
                    self.results.add_loss(
                        LossResult(self.config.name, pending.block, None, None, False, "probe lost")
                    )
        self._close_windows(now)
        if self.liveness:
            self._liveness_changed(self.liveness.decide(now))

    def _liveness_changed(self, changes: list[LivenessChange]) -> None:
        for change in changes:
            log.info(
                "STAMP session %s is %s (%d probes in a row)",
                change.session,
                change.state.value,
                change.consecutive,
            )
            self.results.add_liveness(change)


def threshold_values(result: DelayBlock) -> dict[Metric, int]:
    """What each threshold metric is in an interval's (or block's) delay; a delay without
    replies, or one-way without synchronised clocks, has none."""
    values: dict[Metric, int] = {}
    if result.two_way:
        values[Metric.TWO_WAY_MEAN] = result.two_way.mean_ns
        values[Metric.TWO_WAY_P99] = result.two_way.p99_ns
        values[Metric.JITTER] = result.two_way.jitter_ns
    if result.forward:
        values[Metric.FORWARD_MEAN] = result.forward.mean_ns
    if result.reverse:
        values[Metric.REVERSE_MEAN] = result.reverse.mean_ns
    return values


def burst_means(replies: list[DelayResult]) -> dict[Metric, int]:
    """A burst's mean delays (rounded to the ns, as DelayStats' mean), one-way ones only when
    every reply has them."""
    means = {Metric.TWO_WAY_MEAN: round(sum(r.two_way_ns for r in replies) / len(replies))}
    if all(r.forward_ns is not None for r in replies):
        means[Metric.FORWARD_MEAN] = round(sum(r.forward_ns or 0 for r in replies) / len(replies))
        means[Metric.REVERSE_MEAN] = round(sum(r.reverse_ns or 0 for r in replies) / len(replies))
    return means
