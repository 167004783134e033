"""The 64-bit key the eBPF programs fold an SRH segment list into (bpf/monitor.c: mix() with
FLOW_KEY_SEED and FLOW_KEY_MULTIPLIER, in flow_by_sids and flow_by_sids_in_place). The node
manager installs each flow under this key; tests/test_bpf_flowkey.py runs the compiled programs
on hundreds of random SID lists to show that they find each flow under it.

The SRH lists segments in reverse travel order (RFC 8754 section 2: Segment List[0] is the last
segment), and the programs read each 16-octet SID as two little-endian 64-bit words (x86 and
arm64 loads). The key only spreads flows over the hash map: the full list is compared before a
packet is counted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

MASK64 = (1 << 64) - 1
SEED = 0x9E3779B97F4A7C15
MULTIPLIER = 0xFF51AFD7ED558CCD


def _mix(h: int, word: int) -> int:
    h = ((h ^ word) * MULTIPLIER) & MASK64
    return h ^ (h >> 32)


def srh_order(segments: Sequence[str]) -> list[bytes]:
    """Segments (travel order) as the SRH carries them: last segment first."""
    return [ipaddress.IPv6Address(s).packed for s in reversed(segments)]


def flow_key(segments: Sequence[str]) -> int:
    h = SEED ^ len(segments)
    for sid in srh_order(segments):
        h = _mix(h, int.from_bytes(sid[:8], "little"))
        h = _mix(h, int.from_bytes(sid[8:], "little"))
    return h
