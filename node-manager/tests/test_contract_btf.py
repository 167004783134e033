"""What bpf/monitor.c and bpf/reflector.c share with the Python that drives them, held against
the compiled objects' BTF: each map's key and value (a C struct's member names, offsets and
widths, or a scalar's width and sign), the map types and sizes Python relies on, and every enum
Python mirrors, by name and value; and bpftool.py's bpf(2) attributes against the running
kernel's BTF. A change on either side that the other does not follow fails here (`make bpf`
rebuilds the objects)."""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import bpf_harness
import pytest
from srv6pm.common import srv6
from srv6pm.node_manager.domain import model
from srv6pm.node_manager.drivers.base import PacketStats
from srv6pm.node_manager.drivers.linux import bpftool, maps
from srv6pm.node_manager.drivers.linux import kernel_reflector as kr
from srv6pm.node_manager.drivers.linux.maps import CStruct
from srv6pm.node_manager.drivers.linux.monitor import default_object
from srv6pm.node_manager.drivers.vpp import reflector as vpp_reflector
from srv6pm.proto.v1 import node_manager_pb2 as pb

MONITOR = default_object()
REFLECTOR = kr.default_object()

# linux/bpf.h enum bpf_map_type
HASH, ARRAY, PERCPU_ARRAY, LRU_HASH = 1, 2, 6, 9
INTEGER_CODES = "bBhHiIlLqQ"
QUALIFIERS = ("TYPEDEF", "VOLATILE", "CONST", "RESTRICT")


