"""Binary layouts of the eBPF maps' keys and values (bpf/monitor.c), in one place."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ...domain.flowkey import srh_order
from ...domain.model import MAX_SEGMENTS, Role

FLOWS = "srv6pm_flows"
COUNTERS = "srv6pm_counters"
CONFIG = "srv6pm_config"
CLOCK = "srv6pm_clock"
ALL_MAPS = (FLOWS, COUNTERS, CONFIG, CLOCK)
MAX_FLOWS = 16384  # MAX_FLOWS in monitor.c

_FLOW_HEAD = struct.Struct("<IBBH")
_CONFIG = struct.Struct("<QQIBBH")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
ZERO_COUNTER = bytes(16)


def flow_key(key: int) -> bytes:
    return _U64.pack(key)


def flow_value(slot: int, role: Role, segments: Sequence[str]) -> bytes:
    sids = b"".join(srh_order(segments)).ljust(16 * MAX_SEGMENTS, b"\0")
    return _FLOW_HEAD.pack(slot, int(role), len(segments), 0) + sids


def counter_index(slot: int, colour: int) -> bytes:
    return _U32.pack(slot * 2 + colour)


def config_value(
    period_ns: int, tai_offset_ns: int, generation: int, monitored_bit: int, colour_bit: int
) -> bytes:
    return _CONFIG.pack(
        period_ns, tai_offset_ns, generation & 0xFFFFFFFF, monitored_bit, colour_bit, 0
    )


def parse_config(raw: bytes) -> tuple[int, int, int, int, int]:
    period, offset, generation, monitored, colour, _ = _CONFIG.unpack(raw[: _CONFIG.size])
    return period, offset, generation, monitored, colour
