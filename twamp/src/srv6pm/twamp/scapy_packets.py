"""Scapy layers for STAMP test packets (RFC 8762 sections 4.2.1, 4.2.2, 4.3.1, 4.3.2; SSID RFC 8972
section 3), declarative counterparts of `srv6pm.twamp.codec`.

The unauthenticated layers subclass `scapy.contrib.stamp`'s and keep their field names (seq, ts,
err_estimate, ssid, ts_rx, seq_sender, ts_sender, err_estimate_sender, ttl_sender, tlv_objects),
with two changes: timestamps are raw 64-bit integers (the contrib layers turn NTP timestamps into
floats, which cannot hold a 2020s time to 2^-32 s, so they would not agree with the codec octet
for octet; `srv6pm.twamp.timestamps` converts), and TLVs are `scapy_tlv.StampTlv` (RFC 8972 flag
bit order). The authenticated layouts are new: scapy 2.8 has none. `sign(key)` fills the HMACs.

Layers are not bound to UDP on import (scapy.contrib.stamp binds its own to port 862); call
`bind_udp_port()` to dissect UDP traffic with these instead.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scapy.contrib.stamp import (
    ErrorEstimate,
    STAMPSessionReflectorTestUnauthenticated,
    STAMPSessionSenderTestUnauthenticated,
)
from scapy.fields import (
    AnyField,
    ByteField,
    IntField,
    LongField,
    PacketField,
    PacketListField,
    ShortField,
    StrFixedLenField,
    XStrFixedLenField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers, split_layers

from . import auth
from .scapy_tlv import StampTlv, StampTlvHmac
from .tlv import HMAC_LEN

STAMP_PORT = 862


def error_estimate_layer(raw: int) -> Packet:
    """The scapy ErrorEstimate sub-layer for a raw 16-bit value (no validation)."""
    return ErrorEstimate(
        S=raw >> 15, Z=(raw >> 14) & 1, scale=(raw >> 8) & 0x3F, multiplier=raw & 0xFF
    )


class StampSender(STAMPSessionSenderTestUnauthenticated):  # type: ignore[misc]
    """Session-Sender test packet, unauthenticated (44 octets + TLVs)."""

    name = "STAMP Session-Sender"
    fields_desc: ClassVar[list[AnyField]] = [
        IntField("seq", 0),
        LongField("ts", 0),
        PacketField("err_estimate", ErrorEstimate(), ErrorEstimate),
        ShortField("ssid", 0),
        StrFixedLenField("mbz", bytes(28), 28),
        PacketListField("tlv_objects", [], StampTlv),
    ]


class StampReflector(STAMPSessionReflectorTestUnauthenticated):  # type: ignore[misc]
    """Session-Reflector test packet, unauthenticated (44 octets + TLVs)."""

    name = "STAMP Session-Reflector"
    fields_desc: ClassVar[list[AnyField]] = [
        IntField("seq", 0),
        LongField("ts", 0),
        PacketField("err_estimate", ErrorEstimate(), ErrorEstimate),
        ShortField("ssid", 0),
        LongField("ts_rx", 0),
        IntField("seq_sender", 0),
        LongField("ts_sender", 0),
        PacketField("err_estimate_sender", ErrorEstimate(), ErrorEstimate),
        ShortField("mbz1", 0),
        ByteField("ttl_sender", 255),
        StrFixedLenField("mbz2", bytes(3), 3),
        PacketListField("tlv_objects", [], StampTlv),
    ]


class _Signed(Packet):  # type: ignore[misc]
    """HMACs of the authenticated layouts (RFC 8762 4.4, RFC 8972 4.8)."""

    _HMAC_COVERS: ClassVar[int] = 96

    def sign(self, key: bytes) -> Any:
        """A copy with the base HMAC and, if the last TLV is an HMAC TLV, its HMAC filled in."""
        signed = self.copy()
        tlvs = list(signed.tlv_objects)
        if tlvs and isinstance(tlvs[-1], StampTlvHmac):
            covered = b"".join(bytes(t) for t in tlvs[:-1])
            tlvs[-1].hmac = auth.digest(key, bytes(signed)[:4], covered)
            signed.tlv_objects = tlvs
        base = bytes(signed)[: self._HMAC_COVERS]
        signed.hmac = auth.digest(key, base)
        return signed


class StampSenderAuth(_Signed):
    """Session-Sender test packet, authenticated (112 octets + TLVs)."""

    name = "STAMP Session-Sender (authenticated)"
    fields_desc: ClassVar[list[AnyField]] = [
        IntField("seq", 0),
        StrFixedLenField("mbz0", bytes(12), 12),
        LongField("ts", 0),
        PacketField("err_estimate", ErrorEstimate(), ErrorEstimate),
        ShortField("ssid", 0),
        StrFixedLenField("mbz1", bytes(68), 68),
        XStrFixedLenField("hmac", bytes(HMAC_LEN), HMAC_LEN),
        PacketListField("tlv_objects", [], StampTlv),
    ]


class StampReflectorAuth(_Signed):
    """Session-Reflector test packet, authenticated (112 octets + TLVs)."""

    name = "STAMP Session-Reflector (authenticated)"
    fields_desc: ClassVar[list[AnyField]] = [
        IntField("seq", 0),
        StrFixedLenField("mbz0", bytes(12), 12),
        LongField("ts", 0),
        PacketField("err_estimate", ErrorEstimate(), ErrorEstimate),
        ShortField("ssid", 0),
        StrFixedLenField("mbz1", bytes(4), 4),
        LongField("ts_rx", 0),
        StrFixedLenField("mbz2", bytes(8), 8),
        IntField("seq_sender", 0),
        StrFixedLenField("mbz3", bytes(12), 12),
        LongField("ts_sender", 0),
        PacketField("err_estimate_sender", ErrorEstimate(), ErrorEstimate),
        StrFixedLenField("mbz4", bytes(6), 6),
        ByteField("ttl_sender", 255),
        StrFixedLenField("mbz5", bytes(15), 15),
        XStrFixedLenField("hmac", bytes(HMAC_LEN), HMAC_LEN),
        PacketListField("tlv_objects", [], StampTlv),
    ]


def bind_udp_port(port: int = STAMP_PORT, authenticated: bool = False) -> None:
    """Dissect UDP to `port` as our Session-Sender and from it as our Session-Reflector layers.

    Replaces scapy.contrib.stamp's binding of port 862 (its layers have the U/M/I flags in the
    wrong bit order and float timestamps).
    """
    split_layers(UDP, STAMPSessionSenderTestUnauthenticated, dport=STAMP_PORT)
    split_layers(UDP, STAMPSessionReflectorTestUnauthenticated, sport=STAMP_PORT)
    sender, reflector = (
        (StampSenderAuth, StampReflectorAuth)
        if authenticated
        else (
            StampSender,
            StampReflector,
        )
    )
    bind_layers(UDP, sender, dport=port)
    bind_layers(UDP, reflector, sport=port)


__all__ = [
    "STAMP_PORT",
    "StampReflector",
    "StampReflectorAuth",
    "StampSender",
    "StampSenderAuth",
    "bind_udp_port",
    "error_estimate_layer",
]
