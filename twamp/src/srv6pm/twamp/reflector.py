"""Session-Reflector (RFC 8762 section 4.3), stateless or stateful, with RFC 8972 TLVs.

For each test packet: T2 is the kernel receive time; T2 and T3 are in the format the probe's
Error Estimate asks for (Z: PTPv2 truncated, else NTP), which the reply's Error Estimate, the
reflector's own error otherwise, repeats; the reply copies the sender's sequence
number (stateless) or carries the reflector's own per-session one (stateful, section 4.3.2).
TLVs come back flagged as RFC 8972 section 4 says (`codec.reflect_tlvs`); the recognised ones
are acted on:
- Direct Measurement: this node's counters of the block the sender's timestamp falls in minus
  one (the block the probe reports: it is sent in the safe window of the next block); U when
  there are none.
- Class of Service: DSCP2 and ECN as received; the reply leaves with DSCP1 unless local policy
  refuses it (RP = 1).
- Location: the ports and the addresses the probe had; Timestamp Information: how T2 and T3
  are taken and what the clock follows.
- Destination Node Address (RFC 9503 section 3): U unless it names the address the probe reached.
- Return Path (RFC 9503 section 4): a Control Code asks for no reply, or for one on the link the
  probe came in by; an SRv6 Segment List must be one declared for the session and the sender,
  whose route the node installed from declared state; anything else (an unknown SID list, a
  Return Address, an SR-MPLS label stack) gets U and is counted as refused: nothing on the wire
  changes where replies go beyond what the operator declared.
When the HMAC TLV check fails, every TLV comes back with I and none is acted on. Packets that
fail base authentication or parsing are counted and dropped (section 4.3: a reflector never
answers what it cannot verify).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from . import codec
from .counters import BlockCounters
from .error_estimate import Z_BIT, clock_error_estimate, is_ptp, is_synchronised
from .errors import AuthenticationFailed, InvalidTimestamp, StampError
from .maths import block_of
from .timestamps import from_unix_ns, to_unix_ns
from .tlv import (
    FLAG_M,
    FLAG_U,
    AccessReport,
    ClassOfService,
    DestinationNodeAddress,
    DirectMeasurement,
    Location,
    LocationSubType,
    ReturnPath,
    SubTlv,
    TimestampInformation,
    Tlv,
)
from .transport import Datagram

log = logging.getLogger(__name__)
MASK32 = 0xFFFFFFFF
T3 = struct.Struct("!Q")
T3_OFFSET = 4  # the reflector's Timestamp, unauthenticated layout (RFC 8762 section 4.3.1)
# Timestamp Information codes (RFC 8972 section 4.3): sync source NTP / local free-running clock,
# timestamping method software-local (T2 is the kernel's receive time, T3 read just before send).
SYNC_NTP, SYNC_LOCAL, SOFTWARE_LOCAL = 1, 5, 2


class Send(Protocol):
    def __call__(
        self,
        data: bytes,
        destination: tuple[str, int],
        traffic_class: int | None = None,
        ifindex: int | None = None,
        mark: int | None = None,
    ) -> bool: ...


@dataclass(frozen=True)
class ReflectedFlows:
    """The monitored flows a session's Direct Measurement refers to, on this node, and the
    (sender address, SID list) return paths declared for it."""

    forward: str  # received here (the probe's direction)
    reverse: str  # sent from here (the reply's direction)
    return_paths: frozenset[tuple[str, tuple[str, ...]]] = frozenset()


@dataclass
class ReflectorStats:
    received: int = 0
    reflected: int = 0
    malformed: int = 0
    auth_failures: int = 0
    counters_unavailable: int = 0
    return_paths_refused: int = 0
    sequences_evicted: int = 0  # stateful: senders forgotten to stay within max_sequences
    tlv_integrity_failures: int = 0  # HMAC TLV missing, misplaced or wrong: reflected with I
    replies_suppressed: int = 0  # RFC 9503 Control Code: the sender asked for no reply


@dataclass
class ReflectorConfig:
    stateful: bool = False
    key: bytes | None = None  # authenticated mode when set
    error_estimate: int = field(default_factory=lambda: clock_error_estimate(False))
    period_ns: int = 10_000_000_000
    sessions: dict[int, ReflectedFlows] = field(default_factory=dict)  # by SSID
    max_sequences: int = 65536  # stateful: (sender, SSID) sequence counters kept at most
    # stateful counters kept elsewhere (an in-kernel reflector's, shared with it): the next
    # sequence number of (sender, SSID), or None to count here
    sequences: Callable[[str, int], int | None] | None = None
    port: int = 862  # where it listens (Location TLV)
    allowed_dscp: frozenset[int] | None = None  # DSCP1 values replies may take; None: any
    # the packet mark a session's replies carry (SSID -> mark): what steers them into the
    # session's declared return path; None: replies are routed by destination
    reply_marks: Callable[[int], int] | None = None


@dataclass
class _Reply:
    """How the reply leaves, as the probe's TLVs asked."""

    wanted: bool = True
    traffic_class: int | None = None
    ifindex: int | None = None
    mark: int | None = None


