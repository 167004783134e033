"""srv6pm.twamp: STAMP (RFC 8762), its TLVs (RFC 8972, RFC 9503) and TWAMP-Light (RFC 5357
Appendix I) test packets, and the loss/delay maths built on them.

Modules: `codec` (fast struct codec for the hot path), `tlv` (TLV dataclasses), `timestamps`
(NTP/PTP <-> Unix ns), `error_estimate` (RFC 4656 4.1.2), `maths` (loss, delay, jitter),
`errors`; `scapy_tlv` and `scapy_packets` hold the declarative scapy layers (importing them loads
scapy, so nothing here imports them).
"""

from .codec import (
    ReflectorPacket,
    SenderPacket,
    decode_reflector,
    decode_sender,
    encode_reflector,
    encode_sender,
    make_reflection,
    reflect_tlvs,
)
from .error_estimate import ErrorEstimate
from .errors import AuthenticationFailed, MalformedPacket, StampError

__version__ = "0.1.0"

__all__ = [
    "AuthenticationFailed",
    "ErrorEstimate",
    "MalformedPacket",
    "ReflectorPacket",
    "SenderPacket",
    "StampError",
    "decode_reflector",
    "decode_sender",
    "encode_reflector",
    "encode_sender",
    "make_reflection",
    "reflect_tlvs",
]
