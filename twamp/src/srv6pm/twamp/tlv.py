"""STAMP TLVs, fast struct codec (RFC 8972 section 4; RFC 9503 section 4 for types 9 and 10).

Every TLV (and sub-TLV) has the same 4-octet header (RFC 8972 section 4):

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    |STAMP TLV Flags|     Type      |            Length             |
    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    ~                            Value                              ~

Length counts the Value only. Flags (IANA "STAMP TLV Flags", bit 0 = most significant):
U (bit 0, 0x80) unrecognised, M (bit 1, 0x40) malformed, I (bit 2, 0x20) integrity check failed.
A reflector returns a TLV it does not know with U set, one it cannot parse with M set.

Decoding never raises: a TLV whose value does not fit its type becomes `MalformedTlv` holding the
raw bytes as received (a TLV running past the end of the packet included), an unassigned type
becomes `UnknownTlv`. Zero octets from where a TLV would start to the end of the packet are MBZ
padding, not TLVs: type 0 is reserved (IANA), and a zero tail is what TWAMP-Light senders
(RFC 5357 Packet Padding) and our own `pad_to` put there.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

FLAG_U: Final = 0x80
FLAG_M: Final = 0x40
FLAG_I: Final = 0x20

HMAC_LEN: Final = 16  # HMAC-SHA-256 truncated to 128 bits (RFC 8762 4.4, RFC 8972 4.8)


class TlvType(IntEnum):
    """IANA "STAMP TLV Types" (RFC 8972 section 5.1, RFC 9503 section 6, RFC 9534)."""

    EXTRA_PADDING = 1
    LOCATION = 2
    TIMESTAMP_INFORMATION = 3
    CLASS_OF_SERVICE = 4
    DIRECT_MEASUREMENT = 5
    ACCESS_REPORT = 6
    FOLLOW_UP_TELEMETRY = 7
    HMAC = 8
    DESTINATION_NODE_ADDRESS = 9
    RETURN_PATH = 10
    MICRO_SESSION_ID = 11


class ReturnPathSubType(IntEnum):
    """Sub-TLV types of the Return Path TLV (RFC 9503 section 4.1)."""

    CONTROL_CODE = 1
    RETURN_ADDRESS = 2
    SR_MPLS_LABEL_STACK = 3
    SRV6_SEGMENT_LIST = 4


class LocationSubType(IntEnum):
    """IANA "STAMP Sub-TLV Types" used in the Location TLV (RFC 8972 section 4.2)."""

    SOURCE_MAC = 1
    SOURCE_EUI48 = 2
    SOURCE_EUI64 = 3
    DESTINATION_IP = 4
    DESTINATION_IPV4 = 5
    DESTINATION_IPV6 = 6
    SOURCE_IP = 7
    SOURCE_IPV4 = 8
    SOURCE_IPV6 = 9


@dataclass(frozen=True, slots=True)
class SubTlv:
    """A sub-TLV kept as raw value (Location / Timestamp Information sub-TLVs, other sub-TLVs)."""

    type: int
    value: bytes
    flags: int = 0


@dataclass(frozen=True, slots=True)
class ExtraPadding:
    """Type 1: `length` octets of padding (sent as zeros; received content is not kept)."""

    length: int
    flags: int = 0


@dataclass(frozen=True, slots=True)
class Location:
    """Type 2: ports (and, in sub-TLVs, addresses) the reflector saw; the sender sends zeros."""

    dst_port: int = 0
    src_port: int = 0
    sub_tlvs: tuple[SubTlv, ...] = ()
    flags: int = 0


@dataclass(frozen=True, slots=True)
class TimestampInformation:
    """Type 3: clock sync source and timestamping method at the reflector's ingress/egress."""

    sync_src_in: int = 0
    timestamp_in: int = 0
    sync_src_out: int = 0
    timestamp_out: int = 0
    sub_tlvs: tuple[SubTlv, ...] = ()
    flags: int = 0


@dataclass(frozen=True, slots=True)
class ClassOfService:
    """Type 4: DSCP1 (asked for the reply), DSCP2 and ECN (as received), RP (reverse path)."""

    dscp1: int = 0
    dscp2: int = 0
    ecn: int = 0
    rp: int = 0
    flags: int = 0


@dataclass(frozen=True, slots=True)
class DirectMeasurement:
    """Type 5: data-packet counters S_TxC (sender fills), R_RxC and R_TxC (reflector fills)."""

    s_txc: int = 0
    r_rxc: int = 0
    r_txc: int = 0
    flags: int = 0


