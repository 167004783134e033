"""Binary layouts of the eBPF maps' keys and values (bpf/monitor.c), in one place.

tests/test_bpf_layouts.py checks these against the compiled object's BTF, so the two sides
cannot drift apart unnoticed.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence

from srv6pm.common.srv6 import Role

from ...domain.flowkey import srh_order
from ...domain.model import MAX_SEGMENTS

# Pinned maps live in a directory per layout: a program whose maps changed shape starts with
# new maps (and its flows are installed again) instead of failing to reuse the old ones.
LAYOUT = 2

FLOWS = "srv6pm_flows"
FLOWMON = "srv6pm_flowmon"
COUNTERS = "srv6pm_counters"
STATS = "srv6pm_stats"
CONFIG = "srv6pm_config"
CLOCK = "srv6pm_clock"
ALL_MAPS = (FLOWS, FLOWMON, COUNTERS, STATS, CONFIG, CLOCK)
MAX_FLOWS = 16384  # MAX_FLOWS in monitor.c

FLOW_VALUE = struct.Struct(f"<IBBHII{16 * MAX_SEGMENTS}s")
FLOWMON_ENTRY = struct.Struct("<HBB")
COUNTER = struct.Struct("<QQ")
CONFIG_VALUE = struct.Struct("<QQIBBBB")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
ZERO_COUNTER = bytes(COUNTER.size)
NO_FLOWMON = bytes(FLOWMON_ENTRY.size)


class Reason(enum.IntEnum):
    """Indexes of srv6pm_stats (enum reason in monitor.c)."""

    NOT_SRV6 = 0
    UNMARKED = 1
    NO_FLOW = 2
    PARSE_ERROR = 3
    FOREIGN_MARK = 4
    MARK_FAILED = 5
    COUNTED = 6


FLOW_KEY = _U64  # the SID list's 64-bit hash (domain.flowkey)


def flow_key(key: int) -> bytes:
    return FLOW_KEY.pack(key)


def flow_value(slot: int, role: Role, segments: Sequence[str], flowmon_id: int) -> bytes:
    sids = b"".join(srh_order(segments))
    return FLOW_VALUE.pack(slot, int(role), len(segments), 0, flowmon_id, 0, sids)


def flowmon_index(flowmon_id: int) -> bytes:
    return _U32.pack(flowmon_id)


def flowmon_entry(slot: int, role: Role) -> bytes:
    return FLOWMON_ENTRY.pack(slot, int(role), 0)


def counter_index(slot: int, colour: int) -> bytes:
    return _U32.pack(slot * 2 + colour)


def config_value(
    period_ns: int,
    tai_offset_ns: int,
    generation: int,
    monitored_bit: int,
    colour_bit: int,
    mode: int,
) -> bytes:
    return CONFIG_VALUE.pack(
        period_ns, tai_offset_ns, generation & 0xFFFFFFFF, monitored_bit, colour_bit, mode, 0
    )


def parse_config(raw: bytes) -> tuple[int, int, int, int, int, int]:
    period, offset, generation, monitored, colour, mode, _ = CONFIG_VALUE.unpack(
        raw[: CONFIG_VALUE.size]
    )
    return period, offset, generation, monitored, colour, mode
