"""STAMP timestamps <-> Unix nanoseconds (RFC 8762 section 4.2.1, RFC 5905 section 6, RFC 8877).

STAMP carries 64-bit timestamps in one of two formats, chosen by the Z bit of the Error Estimate
(RFC 8186 section 2.3, reused by RFC 8762):

* Z = 0, NTP 64-bit (RFC 5905 section 6): 32-bit seconds since 1900-01-01 00:00 UTC and a 32-bit
  binary fraction of a second. The seconds wrap in 2036 (era 1); we resolve the era with the RFC
  4330 section 3 rule (most significant bit set: 1968-2036, era 0; clear: 2036-2104, era 1).
* Z = 1, PTPv2 truncated (IEEE 1588-2008, as RFC 8877 section 4.3 names it): the low 32 bits of
  the PTP seconds and 32-bit nanoseconds, since the PTP epoch 1970-01-01 00:00:00 TAI. PTP counts
  TAI, not UTC: converting from Unix (UTC) time adds the TAI-UTC offset, 37 s since 2017-01-01.
  A caller whose clock already reads TAI (CLOCK_TAI, `bpf_ktime_get_tai_ns`) passes offset 0.

Unix time here is integer nanoseconds (as `time.time_ns()`), never float: a float cannot hold a
2020s timestamp to the nanosecond.
"""

from __future__ import annotations

from .error_estimate import ErrorEstimate
from .errors import InvalidTimestamp

__all__ = [
    "NTP_UNIX_OFFSET_S",
    "TAI_UTC_OFFSET_S",
    "ErrorEstimate",  # re-exported: the Z bit of an Error Estimate picks the timestamp format
    "from_unix_ns",
    "ntp_from_unix_ns",
    "ptp_from_unix_ns",
    "to_unix_ns",
    "unix_ns_from_ntp",
    "unix_ns_from_ptp",
]

NTP_UNIX_OFFSET_S = 2_208_988_800
"""Seconds from the NTP epoch (1900-01-01) to the Unix epoch (1970-01-01)."""

TAI_UTC_OFFSET_S = 37
"""TAI - UTC in seconds, in force since 2017-01-01 (IERS Bulletin C); no leap second since."""

_NS = 1_000_000_000
_FRAC = 1 << 32
_U32 = 0xFFFF_FFFF
_ERA_S = 1 << 32


def ntp_from_unix_ns(unix_ns: int) -> int:
    """Raw 64-bit NTP timestamp for a Unix time in ns (1968 .. 2104, era 0 or 1)."""
    ntp_s, ns = divmod(unix_ns + NTP_UNIX_OFFSET_S * _NS, _NS)
    if not 0x8000_0000 <= ntp_s < 0x8000_0000 + _ERA_S:
        raise InvalidTimestamp(f"Unix time {unix_ns} ns is outside the NTP eras 0-1 window")
    # Round to nearest: 2^-32 s (~0.23 ns) is finer than 1 ns, so ns round-trip.
    # ns <= 999_999_999 keeps the rounded fraction below 2^32, so it never carries into seconds.
    frac = (ns * _FRAC + _NS // 2) // _NS
    return ((ntp_s & _U32) << 32) | frac


def unix_ns_from_ntp(raw: int) -> int:
    """Unix time in ns of a raw 64-bit NTP timestamp, era chosen by the RFC 4330 rule."""
    if not 0 <= raw <= 0xFFFF_FFFF_FFFF_FFFF:
        raise InvalidTimestamp(f"NTP timestamp {raw:#x} is not 64-bit")
    seconds, frac = raw >> 32, raw & _U32
    if not seconds & 0x8000_0000:
        seconds += _ERA_S  # era 1: 2036-02-07 .. 2104
    # Rounding may give exactly 10^9 ns for a fraction just under 1 s: adding it carries correctly.
    return (seconds - NTP_UNIX_OFFSET_S) * _NS + (frac * _NS + _FRAC // 2) // _FRAC


def ptp_from_unix_ns(unix_ns: int, tai_offset_s: int = TAI_UTC_OFFSET_S) -> int:
    """Raw 64-bit PTPv2 truncated timestamp (32-bit s, 32-bit ns, TAI) for a Unix time in ns."""
    seconds, ns = divmod(unix_ns + tai_offset_s * _NS, _NS)
    if not 0 <= seconds <= _U32:
        raise InvalidTimestamp(f"Unix time {unix_ns} ns does not fit 32-bit PTP seconds")
    return (seconds << 32) | ns


def unix_ns_from_ptp(raw: int, tai_offset_s: int = TAI_UTC_OFFSET_S) -> int:
    """Unix time in ns of a raw PTPv2 truncated timestamp (seconds valid until 2106)."""
    if not 0 <= raw <= 0xFFFF_FFFF_FFFF_FFFF:
        raise InvalidTimestamp(f"PTP timestamp {raw:#x} is not 64-bit")
    seconds, ns = raw >> 32, raw & _U32
    if ns >= _NS:
        raise InvalidTimestamp(f"PTP nanoseconds field {ns} is >= 10^9")
    return (seconds - tai_offset_s) * _NS + ns


def to_unix_ns(raw: int, ptp: bool, tai_offset_s: int = TAI_UTC_OFFSET_S) -> int:
    """Unix ns of a raw STAMP timestamp; `ptp`: Z bit of the Error Estimate that goes with it."""
    return unix_ns_from_ptp(raw, tai_offset_s) if ptp else unix_ns_from_ntp(raw)


def from_unix_ns(unix_ns: int, ptp: bool, tai_offset_s: int = TAI_UTC_OFFSET_S) -> int:
    """Raw STAMP timestamp of a Unix time in ns, in the format the Z bit `ptp` selects."""
    return ptp_from_unix_ns(unix_ns, tai_offset_s) if ptp else ntp_from_unix_ns(unix_ns)
