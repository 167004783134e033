"""Typed errors of the STAMP codec (RFC 8762, RFC 8972).

Decoding is the boundary where untrusted bytes come in: every decode function of this package
either returns a value or raises a subclass of `StampError`, never another exception, so an engine
can catch one type around the hot path and count/drop bad probes.
"""

from __future__ import annotations


class StampError(Exception):
    """Base of every error this package raises on bad input."""


class MalformedPacket(StampError):
    """The bytes cannot be a STAMP test packet (too short, bad base layout, ...)."""


class AuthenticationFailed(StampError):
    """Authenticated mode: the HMAC of the base packet or the HMAC TLV does not verify."""


class InvalidErrorEstimate(StampError, ValueError):
    """An Error Estimate that RFC 4656 4.1.2 forbids (Multiplier 0) or that cannot be encoded."""


class InvalidTimestamp(StampError, ValueError):
    """A timestamp that cannot be converted (PTP nanoseconds >= 10^9, out-of-range time)."""
