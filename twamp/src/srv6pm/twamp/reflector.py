"""Session-Reflector (RFC 8762 section 4.3), stateless or stateful, with RFC 8972 TLVs.

For each test packet: T2 is the kernel receive time; the reply copies the sender's sequence
number (stateless) or carries the reflector's own per-session one (stateful, section 4.3.2),
reflects the TLVs (unknown ones flagged U, malformed ones M), fills Direct Measurement with this
node's counters of the block the sender's timestamp falls in minus one (the block the probe
reports: it is sent in the safe window of the next block), reports the DSCP received in Class
of Service, and checks an SRv6 Return Path (RFC 9503) against the return paths declared for the
session: the reply follows the route the node installed for that sender from declared state; a
Return Path TLV that names anything else is counted as refused and changes nothing.
Packets that fail authentication or parsing are counted and dropped (section 4.3: a reflector
never answers what it cannot verify).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import codec
from .counters import BlockCounters
from .errors import AuthenticationFailed, StampError
from .maths import block_of
from .timestamps import ntp_from_unix_ns, unix_ns_from_ntp
from .tlv import FLAG_U, ClassOfService, DirectMeasurement, ReturnPath, Tlv
from .transport import Datagram

log = logging.getLogger(__name__)
MASK32 = 0xFFFFFFFF


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


@dataclass
class ReflectorConfig:
    stateful: bool = False
    key: bytes | None = None  # authenticated mode when set
    error_estimate: int = 0
    period_ns: int = 10_000_000_000
    sessions: dict[int, ReflectedFlows] = field(default_factory=dict)  # by SSID
    max_sequences: int = 65536  # stateful: (sender, SSID) sequence counters kept at most


class Reflector:
    def __init__(
        self,
        config: ReflectorConfig,
        counters: BlockCounters,
        send: Callable[[bytes, tuple[str, int]], bool],
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
            probe = codec.decode_sender(datagram.data, self.config.key)
        except AuthenticationFailed:
            self.stats.auth_failures += 1
            log.info("authentication failed from %s", datagram.source[0])
            return
        except StampError as e:
            self.stats.malformed += 1
            log.debug("malformed test packet from %s: %s", datagram.source[0], e)
            return
        tlvs = tuple(self._fill(t, probe, datagram) for t in codec.reflect_tlvs(probe.tlvs))
        seq = self._next_seq(datagram.source[0], probe) if self.config.stateful else probe.seq
        flows = self.config.sessions.get(probe.ssid)
        for t in tlvs:
            if isinstance(t, ReturnPath) and t.segments:
                declared = flows.return_paths if flows else frozenset()
                if (_canonical(datagram.source[0]), _canonical_list(t.segments)) not in declared:
                    self.stats.return_paths_refused += 1
        reply = codec.make_reflection(
            probe,
            seq=seq,
            timestamp=ntp_from_unix_ns(self._clock()),  # T3: the last thing before sending
            error_estimate=self.config.error_estimate,
            receive_timestamp=ntp_from_unix_ns(datagram.received_ns),
            sender_ttl=datagram.hop_limit if datagram.hop_limit is not None else 255,
            tlvs=tlvs,
            pad_to=len(datagram.data),  # symmetric size (RFC 8762 section 4.2.1)
        )
        if self._send(codec.encode_reflector(reply, self.config.key), datagram.source):
            self.stats.reflected += 1

    def _next_seq(self, source: str, probe: codec.SenderPacket) -> int:
        key = (source, probe.ssid)
        seq = self._sequences.pop(key, 0)
        self._sequences[key] = (seq + 1) & MASK32
        if len(self._sequences) > self.config.max_sequences:
            self._sequences.popitem(last=False)
            self.stats.sequences_evicted += 1
        return seq

    def _fill(self, tlv: Tlv, probe: codec.SenderPacket, datagram: Datagram) -> Tlv:
        if isinstance(tlv, DirectMeasurement):
            flows = self.config.sessions.get(probe.ssid)
            block = block_of(unix_ns_from_ntp(probe.timestamp), self.config.period_ns) - 1
            rx = self._counters.block_packets(flows.forward, block) if flows else None
            tx = self._counters.block_packets(flows.reverse, block) if flows else None
            if rx is None or tx is None:
                # No counters for this block: say so with U (not processed), never with zeros
                # that would read as a measurement.
                self.stats.counters_unavailable += 1
                return dataclasses.replace(tlv, flags=tlv.flags | FLAG_U)
            return dataclasses.replace(tlv, r_rxc=rx & MASK32, r_txc=tx & MASK32)
        if isinstance(tlv, ClassOfService) and datagram.traffic_class is not None:
            return dataclasses.replace(tlv, dscp2=datagram.traffic_class >> 2)
        return tlv


def _canonical(address: str) -> str:
    try:
        return ipaddress.IPv6Address(address.split("%", maxsplit=1)[0]).compressed
    except ValueError:
        return address


def _canonical_list(segments: Sequence[str]) -> tuple[str, ...]:
    return tuple(_canonical(s) for s in segments)
