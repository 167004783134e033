"""Error Estimate field (RFC 4656 section 4.1.2, Z bit from RFC 8186 section 2.3, RFC 8762 4.2.1).

    0                   1
    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
   |S|Z|   Scale   |   Multiplier  |
   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

S: the clock is synchronised to UTC by an external source. Z: 0 = NTP 64-bit timestamps,
1 = PTPv2 truncated. Error = Multiplier * 2^(Scale - 32) seconds; a Multiplier of 0 is invalid
(RFC 4656 4.1.2). The codec carries the raw 16 bits untouched (a reflector echoes the sender's as
is); this class validates them when someone wants to read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InvalidErrorEstimate

S_BIT = 0x8000
Z_BIT = 0x4000


@dataclass(frozen=True, slots=True)
class ErrorEstimate:
    """A valid Error Estimate, kept as its 16-bit wire value `raw` (what the codec carries).

    ErrorEstimate(raw) raises InvalidErrorEstimate for Multiplier 0 or a value that is not 16-bit;
    build one with `from_seconds` or `from_fields`.
    """

    raw: int

    def __post_init__(self) -> None:
        if not 0 <= self.raw <= 0xFFFF:
            raise InvalidErrorEstimate(f"Error Estimate {self.raw!r} is not 16-bit")
        if not self.raw & 0xFF:
            raise InvalidErrorEstimate(f"Error Estimate {self.raw:#06x}: Multiplier 0 is invalid")

    @classmethod
    def from_fields(
        cls, synchronised: bool, ptp: bool, scale: int, multiplier: int
    ) -> ErrorEstimate:
        """From S, Z, Scale (0..63) and Multiplier (1..255)."""
        if not 0 <= scale <= 63:
            raise InvalidErrorEstimate(f"Scale {scale} is not 6-bit")
        if not 1 <= multiplier <= 255:
            raise InvalidErrorEstimate(f"Multiplier {multiplier} is not 1..255 (0 is invalid)")
        return cls((S_BIT if synchronised else 0) | (Z_BIT if ptp else 0) | scale << 8 | multiplier)

    @classmethod
    def from_seconds(
        cls, error_s: float, synchronised: bool = False, ptp: bool = False
    ) -> ErrorEstimate:
        """The tightest encodable estimate that is >= error_s (never understate an error)."""
        if not math.isfinite(error_s) or error_s < 0:
            raise InvalidErrorEstimate(f"error {error_s!r} s is not a finite non-negative number")
        # For a Scale, the smallest Multiplier covering error_s is ceil(error_s * 2^(32 - Scale));
        # the smallest Scale whose Multiplier fits 8 bits overshoots least (by < 2^(Scale - 32)).
        for scale in range(64):
            multiplier = max(1, math.ceil(math.ldexp(error_s, 32 - scale)))
            if multiplier <= 255:
                return cls.from_fields(synchronised, ptp, scale, multiplier)
        raise InvalidErrorEstimate(f"error {error_s!r} s exceeds 255 * 2^31 s")

    @property
    def synchronised(self) -> bool:
        """S: the clock is synchronised to UTC by an external source."""
        return bool(self.raw & S_BIT)

    @property
    def ptp(self) -> bool:
        """Z: timestamps are PTPv2 truncated (False: NTP 64-bit)."""
        return bool(self.raw & Z_BIT)

    @property
    def scale(self) -> int:
        return (self.raw >> 8) & 0x3F

    @property
    def multiplier(self) -> int:
        return self.raw & 0xFF

    @property
    def seconds(self) -> float:
        """The error in seconds: Multiplier * 2^(Scale - 32)."""
        return math.ldexp(self.multiplier, self.scale - 32)


def is_synchronised(raw: int) -> bool:
    """S bit of a raw Error Estimate, without validating the rest (hot path)."""
    return bool(raw & S_BIT)


def is_ptp(raw: int) -> bool:
    """Z bit of a raw Error Estimate: True when the timestamps next to it are PTPv2 truncated."""
    return bool(raw & Z_BIT)


def clock_error_estimate(synchronised: bool) -> int:
    """Our Error Estimate: S as told; the error a synchronised software clock typically keeps
    (1 ms), or 1 s for a free-running one."""
    return ErrorEstimate.from_seconds(1e-3 if synchronised else 1.0, synchronised).raw
