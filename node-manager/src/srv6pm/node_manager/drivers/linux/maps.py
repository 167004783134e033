"""Binary layouts of the eBPF maps' keys and values (bpf/monitor.c), and the enums they carry,
in one place.

tests/test_contract_btf.py holds these against the compiled object's BTF (each struct's field
names, offsets and widths, each map's key and value, each enum by name and value), so the two
sides cannot drift apart unnoticed.
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

FLOWMON_IDS = 1 << 20  # srv6pm_flowmon's entries: every 20-bit FlowMonID (RFC 9343)


class CStruct(struct.Struct):
    """A little-endian struct.Struct laid out as the C struct `c_name`, one (name, format code)
    per C member, named as in the C ("2Q" packs a `__u64 x[2]`, "2x" is padding)."""

    def __init__(self, c_name: str, fields: Sequence[tuple[str, str]]) -> None:
        super().__init__("<" + "".join(code for _, code in fields))
        self.c_name = c_name
        self.fields = tuple(fields)


FLOW_VALUE = CStruct(
    "flow_value",
    [
        ("slot", "I"),
        ("role", "B"),
        ("nsegs", "B"),
        ("pad", "H"),
        ("flowmon_id", "I"),
        ("pad2", "I"),
        ("segs", f"{16 * MAX_SEGMENTS}s"),
    ],
)
FLOWMON_ENTRY = CStruct("flowmon_entry", [("slot", "H"), ("role", "B"), ("pad", "B")])
COUNTER = CStruct("counter", [("packets", "Q"), ("bytes", "Q")])
CONFIG_VALUE = CStruct(
    "config",
    [
        ("period_ns", "Q"),
        ("tai_offset_ns", "Q"),
        ("generation", "I"),
        ("monitored_bit", "B"),
        ("colour_bit", "B"),
        ("mode", "B"),
        ("pad", "B"),
    ],
)
INDEX = struct.Struct("<I")  # the arrays' keys
STAT = struct.Struct("<Q")  # srv6pm_stats's values (per CPU)
ZERO_COUNTER = bytes(COUNTER.size)
NO_FLOWMON = bytes(FLOWMON_ENTRY.size)


class Mode(enum.IntEnum):
    """config.mode (enum marking_mode in monitor.c), by the marking mode's name."""

    ALTMARK = 1
    DSCP = 2


class Reason(enum.IntEnum):
    """Indexes of srv6pm_stats (enum reason in monitor.c)."""

    NOT_SRV6 = 0
    UNMARKED = 1
    NO_FLOW = 2
    PARSE_ERROR = 3
    FOREIGN_MARK = 4
    MARK_FAILED = 5
    COUNTED = 6


FLOW_KEY = struct.Struct("<Q")  # the SID list's 64-bit hash (domain.flowkey)


def flow_key(key: int) -> bytes:
    return FLOW_KEY.pack(key)


def flow_value(slot: int, role: Role, segments: Sequence[str], flowmon_id: int) -> bytes:
    sids = b"".join(srh_order(segments))
    return FLOW_VALUE.pack(slot, int(role), len(segments), 0, flowmon_id, 0, sids)


def flowmon_index(flowmon_id: int) -> bytes:
    return INDEX.pack(flowmon_id)


def flowmon_entry(slot: int, role: Role) -> bytes:
    return FLOWMON_ENTRY.pack(slot, int(role), 0)


def counter_index(slot: int, colour: int) -> bytes:
    return INDEX.pack(slot * 2 + colour)


def config_value(
    period_ns: int,
    tai_offset_ns: int,
    generation: int,
    monitored_bit: int,
    colour_bit: int,
    mode: Mode,
) -> bytes:
    return CONFIG_VALUE.pack(
        period_ns, tai_offset_ns, generation & 0xFFFFFFFF, monitored_bit, colour_bit, int(mode), 0
    )


def parse_config(raw: bytes) -> tuple[int, int, int, int, int, int]:
    period, offset, generation, monitored, colour, mode, _ = CONFIG_VALUE.unpack(
        raw[: CONFIG_VALUE.size]
    )
    return period, offset, generation, monitored, colour, mode
