"""Session-Sender sessions (RFC 8762 section 4.2) measuring loss per block and delay.

Loss (RFC 9341 with RFC 8972 Direct Measurement): once per block, in the safe window of block
k+1, the probe carries this node's TX count of block k of the forward flow (S_TxC); the reflector
adds its RX count of the forward flow and TX count of the reverse flow for block k (the block is
derived from the probe's timestamp at both ends); the reply adds this node's RX count of the
reverse flow. Delay: every probe gives T1..T4; delay probes may be sent more often than one per
block. A probe without a reply before `timeout_ns` is lost, and so is its block's loss result.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import codec
from .counters import BlockCounters
from .error_estimate import clock_error_estimate, is_synchronised
from .errors import AuthenticationFailed, StampError
from .maths import block_of, two_way_delay_ns
from .results import DelayResult, DirectionLoss, LossResult, ResultStore
from .timestamps import ntp_from_unix_ns, unix_ns_from_ntp
from .tlv import FLAG_I, FLAG_M, FLAG_U, DirectMeasurement, ReturnPath, Tlv
from .transport import Datagram

log = logging.getLogger(__name__)
MASK32 = 0xFFFFFFFF


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
class SenderSession:
    config: SenderConfig
    counters: BlockCounters
    send: Callable[[bytes, tuple[str, int]], bool]
    clock: Callable[[], int] = time.time_ns
    results: ResultStore = field(default_factory=ResultStore)
    stats: SenderStats = field(default_factory=SenderStats)

    def __post_init__(self) -> None:
        self._seq = 0
        self._pending: dict[int, _Pending] = {}
        self._error_estimate = clock_error_estimate(self.config.clock_synchronised)

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
        self.stats.sent += 1
        self.send(codec.encode_sender(packet, self.config.key), self.config.reflector)

    async def run(self) -> None:
        """Send probes until cancelled: the loss probe of each block, delay probes between."""
        period = self.config.period_ns
        offset = self.config.read_offset_ns or period // 2
        interval = self.config.delay_interval_ns
        next_loss = (block_of(self.clock(), period) + 1) * period + offset
        next_delay = self.clock() if interval else None
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
            wake = next_loss if next_delay is None else min(next_loss, next_delay)
            await asyncio.sleep(max(0.0, (wake - self.clock()) / 1e9))

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
        del self._pending[reply.sender_seq]
        self.stats.received += 1
        self._record_delay(reply, datagram.received_ns, pending)
        if pending.block is not None:
            self.results.add_loss(self._loss(reply, pending))

    def _record_delay(self, reply: codec.ReflectorPacket, t4: int, pending: _Pending) -> None:
        t1 = pending.sent_ns
        t2 = unix_ns_from_ntp(reply.receive_timestamp)
        t3 = unix_ns_from_ntp(reply.timestamp)
        synced = is_synchronised(reply.error_estimate) and self.config.clock_synchronised
        self.results.add_delay(
            DelayResult(
                session=self.config.name,
                seq=reply.sender_seq,
                sent_ns=t1,
                two_way_ns=two_way_delay_ns(t1, t2, t3, t4),
                forward_ns=t2 - t1 if synced else None,
                reverse_ns=t4 - t3 if synced else None,
            )
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
                if pending.block is not None:
                    self.results.add_loss(
                        LossResult(self.config.name, pending.block, None, None, False, "probe lost")
                    )
