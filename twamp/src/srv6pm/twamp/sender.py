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
    DelayStats,
    DirectionLoss,
    LossResult,
    ResultSink,
    ResultStore,
)
from .timestamps import ntp_from_unix_ns, to_unix_ns
from .tlv import FLAG_I, FLAG_M, FLAG_U, DirectMeasurement, ReturnPath, Tlv
from .transport import Datagram

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


@dataclass
class _BlockDelays:
    """The probes sent in one block, until each is answered or lost."""

    sent: int = 0
    lost: int = 0
    pending: int = 0
    replies: list[DelayResult] = field(default_factory=list)


@dataclass
class SenderSession:
    config: SenderConfig
    counters: BlockCounters
    send: Callable[[bytes, tuple[str, int]], bool]
    clock: Callable[[], int] = time.time_ns
    results: ResultSink = field(default_factory=ResultStore)
    stats: SenderStats = field(default_factory=SenderStats)

    def __post_init__(self) -> None:
        self._seq = 0
        self._pending: dict[int, _Pending] = {}
        self._delay_blocks: dict[int, _BlockDelays] = {}  # block order (blocks only grow)
        self._last_reply: DelayResult | None = None  # jitter pairs it with the next block's first
        self._error_estimate = clock_error_estimate(self.config.clock_synchronised)
        self.liveness = self._liveness_monitor()

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

    def _probe(self, block: int | None) -> None:
        """Send one probe; with `block`, it carries the loss counters of that block."""
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
        self._pending[seq] = _Pending(t1, block, s_txc)
        if self.liveness:
            self.liveness.sent(seq, t1)
        delays = self._delay_blocks.setdefault(block_of(t1, self.config.period_ns), _BlockDelays())
        delays.sent += 1
        delays.pending += 1
        self.stats.sent += 1
        self.send(codec.encode_sender(packet, self.config.key), self.config.reflector)

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
                self._probe(block_of(now, period) - 1 if self.config.forward_flow else None)
                # from the clock, not += period: after a stall, no burst for one block
                next_loss = (block_of(now, period) + 1) * period + offset
                next_delay = now + interval if interval else None
            elif next_delay is not None and now >= next_delay:
                self._probe(None)
                next_delay = now + interval
            self.expire(now)
            # also at the next block's start: the block just ended may be complete (delay record)
            next_block = (block_of(now, period) + 1) * period
            wake = min(next_loss, next_block, next_loss if next_delay is None else next_delay)
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
            self._liveness_changed(self.liveness.replied(reply.sender_seq, datagram.received_ns))
        self._record_delay(reply, t2, t3, datagram.received_ns, pending)
        if pending.block is not None:
            self.results.add_loss(self._loss(reply, pending))
        self._close_delay_blocks(datagram.received_ns)

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
        delays = self._delay_blocks[block_of(t1, self.config.period_ns)]
        delays.pending -= 1
        delays.replies.append(result)

    def _close_delay_blocks(self, now: int) -> None:
        """Report, in block order, each past block whose probes are all answered or lost."""
        current = block_of(now, self.config.period_ns)
        for block, delays in list(self._delay_blocks.items()):
            if block >= current or delays.pending:
                return
            del self._delay_blocks[block]
            self.results.add_delay_block(self._delay_block(block, delays))

    def _delay_block(self, block: int, delays: _BlockDelays) -> DelayBlock:
        replies = sorted(delays.replies, key=lambda r: r.sent_ns)
        last = self._last_reply
        one_way = bool(replies) and all(r.forward_ns is not None for r in replies)
        edges = self.config.histogram_edges_ns
        two_way = DelayStats.of(
            [r.two_way_ns for r in replies], last.two_way_ns if last else None, edges
        )
        forward = reverse = None
        if one_way:
            forward = DelayStats.of(
                [r.forward_ns or 0 for r in replies], last.forward_ns if last else None, edges
            )
            reverse = DelayStats.of(
                [r.reverse_ns or 0 for r in replies], last.reverse_ns if last else None, edges
            )
        if replies:
            self._last_reply = replies[-1]
        reason = ""
        if not replies:
            reason = "no reply"
        elif not one_way:
            reason = "clocks not synchronised (Error Estimate S bit clear at one end)"
        return DelayBlock(
            self.config.name,
            block,
            delays.sent,
            delays.lost,
            two_way,
            forward,
            reverse,
            reason,
            edges,
        )

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
                delays = self._delay_blocks[block_of(pending.sent_ns, self.config.period_ns)]
                delays.pending -= 1
                delays.lost += 1
                if pending.block is not None:
                    self.results.add_loss(
                        LossResult(self.config.name, pending.block, None, None, False, "probe lost")
                    )
        self._close_delay_blocks(now)
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
