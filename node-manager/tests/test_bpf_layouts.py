"""maps.py describes the eBPF maps' keys and values a second time, for Python: these tests read
the compiled object's BTF, so the two cannot drift apart unnoticed."""

from __future__ import annotations

import json
import struct
import subprocess
from functools import cache
from typing import Any

import pytest
from srv6pm.node_manager.drivers.linux import maps
from srv6pm.node_manager.drivers.linux.monitor import default_object


@cache
def btf() -> dict[int, dict[str, Any]]:
    out = subprocess.run(
        ["bpftool", "-j", "btf", "dump", "file", str(default_object())],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {t["id"]: t for t in json.loads(out)["types"]}


def struct_named(name: str) -> dict[str, Any]:
    return next(t for t in btf().values() if t["kind"] == "STRUCT" and t.get("name") == name)


def layout(name: str) -> list[tuple[str, int]]:
    """(member, octet offset) of a C struct."""
    return [(m["name"], m["bits_offset"] // 8) for m in struct_named(name)["members"]]


def fields(fmt: struct.Struct) -> list[int]:
    """Octet offset of each field of a little-endian struct format ("16s" is one field)."""
    result, at = [], 0
    codes = fmt.format.lstrip("<")
    i = 0
    while i < len(codes):
        j = i
        while codes[j].isdigit():
            j += 1
        code = codes[i : j + 1]
        result.append(at)
        at += struct.calcsize("<" + code)
        i = j + 1
    return result


@pytest.mark.parametrize(
    ("c_struct", "python"),
    [
        ("flow_value", maps.FLOW_VALUE),
        ("flowmon_entry", maps.FLOWMON_ENTRY),
        ("counter", maps.COUNTER),
        ("config", maps.CONFIG_VALUE),
    ],
)
def test_python_layouts_match_the_c_structs(c_struct, python):
    assert struct_named(c_struct)["size"] == python.size
    assert [offset for _, offset in layout(c_struct)] == fields(python)


def max_entries(map_name: str) -> int:
    var = next(t for t in btf().values() if t["kind"] == "VAR" and t["name"] == map_name)
    definition = btf()[var["type_id"]]
    member = next(m for m in definition["members"] if m["name"] == "max_entries")
    pointer = btf()[member["type_id"]]
    return int(btf()[pointer["type_id"]]["nr_elems"])


def test_map_sizes_match():
    assert max_entries(maps.FLOWS) == maps.MAX_FLOWS
    assert max_entries(maps.COUNTERS) == 2 * maps.MAX_FLOWS
    assert max_entries(maps.FLOWMON) == 1 << 20
    assert max_entries(maps.STATS) == len(maps.Reason)
