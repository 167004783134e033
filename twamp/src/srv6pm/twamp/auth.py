"""HMAC for STAMP authenticated mode (RFC 8762 section 4.4; HMAC TLV, RFC 8972 section 4.8).

HMAC-SHA-256 truncated to its first 128 bits (16 octets). The key is provisioned out of band
(RFC 8762 leaves key management to the operator); we take it as raw bytes.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache

from .tlv import HMAC_LEN


@lru_cache(maxsize=64)
def _keyed(key: bytes) -> hmac.HMAC:
    # Keying HMAC hashes the padded key twice; copying a keyed object skips that per packet.
    return hmac.new(key, digestmod=hashlib.sha256)


def digest(key: bytes, *parts: bytes) -> bytes:
    """Truncated HMAC-SHA-256 of the concatenated parts."""
    mac = _keyed(key).copy()
    for part in parts:
        mac.update(part)
    return mac.digest()[:HMAC_LEN]


def verify(key: bytes, received: bytes, *parts: bytes) -> bool:
    """Constant-time check of a received truncated HMAC against the parts it should cover."""
    return hmac.compare_digest(digest(key, *parts), received)