@dataclass(frozen=True, slots=True)
class AccessReport:
    """Type 6: access network ID (4 bits) and Return Code (1 available, 2 unavailable)."""

    access_id: int = 0
    return_code: int = 0
    flags: int = 0


@dataclass(frozen=True, slots=True)
class Hmac:
    """Type 8: HMAC-SHA-256 (16 octets) over the Sequence Number and the TLVs before it."""

    digest: bytes = bytes(HMAC_LEN)
    flags: int = 0


@dataclass(frozen=True, slots=True)
class DestinationNodeAddress:
    """Type 9 (RFC 9503 4.2): the address the sender meant the probe for (IPv4 or IPv6 text)."""

    address: str
    flags: int = 0


@dataclass(frozen=True, slots=True)
class ReturnPath:
    """Type 10 (RFC 9503 4.1): where the reply should go.

    Sub-TLVs are written in this order: Control Code, Return Address, SRv6 Segment List, `other`
    (SR-MPLS label stacks and unknown sub-TLVs, raw). The flags of the three known sub-TLVs are
    not kept (written as 0).
    """

    segments: tuple[str, ...] | None = None
    address: str | None = None
    control_code: int | None = None
    other: tuple[SubTlv, ...] = ()
    flags: int = 0


@dataclass(frozen=True, slots=True)
class UnknownTlv:
    """A TLV of a type this codec does not interpret; its value is kept as is."""

    type: int
    value: bytes
    flags: int = 0


@dataclass(frozen=True, slots=True)
class MalformedTlv:
    """A TLV that does not parse: `raw` is header + value as received (maybe cut short).

    `flags` replaces the first octet of `raw` when it is encoded again, so a reflector returns
    the same octets with M set.
    """

    raw: bytes
    flags: int = 0

    @property
    def type(self) -> int | None:
        """The Type octet, when the fragment is long enough to have one."""
        return self.raw[1] if len(self.raw) > 1 else None


Tlv = (
    ExtraPadding
    | Location
    | TimestampInformation
    | ClassOfService
    | DirectMeasurement
    | AccessReport
    | Hmac
    | DestinationNodeAddress
    | ReturnPath
    | UnknownTlv
    | MalformedTlv
)

_HDR = struct.Struct(">BBH")
_U16X2 = struct.Struct(">HH")
_U8X4 = struct.Struct(">BBBB")
_U32 = struct.Struct(">I")
_U32X3 = struct.Struct(">III")
_ACCESS = struct.Struct(">BBH")


class _Bad(Exception):
    """Internal: the value of a known TLV type does not fit it (becomes MalformedTlv)."""


# ---------------------------------------------------------------------------------- encoding


def _header(flags: int, typ: int, length: int) -> bytes:
    if length > 0xFFFF:
        raise ValueError(f"TLV type {typ}: value of {length} octets exceeds the 16-bit Length")
    return _HDR.pack(flags, typ, length)


def _tlv(flags: int, typ: int, value: bytes) -> bytes:
    return _header(flags, typ, len(value)) + value


def _address_octets(text: str) -> bytes:
    return ipaddress.ip_address(text).packed


def _sub_tlvs(subs: tuple[SubTlv, ...]) -> bytes:
    return b"".join(_tlv(s.flags, s.type, s.value) for s in subs)


def _enc_padding(t: ExtraPadding) -> bytes:
    return _header(t.flags, TlvType.EXTRA_PADDING, t.length) + bytes(t.length)


def _enc_location(t: Location) -> bytes:
    value = _U16X2.pack(t.dst_port, t.src_port) + _sub_tlvs(t.sub_tlvs)
    return _tlv(t.flags, TlvType.LOCATION, value)


def _enc_timestamp_info(t: TimestampInformation) -> bytes:
    fixed = _U8X4.pack(t.sync_src_in, t.timestamp_in, t.sync_src_out, t.timestamp_out)
    return _tlv(t.flags, TlvType.TIMESTAMP_INFORMATION, fixed + _sub_tlvs(t.sub_tlvs))


def _enc_cos(t: ClassOfService) -> bytes:
    # DSCP1 (6 bits) | DSCP2 (6) | ECN (2) | RP (2) | Reserved (16).
    for name, value, bits in (("dscp1", t.dscp1, 6), ("dscp2", t.dscp2, 6), ("ecn", t.ecn, 2)):
        if not 0 <= value < 1 << bits:
            raise ValueError(f"Class of Service {name}={value} does not fit {bits} bits")
    if not 0 <= t.rp < 4:
        raise ValueError(f"Class of Service rp={t.rp} does not fit 2 bits")
    word = t.dscp1 << 26 | t.dscp2 << 20 | t.ecn << 18 | t.rp << 16
    return _header(t.flags, TlvType.CLASS_OF_SERVICE, 4) + _U32.pack(word)