@cache
def btf(obj: Path) -> dict[int, dict[str, Any]]:
    out = subprocess.run(
        ["bpftool", "-j", "btf", "dump", "file", str(obj)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {t["id"]: t for t in json.loads(out)["types"]}


def resolve(obj: Path, type_id: int) -> dict[str, Any]:
    """The type behind typedefs and qualifiers."""
    t = btf(obj)[type_id]
    while t["kind"] in QUALIFIERS:
        t = btf(obj)[t["type_id"]]
    return t


def width(obj: Path, type_id: int) -> int:
    t = resolve(obj, type_id)
    if t["kind"] == "ARRAY":
        return int(t["nr_elems"]) * width(obj, t["type_id"])
    return 8 if t["kind"] == "PTR" else int(t["size"])


def integer(obj: Path, type_id: int) -> tuple[int, bool, int] | None:
    """(element octets, signed, elements) of an integer or enum, or an array of them."""
    t, count = resolve(obj, type_id), 1
    if t["kind"] == "ARRAY":
        t, count = resolve(obj, t["type_id"]), int(t["nr_elems"])
    if t["kind"] == "INT":
        return int(t["size"]), t["encoding"] == "SIGNED", count
    if t["kind"] == "ENUM":
        return int(t["size"]), t.get("encoding") == "SIGNED", count
    return None


def python_fields(layout: struct.Struct) -> list[tuple[str, str]]:
    """(name, format code) per C member; an unnamed struct.Struct is one scalar."""
    if isinstance(layout, CStruct):
        return list(layout.fields)
    return [("", layout.format.lstrip("<"))]


def python_integer(code: str) -> tuple[int, bool, int] | None:
    letter, count = code[-1], int(code[:-1] or 1)
    if letter not in INTEGER_CODES:
        return None  # octets ("16s") or padding ("2x"): any C type of that width
    return struct.calcsize("<" + letter), letter.islower(), count


def c_fields(obj: Path, type_id: int, named: bool) -> list[tuple[str, int, int, int]]:
    """(name, octet offset, width, type id) per member of a struct, or of the whole type as one
    member when Python does not name its parts (an in6_addr is 16 octets)."""
    t = resolve(obj, type_id)
    if not named:
        return [("", 0, width(obj, type_id), type_id)]
    assert t["kind"] == "STRUCT"
    return [
        (m["name"], m["bits_offset"] // 8, width(obj, m["type_id"]), m["type_id"])
        for m in t["members"]
    ]


def assert_layout(obj: Path, type_id: int, layout: struct.Struct) -> None:
    t = resolve(obj, type_id)
    if isinstance(layout, CStruct):
        assert (t["kind"], t["name"]) == ("STRUCT", layout.c_name)
    assert width(obj, type_id) == layout.size
    c = c_fields(obj, type_id, named=isinstance(layout, CStruct))
    python, at = [], 0
    for name, code in python_fields(layout):
        python.append((name, at, struct.calcsize("<" + code)))
        at += struct.calcsize("<" + code)
    assert [(name, offset, size) for name, offset, size, _ in c] == python
    for (name, code), (_, _, _, member) in zip(python_fields(layout), c, strict=True):
        want = python_integer(code)
        if want is not None:
            assert integer(obj, member) == want, f"{name}: {code}"


def map_definition(obj: Path, name: str) -> dict[str, Any]:
    """The members of a BTF-defined map (`type`, `max_entries`, `key`, `value`), resolved: the
    numbers, and the key's and value's type ids."""
    var = next(t for t in btf(obj).values() if t["kind"] == "VAR" and t["name"] == name)
    found: dict[str, Any] = {}
    for member in resolve(obj, var["type_id"])["members"]:
        pointee = btf(obj)[resolve(obj, member["type_id"])["type_id"]]
        if member["name"] in ("key", "value"):
            found[member["name"]] = pointee["id"]
        else:  # __uint(name, n) is int (*name)[n]
            found[member["name"]] = int(pointee["nr_elems"])
    return found


U8, U32, U64 = struct.Struct("<B"), struct.Struct("<I"), struct.Struct("<Q")

MAPS = [
    # object, map, its type, the key and value Python packs and reads
    (MONITOR, maps.FLOWS, HASH, maps.FLOW_KEY, maps.FLOW_VALUE),
    (MONITOR, maps.FLOWMON, ARRAY, maps.INDEX, maps.FLOWMON_ENTRY),
    (MONITOR, maps.COUNTERS, PERCPU_ARRAY, maps.INDEX, maps.COUNTER),
    (MONITOR, maps.STATS, PERCPU_ARRAY, maps.INDEX, maps.STAT),
    (MONITOR, maps.CONFIG, ARRAY, maps.INDEX, maps.CONFIG_VALUE),
    (REFLECTOR, kr.CONFIG, ARRAY, kr.INDEX, kr.CONFIG_VALUE),
    (REFLECTOR, kr.DECAP, HASH, kr.SID, kr.PRESENT),
    (REFLECTOR, kr.SEQUENCES, LRU_HASH, kr.SESSION_KEY, kr.SEQUENCE),
    (REFLECTOR, kr.STATS, PERCPU_ARRAY, kr.INDEX, kr.STAT),
    (REFLECTOR, kr.BLOCKS, HASH, kr.SSID_KEY, kr.BLOCK_COUNTS),
    (REFLECTOR, kr.PATHS, HASH, kr.SESSION_KEY, kr.RETURN_PATH),
]


@pytest.mark.parametrize(("obj", "name", "kind", "key", "value"), MAPS, ids=[m[1] for m in MAPS])
def test_python_packs_each_maps_key_and_value_as_the_c_lays_them_out(obj, name, kind, key, value):
    definition = map_definition(obj, name)
    assert definition["type"] == kind
    assert_layout(obj, definition["key"], key)
    assert_layout(obj, definition["value"], value)


def object_maps(obj: Path) -> set[str]:
    maps_section = next(
        t for t in btf(obj).values() if t["kind"] == "DATASEC" and t["name"] == ".maps"
    )
    return {btf(obj)[v["type_id"]]["name"] for v in maps_section["vars"]}


def test_python_reuses_every_map_of_the_objects_on_a_restart():
    assert object_maps(MONITOR) == set(maps.ALL_MAPS)
    assert object_maps(REFLECTOR) == {*kr.ALL_MAPS, "srv6pm_reflector_scratch"}  # per packet


def test_every_map_python_reads_or_writes_is_checked_above():
    checked = {(obj, name) for obj, name, *_ in MAPS}
    assert {(MONITOR, m) for m in maps.ALL_MAPS if m != maps.CLOCK} <= checked  # clock: C only
    assert {(REFLECTOR, m) for m in kr.ALL_MAPS} <= checked


def member_type(obj: Path, layout: CStruct, field: str) -> dict[str, Any]:
    t = next(t for t in btf(obj).values() if t["kind"] == "STRUCT" and t["name"] == layout.c_name)
    return resolve(obj, next(m for m in t["members"] if m["name"] == field)["type_id"])


@pytest.mark.parametrize(
    ("layout", "field", "c_enum"),
    [
        (maps.FLOW_VALUE, "role", "role"),
        (maps.FLOWMON_ENTRY, "role", "role"),
        (maps.CONFIG_VALUE, "mode", "marking_mode"),
    ],
)
def test_fields_python_fills_from_an_enum_are_that_enum_in_the_c(layout, field, c_enum):
    t = member_type(MONITOR, layout, field)
    assert (t["kind"], t["name"]) == ("ENUM", c_enum)


def c_enum(obj: Path, name: str) -> dict[str, int]:
    t = next(t for t in btf(obj).values() if t["kind"] == "ENUM" and t["name"] == name)
    return {v["name"]: int(v["val"]) for v in t["values"]}


ENUMS = [
    # object, C enum, its enumerators' prefix, the Python enum, the C's count enumerator
    (MONITOR, "reason", "REASON_", maps.Reason, "NREASONS"),
    (MONITOR, "role", "ROLE_", srv6.Role, None),
    (MONITOR, "marking_mode", "MODE_", maps.Mode, None),
    (REFLECTOR, "reflector_stat", "STAT_", kr.Stat, "STAT_MAX"),
]


@pytest.mark.parametrize(
    ("obj", "name", "prefix", "python", "count"), ENUMS, ids=[e[1] for e in ENUMS]
)
def test_c_and_python_enums_have_the_same_names_and_values(obj, name, prefix, python, count):
    values = c_enum(obj, name)
    if count is not None:
        assert values.pop(count) == len(python)  # the arrays they index have that many entries
    assert all(n.startswith(prefix) for n in values)
    assert {n.removeprefix(prefix): v for n, v in values.items()} == {
        m.name: m.value for m in python
    }


def test_the_statistics_the_c_counts_reach_the_api_under_their_names():
    """read_stats() and KernelReflector.stats() name each index as the Python enum does; the
    proto's KernelReflectorStats holds the eBPF reflector's and the VPP reflector's."""
    reasons = {r.name.lower() for r in maps.Reason}
    assert reasons == {f.name for f in dataclasses.fields(PacketStats)}
    assert reasons == {f.name for f in pb.PacketStats.DESCRIPTOR.fields}
    stats = {s.name.lower() for s in kr.Stat}
    assert stats | set(vpp_reflector.STATS) == {
        f.name for f in pb.KernelReflectorStats.DESCRIPTOR.fields
    }


DOMAIN_MODES = list(dict.fromkeys([srv6.MarkingMode, model.MarkingMode]))  # one, once moved


@pytest.mark.parametrize("domain", DOMAIN_MODES, ids=lambda e: e.__module__)
def test_every_marking_mode_has_a_value_in_the_c(domain: type[enum.Enum]):
    """monitor.py writes config.mode as maps.Mode[<the domain's mode>.name]."""
    assert {m.name for m in domain} == {m.name for m in maps.Mode}


@pytest.mark.parametrize(
    ("obj", "name", "entries"),
    [
        (MONITOR, maps.FLOWS, maps.MAX_FLOWS),
        (MONITOR, maps.COUNTERS, 2 * maps.MAX_FLOWS),  # two colours per slot
        (MONITOR, maps.FLOWMON, maps.FLOWMON_IDS),
        (MONITOR, maps.FLOWMON, model.MAX_FLOWMON_ID + 1),
        (MONITOR, maps.STATS, len(maps.Reason)),
        (REFLECTOR, kr.STATS, len(kr.Stat)),
    ],
)
def test_map_sizes_python_relies_on(obj, name, entries):
    assert map_definition(obj, name)["max_entries"] == entries


def test_the_harness_writes_the_skb_fields_where_the_programs_read_them():
    skb = next(
        t for t in btf(MONITOR).values() if t["kind"] == "STRUCT" and t["name"] == "__sk_buff"
    )
    offsets = {m["name"]: m["bits_offset"] // 8 for m in skb["members"]}
    assert skb["size"] == bpf_harness.SKB_SIZE
    assert offsets["gso_segs"] == bpf_harness.SKB_GSO_SEGS
    assert offsets["gso_size"] == bpf_harness.SKB_GSO_SIZE
    assert offsets["ifindex"] == bpf_harness.SKB_IFINDEX


VMLINUX = Path("/sys/kernel/btf/vmlinux")


def bpf_attr_members(c_struct: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(octet offset, width) by name of one of union bpf_attr's structs, its anonymous unions'
    members in place."""
    found: dict[str, tuple[int, int]] = {}
    for m in c_struct["members"]:
        t = resolve(VMLINUX, m["type_id"])
        at = m["bits_offset"] // 8
        if m["name"] == "(anon)" and t["kind"] == "UNION":
            for inner in t["members"]:
                found[inner["name"]] = (at, width(VMLINUX, inner["type_id"]))
        else:
            found[m["name"]] = (at, width(VMLINUX, m["type_id"]))
    return found


@pytest.mark.parametrize(
    "attr",
    [bpftool._ObjGetAttr, bpftool._ElemAttr, bpftool._BatchAttr, bpftool._TestRunAttr],
    ids=lambda a: a.__name__,
)
def test_bpftools_syscall_attributes_are_the_running_kernels(attr):
    """bpftool.py's bpf(2) calls describe union bpf_attr's structs with ctypes: each field where
    the kernel's BTF has the member of that name (a "pad" is the C's implicit padding)."""
    union = next(
        t for t in btf(VMLINUX).values() if t["kind"] == "UNION" and t["name"] == "bpf_attr"
    )
    python = {
        name: (getattr(attr, name).offset, getattr(attr, name).size)
        for name, *_ in attr._fields_
        if name != "pad"
    }
    candidates = [bpf_attr_members(resolve(VMLINUX, m["type_id"])) for m in union["members"]]
    c = next(c for c in candidates if set(python) <= set(c))
    assert {name: c[name] for name in python} == python