class Reflector:
    def __init__(
        self,
        config: ReflectorConfig,
        counters: BlockCounters,
        send: Send,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self.stats = ReflectorStats()
        self._counters = counters
        self._send = send
        self._clock = clock
        # least recently heard first: a flood of strangers evicts strangers, not busy sessions
        self._sequences: OrderedDict[tuple[str, int], int] = OrderedDict()

    def handle(self, datagram: Datagram) -> None:
        self.stats.received += 1
        try:
            probe = codec.decode_sender(datagram.data, self.config.key, tlv_integrity="mark")
        except AuthenticationFailed:
            self.stats.auth_failures += 1
            log.info("authentication failed from %s", datagram.source[0])
            return
        except StampError as e:
            self.stats.malformed += 1
            log.debug("malformed test packet from %s: %s", datagram.source[0], e)
            return
        tlvs = codec.reflect_tlvs(probe.tlvs, probe.integrity_failed)
        reply = _Reply()
        if self.config.reply_marks and probe.ssid in self.config.sessions:
            reply.mark = self.config.reply_marks(probe.ssid)
        if probe.integrity_failed:
            self.stats.tlv_integrity_failures += 1
        else:
            # Only TLVs left with no flag were recognised and may be acted on.
            tlvs = tuple(t if t.flags else self._process(t, probe, datagram, reply) for t in tlvs)
        if not reply.wanted:
            self.stats.replies_suppressed += 1
            return
        seq = self._next_seq(datagram.source[0], probe) if self.config.stateful else probe.seq
        authenticated = self.config.key is not None
        ptp = is_ptp(probe.error_estimate)
        answer = codec.make_reflection(
            probe,
            seq=seq,
            # T3: the HMAC covers it, so taken before encoding in authenticated mode; else
            # written into the encoded reply, the last thing before sending
            timestamp=from_unix_ns(self._clock(), ptp) if authenticated else 0,
            error_estimate=self.config.error_estimate & ~Z_BIT | probe.error_estimate & Z_BIT,
            receive_timestamp=from_unix_ns(datagram.received_ns, ptp),
            sender_ttl=datagram.hop_limit if datagram.hop_limit is not None else 255,
            tlvs=tlvs,
            pad_to=len(datagram.data),  # symmetric size (RFC 8762 section 4.2.1)
        )
        data = codec.encode_reflector(answer, self.config.key)
        if not authenticated:
            late = bytearray(data)
            T3.pack_into(late, T3_OFFSET, from_unix_ns(self._clock(), ptp))
            data = bytes(late)
        if self._send(data, datagram.source, reply.traffic_class, reply.ifindex, reply.mark):
            self.stats.reflected += 1

    def _next_seq(self, source: str, probe: codec.SenderPacket) -> int:
        shared = self.config.sequences(source, probe.ssid) if self.config.sequences else None
        if shared is not None:
            return shared
        key = (source, probe.ssid)
        seq = self._sequences.pop(key, 0)
        self._sequences[key] = (seq + 1) & MASK32
        if len(self._sequences) > self.config.max_sequences:
            self._sequences.popitem(last=False)
            self.stats.sequences_evicted += 1
        return seq

    def _process(
        self, tlv: Tlv, probe: codec.SenderPacket, datagram: Datagram, reply: _Reply
    ) -> Tlv:
        if isinstance(tlv, DirectMeasurement):
            return self._direct_measurement(tlv, probe)
        if isinstance(tlv, ClassOfService):
            return self._class_of_service(tlv, datagram, reply)
        if isinstance(tlv, ReturnPath):
            return self._return_path(tlv, probe, datagram, reply)
        if isinstance(tlv, DestinationNodeAddress):
            reached = datagram.destination
            mine = reached is not None and _canonical(tlv.address) == _canonical(reached)
            return tlv if mine else _unrecognised(tlv)
        if isinstance(tlv, Location):
            return _location(tlv, datagram, self.config.port)
        if isinstance(tlv, TimestampInformation):
            sync = SYNC_NTP if is_synchronised(self.config.error_estimate) else SYNC_LOCAL
            return TimestampInformation(sync, SOFTWARE_LOCAL, sync, SOFTWARE_LOCAL, tlv.sub_tlvs)
        if isinstance(tlv, AccessReport) and not (
            tlv.access_id in (1, 2) and tlv.return_code in (1, 2)
        ):
            return _unrecognised(tlv)  # neither 3GPP nor non-3GPP, or no known Return Code
        return tlv

    def _direct_measurement(self, tlv: DirectMeasurement, probe: codec.SenderPacket) -> Tlv:
        flows = self.config.sessions.get(probe.ssid)
        try:
            sent = to_unix_ns(probe.timestamp, is_ptp(probe.error_estimate))
        except InvalidTimestamp:
            sent = None  # no block to report: PTP nanoseconds out of range
        block = block_of(sent, self.config.period_ns) - 1 if sent is not None else None
        rx = tx = None
        if flows and block is not None:
            rx = self._counters.block_packets(flows.forward, block)
            tx = self._counters.block_packets(flows.reverse, block)
        if rx is None or tx is None:
            # No counters for this block: say so with U (not processed), never with zeros that
            # would read as a measurement.
            self.stats.counters_unavailable += 1
            return _unrecognised(tlv)
        return dataclasses.replace(tlv, r_rxc=rx & MASK32, r_txc=tx & MASK32)

    def _class_of_service(self, tlv: ClassOfService, datagram: Datagram, reply: _Reply) -> Tlv:
        received = datagram.traffic_class
        if received is None:
            return _unrecognised(tlv)
        allowed = self.config.allowed_dscp
        refused = allowed is not None and tlv.dscp1 not in allowed
        if not refused:
            reply.traffic_class = tlv.dscp1 << 2
        return dataclasses.replace(tlv, dscp2=received >> 2, ecn=received & 3, rp=int(refused))

    def _return_path(
        self, tlv: ReturnPath, probe: codec.SenderPacket, datagram: Datagram, reply: _Reply
    ) -> Tlv:
        if tlv.control_code is not None:
            if not tlv.control_code & 1:
                reply.wanted = False  # no reply requested (one-way measurement)
                return tlv
            if datagram.ifindex is None:
                return _unrecognised(tlv)
            reply.ifindex = datagram.ifindex  # reply requested on the same link
            return tlv
        flows = self.config.sessions.get(probe.ssid)
        declared = flows.return_paths if flows else frozenset()
        wanted = (_canonical(datagram.source[0]), _canonical_list(tlv.segments or ()))
        if tlv.segments and tlv.address is None and not tlv.other and wanted in declared:
            return tlv  # the declared path: the node's route for this sender already takes it
        self.stats.return_paths_refused += 1
        return _unrecognised(tlv)


def _unrecognised(tlv: Tlv) -> Tlv:
    return dataclasses.replace(tlv, flags=tlv.flags | FLAG_U)


def _location(tlv: Location, datagram: Datagram, port: int) -> Location:
    """Ports and addresses of the probe as received (RFC 8972 section 4.2): a generic Source or
    Destination IP request is answered as its IPv6 type; what a UDP socket cannot see (MAC
    addresses) or what is not a request gets U; a request of the wrong size gets M and ends
    the sub-TLVs' processing (the rest get U)."""
    answers: dict[int, tuple[int, str | None]] = {
        LocationSubType.SOURCE_IP: (LocationSubType.SOURCE_IPV6, datagram.source[0]),
        LocationSubType.DESTINATION_IP: (LocationSubType.DESTINATION_IPV6, datagram.destination),
    }
    subs: list[SubTlv] = []
    stopped = False
    for sub in tlv.sub_tlvs:
        answer = answers.get(sub.type)
        if stopped or answer is None or answer[1] is None:
            subs.append(dataclasses.replace(sub, flags=FLAG_U))
        elif len(sub.value) != 16:
            subs.append(dataclasses.replace(sub, flags=FLAG_M))
            stopped = True
        else:
            address = ipaddress.IPv6Address(answer[1].split("%", maxsplit=1)[0]).packed
            subs.append(SubTlv(answer[0], address))
    return Location(port, datagram.source[1], tuple(subs))


def _canonical(address: str) -> str:
    try:
        return ipaddress.IPv6Address(address.split("%", maxsplit=1)[0]).compressed
    except ValueError:
        return address


def _canonical_list(segments: Sequence[str]) -> tuple[str, ...]:
    return tuple(_canonical(s) for s in segments)