def _enc_dm(t: DirectMeasurement) -> bytes:
    return _header(t.flags, TlvType.DIRECT_MEASUREMENT, 12) + _U32X3.pack(t.s_txc, t.r_rxc, t.r_txc)


def _enc_access(t: AccessReport) -> bytes:
    if not 0 <= t.access_id < 16:
        raise ValueError(f"Access Report ID {t.access_id} does not fit 4 bits")
    value = _ACCESS.pack(t.access_id << 4, t.return_code, 0)
    return _header(t.flags, TlvType.ACCESS_REPORT, 4) + value


def _enc_hmac(t: Hmac) -> bytes:
    if len(t.digest) != HMAC_LEN:
        raise ValueError(f"HMAC digest must be {HMAC_LEN} octets, not {len(t.digest)}")
    return _header(t.flags, TlvType.HMAC, HMAC_LEN) + t.digest


def _enc_dest(t: DestinationNodeAddress) -> bytes:
    return _tlv(t.flags, TlvType.DESTINATION_NODE_ADDRESS, _address_octets(t.address))


def _enc_return_path(t: ReturnPath) -> bytes:
    parts: list[bytes] = []
    if t.control_code is not None:
        parts.append(_tlv(0, ReturnPathSubType.CONTROL_CODE, _U32.pack(t.control_code)))
    if t.address is not None:
        parts.append(_tlv(0, ReturnPathSubType.RETURN_ADDRESS, _address_octets(t.address)))
    if t.segments is not None:
        sids = b"".join(ipaddress.IPv6Address(s).packed for s in t.segments)
        parts.append(_tlv(0, ReturnPathSubType.SRV6_SEGMENT_LIST, sids))
    parts.append(_sub_tlvs(t.other))
    return _tlv(t.flags, TlvType.RETURN_PATH, b"".join(parts))


def _enc_unknown(t: UnknownTlv) -> bytes:
    return _tlv(t.flags, t.type, t.value)


def _enc_malformed(t: MalformedTlv) -> bytes:
    if not t.raw:
        return b""
    return bytes((t.flags,)) + t.raw[1:]


_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    ExtraPadding: _enc_padding,
    Location: _enc_location,
    TimestampInformation: _enc_timestamp_info,
    ClassOfService: _enc_cos,
    DirectMeasurement: _enc_dm,
    AccessReport: _enc_access,
    Hmac: _enc_hmac,
    DestinationNodeAddress: _enc_dest,
    ReturnPath: _enc_return_path,
    UnknownTlv: _enc_unknown,
    MalformedTlv: _enc_malformed,
}


def encode_tlv(tlv: Tlv) -> bytes:
    """Wire octets of one TLV; ValueError if a field does not fit its width."""
    encoder = _ENCODERS.get(type(tlv))
    if encoder is None:
        raise TypeError(f"not a STAMP TLV: {tlv!r}")
    try:
        out = encoder(tlv)
    except struct.error as exc:  # a counter, port or flag out of its field's range
        raise ValueError(f"{tlv!r}: {exc}") from exc
    return out


def encode_tlvs(tlvs: tuple[Tlv, ...]) -> bytes:
    """Wire octets of a TLV sequence, in order."""
    return b"".join(encode_tlv(t) for t in tlvs)


# ---------------------------------------------------------------------------------- decoding


def _parse_subs(value: bytes, start: int) -> list[SubTlv]:
    subs: list[SubTlv] = []
    pos, end = start, len(value)
    while pos < end:
        if end - pos < 4:
            raise _Bad
        flags, typ, length = _HDR.unpack_from(value, pos)
        pos += 4
        if pos + length > end:
            raise _Bad
        subs.append(SubTlv(typ, value[pos : pos + length], flags))
        pos += length
    return subs


def _address_text(octets: bytes) -> str:
    if len(octets) == 4:
        return str(ipaddress.IPv4Address(octets))
    if len(octets) == 16:
        return str(ipaddress.IPv6Address(octets))
    raise _Bad


def _dec_padding(flags: int, value: bytes) -> Tlv:
    return ExtraPadding(len(value), flags)


def _dec_location(flags: int, value: bytes) -> Tlv:
    if len(value) < 4:
        raise _Bad
    dst, src = _U16X2.unpack_from(value)
    return Location(dst, src, tuple(_parse_subs(value, 4)), flags)


def _dec_timestamp_info(flags: int, value: bytes) -> Tlv:
    if len(value) < 4:
        raise _Bad
    a, b, c, d = _U8X4.unpack_from(value)
    return TimestampInformation(a, b, c, d, tuple(_parse_subs(value, 4)), flags)


