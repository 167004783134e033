"""Fast STAMP test-packet codec (RFC 8762 sections 4.2-4.3, SSID RFC 8972 section 3, TLVs RFC 8972
section 4 and RFC 9503), struct-based for the sender/reflector hot path; no scapy.

Layouts (octet offsets; unauthenticated base 44 octets, authenticated base 112):

    Session-Sender, unauthenticated       Session-Reflector, unauthenticated
      0- 3 Sequence Number                  0- 3 Sequence Number
      4-11 Timestamp (T1)                   4-11 Timestamp (T3)
     12-13 Error Estimate                  12-13 Error Estimate
     14-15 SSID                            14-15 SSID
     16-43 MBZ                             16-23 Receive Timestamp (T2)
                                           24-27 Session-Sender Sequence Number
                                           28-35 Session-Sender Timestamp (T1)
                                           36-37 Session-Sender Error Estimate
                                           38-39 MBZ
                                           40    Session-Sender TTL / Hop Limit
                                           41-43 MBZ

    Authenticated (HMAC over octets 0-95):  Sender: Seq 0-3, MBZ 4-15, Timestamp 16-23, Error
    Estimate 24-25, SSID 26-27, MBZ 28-95, HMAC 96-111. Reflector: Seq 0-3, MBZ 4-15, Timestamp
    16-23, Error Estimate 24-25, SSID 26-27, MBZ 28-31, Receive Timestamp 32-39, MBZ 40-47, Sender
    Sequence 48-51, MBZ 52-63, Sender Timestamp 64-71, Sender Error Estimate 72-73, MBZ 74-79,
    Sender TTL 80, MBZ 81-95, HMAC 96-111.

TLVs follow the base. In authenticated mode a packet with TLVs carries an HMAC TLV after every
TLV but Extra Padding, over the Sequence Number and the TLVs before it (RFC 8972 section 4.8);
`encode_*` adds it. Extra Padding after the HMAC TLV is not covered; an HMAC TLV anywhere else,
or missing when TLVs other than Extra Padding are present, fails the check.

Timestamps and Error Estimates are carried raw (64-bit / 16-bit wire values): converting them is
the caller's choice (see `timestamps` and `error_estimate`), and raw values round-trip exactly.

TWAMP-Light (RFC 5357 Appendix I) interoperates with the unauthenticated layouts: a TWAMP-Light
Session-Sender packet is Sequence Number, Timestamp, Error Estimate and Packet Padding (14 octets
and more, usually 41), its reflector packet the same 41 octets as STAMP's less the last 3 MBZ,
and some responders cut it after the last field they fill. `decode_sender` therefore accepts
unauthenticated packets from 14 octets (SSID 0 when absent, octets 16-43 ignored) and
`decode_reflector` from 36, the last octet of the Session-Sender Timestamp: every timestamp is
there; the Sender Error Estimate (octets 36-37) and TTL (40) are None when cut off. Zero Packet
Padding reads as MBZ, not TLVs.
TWAMP's own authenticated/encrypted modes (keys from TWAMP-Control) are a different layout and
are not supported.

Decoding any byte string returns a packet or raises a `StampError` subclass, nothing else.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Any, Final, Literal

from . import auth
from .errors import AuthenticationFailed, MalformedPacket, StampError
from .tlv import (
    FLAG_I,
    FLAG_M,
    FLAG_U,
    HMAC_LEN,
    AccessReport,
    ClassOfService,
    DestinationNodeAddress,
    DirectMeasurement,
    ExtraPadding,
    Hmac,
    Location,
    LocationSubType,
    MalformedTlv,
    ReturnPath,
    ReturnPathSubType,
    SubTlv,
    TimestampInformation,
    Tlv,
    TlvType,
    UnknownTlv,
    decode_tlvs,
    encode_tlv,
    encode_tlvs,
)

__all__ = [
    "AUTH_BASE_LEN",
    "FLAG_I",
    "FLAG_M",
    "FLAG_U",
    "TWAMP_LIGHT_REFLECTOR_MIN_LEN",
    "TWAMP_LIGHT_SENDER_MIN_LEN",
    "UNAUTH_BASE_LEN",
    "AccessReport",
    "AuthenticationFailed",
    "ClassOfService",
    "DestinationNodeAddress",
    "DirectMeasurement",
    "ExtraPadding",
    "Hmac",
    "Location",
    "LocationSubType",
    "MalformedPacket",
    "MalformedTlv",
    "ReflectorPacket",
    "ReturnPath",
    "ReturnPathSubType",
    "SenderPacket",
    "StampError",
    "SubTlv",
    "TimestampInformation",
    "Tlv",
    "TlvType",
    "UnknownTlv",
    "decode_reflector",
    "decode_sender",
    "encode_reflector",
    "encode_sender",
    "encode_tlv",
    "make_reflection",
    "reflect_tlvs",
]

UNAUTH_BASE_LEN: Final = 44
AUTH_BASE_LEN: Final = 112
TWAMP_LIGHT_SENDER_MIN_LEN: Final = 14
TWAMP_LIGHT_REFLECTOR_MIN_LEN: Final = 36
_HMAC_AT: Final = AUTH_BASE_LEN - HMAC_LEN  # 96: the base HMAC covers octets 0-95

_SENDER = struct.Struct(">IQHH28x")
_SENDER_16 = struct.Struct(">IQHH")  # TWAMP-Light sender with >= 2 octets of padding
_SENDER_14 = struct.Struct(">IQH")  # TWAMP-Light sender, bare
_SENDER_AUTH = struct.Struct(">I12xQHH68x")
_REFLECTOR = struct.Struct(">IQHHQIQH2xB3x")
_REFLECTOR_36 = struct.Struct(">IQHHQIQ")  # TWAMP-Light reflector: every timestamp, no more
_U16 = struct.Struct(">H")
_REFLECTOR_AUTH = struct.Struct(">I12xQHH4xQ8xI12xQH6xB15x")

TlvIntegrity = Literal["raise", "mark"]


@dataclass(frozen=True, slots=True)
class SenderPacket:
    """A Session-Sender test packet.

    timestamp: raw 64-bit T1 (NTP or PTP per the Z bit of error_estimate); error_estimate: raw 16
    bits; pad_to: total length wanted, zero-filled after the TLVs (decode sets it to the packet
    length when the packet ended in zero padding, so decode -> encode gives the same octets).
    integrity_failed: decoded with tlv_integrity="mark", the HMAC TLV check failed (the TLVs
    are as received and must not be acted on).
    """

    seq: int
    timestamp: int
    error_estimate: int
    ssid: int
    tlvs: tuple[Tlv, ...] = ()
    pad_to: int = 0
    integrity_failed: bool = False


@dataclass(frozen=True, slots=True)
class ReflectorPacket:
    """A Session-Reflector test packet: its own seq/T3/Error Estimate, T2, and the sender's fields.

    pad_to and integrity_failed work as in SenderPacket: a reflector passes len(received) to
    answer with the same size. sender_error_estimate and sender_ttl are None in a TWAMP-Light
    reply cut short before them (encoded as 0).
    """

    seq: int
    timestamp: int
    error_estimate: int
    ssid: int
    receive_timestamp: int
    sender_seq: int
    sender_timestamp: int
    sender_error_estimate: int | None
    sender_ttl: int | None
    tlvs: tuple[Tlv, ...] = ()
    pad_to: int = 0
    integrity_failed: bool = False


Buffer = bytes | bytearray | memoryview


# ---------------------------------------------------------------------------------- encoding


def _tlv_block(seq_octets: bytes, tlvs: tuple[Tlv, ...], key: bytes | None) -> bytes:
    if key is None:
        return encode_tlvs(tlvs)
    # Authenticated: a fresh HMAC TLV over what precedes it goes after every TLV but the Extra
    # Padding given after it, which stays there uncovered (RFC 8972 section 4.8); its flags are
    # kept, so a reflector can return I.
    rest = tuple(t for t in tlvs if not isinstance(t, Hmac))
    placed = _hmac_index(tlvs)
    at = len(rest) if placed is None else placed
    covered, after = encode_tlvs(rest[:at]), encode_tlvs(rest[at:])
    flags = next((t.flags for t in tlvs if isinstance(t, Hmac)), 0)
    mac = Hmac(auth.digest(key, seq_octets, covered), flags)
    return covered + encode_tlv(mac) + after


def _finish(base: bytes, tlvs: tuple[Tlv, ...], pad_to: int, key: bytes | None) -> bytes:
    out = base + _tlv_block(base[:4], tlvs, key) if tlvs else base
    if pad_to > len(out):
        out += bytes(pad_to - len(out))
    return out


def encode_sender(p: SenderPacket, key: bytes | None = None) -> bytes:
    """Wire octets of a Session-Sender packet; `key` selects authenticated mode.

    The base is already as long as the reflector's (44 or 112 octets, MBZ-filled, RFC 8762 4.2.1)
    and a reflector returns the TLVs it got, so sizes are symmetric; pad_to asks for more.
    ValueError if a field does not fit its width.
    """
    try:
        if key is None:
            base = _SENDER.pack(p.seq, p.timestamp, p.error_estimate, p.ssid)
        else:
            head = _SENDER_AUTH.pack(p.seq, p.timestamp, p.error_estimate, p.ssid)
            base = head + auth.digest(key, head)
    except struct.error as exc:
        raise ValueError(f"{p!r}: {exc}") from exc
    return _finish(base, p.tlvs, p.pad_to, key)


def encode_reflector(p: ReflectorPacket, key: bytes | None = None) -> bytes:
    """Wire octets of a Session-Reflector packet; `key` selects authenticated mode."""
    fields = (
        p.seq,
        p.timestamp,
        p.error_estimate,
        p.ssid,
        p.receive_timestamp,
        p.sender_seq,
        p.sender_timestamp,
        p.sender_error_estimate or 0,
        p.sender_ttl or 0,
    )
    try:
        if key is None:
            base = _REFLECTOR.pack(*fields)
        else:
            head = _REFLECTOR_AUTH.pack(*fields)
            base = head + auth.digest(key, head)
    except struct.error as exc:
        raise ValueError(f"{p!r}: {exc}") from exc
    return _finish(base, p.tlvs, p.pad_to, key)


# ---------------------------------------------------------------------------------- decoding


def _hmac_index(tlvs: tuple[Tlv, ...]) -> int | None:
    """Where the HMAC TLV is, if it is where RFC 8972 section 4.8 wants it: after every TLV but
    Extra Padding, once."""
    at = next((i for i, t in enumerate(tlvs) if isinstance(t, Hmac)), None)
    if at is None or not all(isinstance(t, ExtraPadding) for t in tlvs[at + 1 :]):
        return None
    return at


def _placed_hmac(buf: bytes, start: int, tlvs: tuple[Tlv, ...]) -> tuple[Hmac, int] | None:
    """The well-placed HMAC TLV and its offset (where the octets it covers end), or None."""
    at = _hmac_index(tlvs)
    if at is None:
        return None
    pos = start
    for _ in range(at):  # TLVs before a well-formed HMAC TLV are framed by their Length
        pos += 4 + _U16.unpack_from(buf, pos + 2)[0]
    mac = tlvs[at]
    assert isinstance(mac, Hmac)
    return mac, pos


def _read_tlvs(
    buf: bytes, start: int, key: bytes | None, integrity: TlvIntegrity
) -> tuple[tuple[Tlv, ...], int, bool]:
    """TLVs from `start`, the packet's pad_to, and whether the HMAC TLV check failed (always
    False unauthenticated; "raise" raises instead)."""
    n = len(buf)
    if start >= n:
        return (), 0, False
    tlvs, pad_at = decode_tlvs(buf, start)
    pad_to = n if pad_at < n else 0
    if key is None or all(isinstance(t, ExtraPadding) for t in tlvs):
        return tlvs, pad_to, False  # Extra Padding alone needs no HMAC TLV
    placed = _placed_hmac(buf, start, tlvs)
    if placed and auth.verify(key, placed[0].digest, buf[:4], buf[start : placed[1]]):
        return tlvs, pad_to, False
    if integrity == "raise":
        raise AuthenticationFailed("HMAC TLV missing, misplaced, or not matching")
    return tlvs, pad_to, True


def _as_bytes(data: Buffer) -> bytes:
    return data if isinstance(data, bytes) else bytes(data)


def decode_sender(
    data: Buffer, key: bytes | None = None, *, tlv_integrity: TlvIntegrity = "raise"
) -> SenderPacket:
    """Parse a Session-Sender packet (TWAMP-Light ones too, when unauthenticated).

    Authenticated (`key` given): AuthenticationFailed if the base HMAC does not verify, or if
    TLVs are present and the HMAC TLV is missing, misplaced or wrong; with tlv_integrity="mark"
    the latter instead returns the packet with integrity_failed set (a reflector reflects its
    TLVs with I, RFC 8972 section 4.8).
    """
    buf = _as_bytes(data)
    n = len(buf)
    if key is None:
        if n >= UNAUTH_BASE_LEN:
            seq, ts, ee, ssid = _SENDER.unpack_from(buf)
            tlvs, pad_to, _ = _read_tlvs(buf, UNAUTH_BASE_LEN, None, tlv_integrity)
            return SenderPacket(seq, ts, ee, ssid, tlvs, pad_to)
        if n >= 16:
            seq, ts, ee, ssid = _SENDER_16.unpack_from(buf)
        elif n >= TWAMP_LIGHT_SENDER_MIN_LEN:
            seq, ts, ee = _SENDER_14.unpack_from(buf)
            ssid = 0
        else:
            raise MalformedPacket(f"{n} octets: shorter than a Session-Sender packet (14)")
        return SenderPacket(seq, ts, ee, ssid)
    if n < AUTH_BASE_LEN:
        raise MalformedPacket(f"{n} octets: shorter than an authenticated packet (112)")
    if not auth.verify(key, buf[_HMAC_AT:AUTH_BASE_LEN], buf[:_HMAC_AT]):
        raise AuthenticationFailed("base packet HMAC does not match")
    seq, ts, ee, ssid = _SENDER_AUTH.unpack_from(buf)
    tlvs, pad_to, failed = _read_tlvs(buf, AUTH_BASE_LEN, key, tlv_integrity)
    return SenderPacket(seq, ts, ee, ssid, tlvs, pad_to, failed)


def _reflector_packet(
    f: tuple[Any, ...], tlvs: tuple[Tlv, ...] = (), pad_to: int = 0, failed: bool = False
) -> ReflectorPacket:
    return ReflectorPacket(
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], tlvs, pad_to, failed
    )


def decode_reflector(
    data: Buffer, key: bytes | None = None, *, tlv_integrity: TlvIntegrity = "raise"
) -> ReflectorPacket:
    """Parse a Session-Reflector packet (TWAMP-Light ones too, from 36 octets, unauthenticated).

    `key` and `tlv_integrity` work as in decode_sender.
    """
    buf = _as_bytes(data)
    n = len(buf)
    if key is None:
        if n >= UNAUTH_BASE_LEN:
            f = _REFLECTOR.unpack_from(buf)
            tlvs, pad_to, _ = _read_tlvs(buf, UNAUTH_BASE_LEN, None, tlv_integrity)
            return _reflector_packet(f, tlvs, pad_to)
        if n < TWAMP_LIGHT_REFLECTOR_MIN_LEN:
            raise MalformedPacket(f"{n} octets: shorter than a Session-Reflector packet (36)")
        sender_ee = _U16.unpack_from(buf, 36)[0] if n >= 38 else None
        sender_ttl = buf[40] if n >= 41 else None
        return _reflector_packet((*_REFLECTOR_36.unpack_from(buf), sender_ee, sender_ttl))
    if n < AUTH_BASE_LEN:
        raise MalformedPacket(f"{n} octets: shorter than an authenticated packet (112)")
    if not auth.verify(key, buf[_HMAC_AT:AUTH_BASE_LEN], buf[:_HMAC_AT]):
        raise AuthenticationFailed("base packet HMAC does not match")
    f = _REFLECTOR_AUTH.unpack_from(buf)
    tlvs, pad_to, failed = _read_tlvs(buf, AUTH_BASE_LEN, key, tlv_integrity)
    return _reflector_packet(f, tlvs, pad_to, failed)


# ---------------------------------------------------------------------------------- reflecting


def reflect_tlvs(tlvs: tuple[Tlv, ...], integrity_failed: bool = False) -> tuple[Tlv, ...]:
    """The TLVs a Session-Reflector returns for the sender's, flags as RFC 8972 section 4 says.

    The reflector sets U, M and I itself (reserved flag bits go out as zero): U on a TLV it does
    not know, M on a malformed one, and U on every TLV after a malformed one, whose processing
    stops there (the HMAC TLV excepted: it is still checked); I on every TLV when the HMAC TLV
    check failed. A recognised TLV has no flag set: the caller fills Direct Measurement, Class
    of Service, ... with dataclasses.replace, and may set U on one it cannot honour. Raw octets
    are kept, so the reply keeps the sender's size.
    """
    out: list[Tlv] = []
    stopped = False
    for tlv in tlvs:
        if (stopped and not isinstance(tlv, Hmac)) or isinstance(tlv, UnknownTlv):
            flags = FLAG_U
        elif isinstance(tlv, MalformedTlv):
            flags, stopped = FLAG_M, True
        else:
            flags = 0
        flags |= FLAG_I if integrity_failed else 0
        out.append(tlv if tlv.flags == flags else dataclasses.replace(tlv, flags=flags))
    return tuple(out)


def make_reflection(
    sender: SenderPacket,
    *,
    seq: int,
    timestamp: int,
    error_estimate: int,
    receive_timestamp: int,
    sender_ttl: int,
    tlvs: tuple[Tlv, ...] | None = None,
    pad_to: int = 0,
) -> ReflectorPacket:
    """The reflector's answer to `sender` (stateless reflectors pass seq=sender.seq).

    tlvs defaults to reflect_tlvs(sender.tlvs); SSID is echoed (RFC 8972 section 3).
    """
    return ReflectorPacket(
        seq,
        timestamp,
        error_estimate,
        sender.ssid,
        receive_timestamp,
        sender.seq,
        sender.timestamp,
        sender.error_estimate,
        sender_ttl,
        reflect_tlvs(sender.tlvs, sender.integrity_failed) if tlvs is None else tlvs,
        pad_to,
    )