def _dec_cos(flags: int, value: bytes) -> Tlv:
    if len(value) != 4:
        raise _Bad
    (word,) = _U32.unpack(value)
    dscp1, dscp2, ecn, rp = word >> 26, (word >> 20) & 0x3F, (word >> 18) & 3, (word >> 16) & 3
    return ClassOfService(dscp1, dscp2, ecn, rp, flags)


def _dec_dm(flags: int, value: bytes) -> Tlv:
    if len(value) != 12:
        raise _Bad
    s_txc, r_rxc, r_txc = _U32X3.unpack(value)
    return DirectMeasurement(s_txc, r_rxc, r_txc, flags)


def _dec_access(flags: int, value: bytes) -> Tlv:
    if len(value) != 4:
        raise _Bad
    id_resv, code, _reserved = _ACCESS.unpack(value)
    return AccessReport(id_resv >> 4, code, flags)


def _dec_hmac(flags: int, value: bytes) -> Tlv:
    if len(value) != HMAC_LEN:
        raise _Bad
    return Hmac(value, flags)


def _dec_dest(flags: int, value: bytes) -> Tlv:
    return DestinationNodeAddress(_address_text(value), flags)


def _dec_return_path(flags: int, value: bytes) -> Tlv:
    segments: tuple[str, ...] | None = None
    address: str | None = None
    control: int | None = None
    other: list[SubTlv] = []
    for sub in _parse_subs(value, 0):
        # A second instance of a known sub-TLV has no place in the dataclass: malformed.
        if sub.type == ReturnPathSubType.CONTROL_CODE:
            if control is not None or len(sub.value) != 4:
                raise _Bad
            (control,) = _U32.unpack(sub.value)
        elif sub.type == ReturnPathSubType.RETURN_ADDRESS:
            if address is not None:
                raise _Bad
            address = _address_text(sub.value)
        elif sub.type == ReturnPathSubType.SRV6_SEGMENT_LIST:
            if segments is not None or len(sub.value) % 16:
                raise _Bad
            segments = tuple(
                str(ipaddress.IPv6Address(sub.value[i : i + 16]))
                for i in range(0, len(sub.value), 16)
            )
        else:
            other.append(sub)
    return ReturnPath(segments, address, control, tuple(other), flags)


_DECODERS: dict[int, Callable[[int, bytes], Tlv]] = {
    TlvType.EXTRA_PADDING: _dec_padding,
    TlvType.LOCATION: _dec_location,
    TlvType.TIMESTAMP_INFORMATION: _dec_timestamp_info,
    TlvType.CLASS_OF_SERVICE: _dec_cos,
    TlvType.DIRECT_MEASUREMENT: _dec_dm,
    TlvType.ACCESS_REPORT: _dec_access,
    TlvType.HMAC: _dec_hmac,
    TlvType.DESTINATION_NODE_ADDRESS: _dec_dest,
    TlvType.RETURN_PATH: _dec_return_path,
}


def decode_tlvs(buf: bytes, start: int) -> tuple[tuple[Tlv, ...], int]:
    """TLVs in buf[start:] and the offset where trailing MBZ padding starts (len(buf) if none).

    Never raises on any content: bad TLVs come back as MalformedTlv. A TLV whose Length runs past
    the end of the packet ends the list (its raw tail is kept); one whose value does not fit its
    type does not, since its Length still says where the next TLV starts.
    """
    tlvs: list[Tlv] = []
    pos, end = start, len(buf)
    while pos < end:
        # Zeros from here to the end: MBZ padding (type 0 is reserved, never a real TLV).
        if buf[pos + 1 : pos + 2] in (b"\x00", b"") and buf.count(0, pos) == end - pos:
            return tuple(tlvs), pos
        if end - pos < 4:
            tlvs.append(MalformedTlv(buf[pos:], buf[pos]))
            break
        flags, typ, length = _HDR.unpack_from(buf, pos)
        stop = pos + 4 + length
        if stop > end:
            tlvs.append(MalformedTlv(buf[pos:], flags))
            break
        value = buf[pos + 4 : stop]
        decoder = _DECODERS.get(typ)
        if decoder is None:
            tlvs.append(UnknownTlv(typ, value, flags))
        else:
            try:
                tlvs.append(decoder(flags, value))
            except _Bad:
                # The Length still frames the TLV, so the ones after it can be read.
                tlvs.append(MalformedTlv(buf[pos:stop], flags))
        pos = stop
    return tuple(tlvs), end
