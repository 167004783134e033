"""eBPF objects through bpftool, libbpf's own command-line front end, plus a few bpf(2) calls.

Why bpftool: Debian ships it with libbpf, it is maintained in the kernel tree, it loads ELF
objects with BTF, pins programs and maps and reuses pinned maps, and it applies thousands of map
updates in one `batch` call (10,000 updates in ~0.2 s here). Two things it cannot do well:
- hand a program's file descriptor to another process, which netlink's tc attach needs:
  `obj_get` opens a pinned object (BPF_OBJ_GET);
- read counters fast: its JSON for 10,000 per-CPU entries takes ~2 s to produce and parse here,
  more than a short block allows. `read_array` reads the whole counter array with one
  BPF_MAP_LOOKUP_BATCH instead (milliseconds).
- read a map without CAP_SYS_ADMIN: its `map lookup` and `map dump` format values with the map's
  BTF, which only CAP_SYS_ADMIN may open (BPF_BTF_GET_FD_BY_ID), and fail without it ("failed
  to get btf"). `lookup` and `entries` read raw octets with CAP_BPF alone, so the node manager
  runs with NET_ADMIN, BPF and PERFMON only (docs/DEPLOY.md).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ...domain.errors import FailedPrecondition

BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_GET_NEXT_KEY = 4
BPF_OBJ_GET = 7
BPF_PROG_TEST_RUN = 10
BPF_MAP_LOOKUP_BATCH = 24
SYS_BPF = {"x86_64": 321, "aarch64": 280}
BPF_FS_MAGIC = 0xCAFE4A11


class BpftoolError(FailedPrecondition):
    pass


class _ObjGetAttr(ctypes.Structure):
    _fields_ = (
        ("pathname", ctypes.c_uint64),
        ("bpf_fd", ctypes.c_uint32),
        ("file_flags", ctypes.c_uint32),
        ("path_fd", ctypes.c_int32),
    )


class _ElemAttr(ctypes.Structure):
    _fields_ = (
        ("map_fd", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("value", ctypes.c_uint64),  # next_key for BPF_MAP_GET_NEXT_KEY
        ("flags", ctypes.c_uint64),
    )


class _BatchAttr(ctypes.Structure):
    _fields_ = (
        ("in_batch", ctypes.c_uint64),
        ("out_batch", ctypes.c_uint64),
        ("keys", ctypes.c_uint64),
        ("values", ctypes.c_uint64),
        ("count", ctypes.c_uint32),
        ("map_fd", ctypes.c_uint32),
        ("elem_flags", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    )


def bpf_syscall(cmd: int, attr: ctypes.Structure) -> int:
    """bpf(2): its result, or -errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    ret = int(
        libc.syscall(SYS_BPF[platform.machine()], cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    )
    return ret if ret >= 0 else -ctypes.get_errno()


class _TestRunAttr(ctypes.Structure):
    _fields_ = (
        ("prog_fd", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("data_in", ctypes.c_uint64),
        ("data_out", ctypes.c_uint64),
        ("repeat", ctypes.c_uint32),
        ("duration", ctypes.c_uint32),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_uint64),
        ("ctx_out", ctypes.c_uint64),
    )


def prog_test_run(
    prog_fd: int, packet: bytes, ctx: bytes = b"", repeat: int = 1
) -> tuple[int, bytes, int]:
    """BPF_PROG_TEST_RUN: the program's verdict, the packet after it, and the kernel's mean run
    time in ns over `repeat` runs. `ctx` is a struct __sk_buff for tc programs (GSO fields,
    ifindex). For the programs' unit tests and benchmark."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    data_out = ctypes.create_string_buffer(len(packet) + 512)
    ctx_in = ctypes.create_string_buffer(ctx, len(ctx))
    attr = _TestRunAttr(
        prog_fd=prog_fd,
        data_size_in=len(packet),
        data_size_out=len(data_out),
        data_in=ctypes.addressof(data_in),
        data_out=ctypes.addressof(data_out),
        repeat=repeat,
        ctx_size_in=len(ctx),
        ctx_in=ctypes.addressof(ctx_in) if ctx else 0,
    )
    ret = bpf_syscall(BPF_PROG_TEST_RUN, attr)
    if ret < 0:
        raise BpftoolError(f"BPF_PROG_TEST_RUN failed: {os.strerror(-ret)}")
    return attr.retval, data_out.raw[: attr.data_size_out], attr.duration


def obj_get(path: Path) -> int:
    """A new file descriptor for the program or map pinned at `path` (close it when done)."""
    name = ctypes.create_string_buffer(os.fsencode(path))
    fd = bpf_syscall(BPF_OBJ_GET, _ObjGetAttr(pathname=ctypes.addressof(name)))
    if fd < 0:
        raise BpftoolError(f"cannot open pinned eBPF object {path}: {os.strerror(-fd)}")
    return fd


def _lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    key_buf = ctypes.create_string_buffer(key, len(key))
    value = ctypes.create_string_buffer(value_size)
    attr = _ElemAttr(map_fd=fd, key=ctypes.addressof(key_buf), value=ctypes.addressof(value))
    ret = bpf_syscall(BPF_MAP_LOOKUP_ELEM, attr)
    if ret == -errno.ENOENT:
        return None
    if ret < 0:
        raise BpftoolError(f"map lookup failed: {os.strerror(-ret)}")
    return value.raw


def lookup(path: Path, key: bytes, value_size: int) -> bytes | None:
    """The value of `key` in the (not per-CPU) map pinned at `path`; None if absent."""
    fd = obj_get(path)
    try:
        return _lookup(fd, key, value_size)
    finally:
        os.close(fd)


def update(path: Path, key: bytes, value: bytes) -> None:
    """Set `key` to `value` in the (not per-CPU) map pinned at `path`."""
    fd = obj_get(path)
    try:
        key_buf = ctypes.create_string_buffer(key, len(key))
        value_buf = ctypes.create_string_buffer(value, len(value))
        attr = _ElemAttr(
            map_fd=fd, key=ctypes.addressof(key_buf), value=ctypes.addressof(value_buf)
        )
        ret = bpf_syscall(BPF_MAP_UPDATE_ELEM, attr)
        if ret < 0:
            raise BpftoolError(f"cannot update {path}: {os.strerror(-ret)}")
    finally:
        os.close(fd)


def entries(path: Path, key_size: int, value_size: int) -> dict[bytes, bytes]:
    """Every key and value of the (not per-CPU) hash map pinned at `path`."""
    fd = obj_get(path)
    try:
        found: dict[bytes, bytes] = {}
        key: bytes | None = None
        while True:
            key_buf = ctypes.create_string_buffer(key or b"", key_size)
            next_key = ctypes.create_string_buffer(key_size)
            attr = _ElemAttr(
                map_fd=fd,
                key=ctypes.addressof(key_buf) if key is not None else 0,
                value=ctypes.addressof(next_key),
            )
            ret = bpf_syscall(BPF_MAP_GET_NEXT_KEY, attr)
            if ret == -errno.ENOENT:
                return found
            if ret < 0:
                raise BpftoolError(f"cannot list {path}: {os.strerror(-ret)}")
            key = next_key.raw
            value = _lookup(fd, key, value_size)
            if value is not None:  # deleted meanwhile
                found[key] = value
    finally:
        os.close(fd)


def possible_cpus() -> int:
    """Per-CPU maps hold one value per possible CPU (/sys/devices/system/cpu/possible)."""
    spec = Path("/sys/devices/system/cpu/possible").read_text().strip()
    return max(int(part.split("-")[-1]) for part in spec.split(",")) + 1


def read_array(path: Path, entries: int, value_size: int, per_cpu: bool = False) -> bytes:
    """Every value of a pinned array: entries x value_size octets, or for a per-CPU array
    entries x possible CPUs x value_size (rounded up to 8) octets."""
    fd = obj_get(path)
    try:
        stride = (value_size + 7) // 8 * 8 if per_cpu else value_size
        keys = (ctypes.c_uint32 * entries)()
        values = ctypes.create_string_buffer(entries * (possible_cpus() if per_cpu else 1) * stride)
        out_batch = ctypes.c_uint32()
        attr = _BatchAttr(
            out_batch=ctypes.addressof(out_batch),
            keys=ctypes.addressof(keys),
            values=ctypes.addressof(values),
            count=entries,
            map_fd=fd,
        )
        ret = bpf_syscall(BPF_MAP_LOOKUP_BATCH, attr)
        # ENOENT: the whole map was read in this one call
        if (ret < 0 and ret != -errno.ENOENT) or attr.count != entries:
            raise BpftoolError(f"cannot read {path}: {os.strerror(-ret)} ({attr.count} read)")
        return values.raw
    finally:
        os.close(fd)


def hexbytes(data: bytes) -> list[str]:
    """Octets as bpftool's `hex` arguments ("0a", "ff", ...)."""
    return data.hex(" ").split()


class Bpftool:
    def __init__(self, binary: str = "bpftool") -> None:
        self._binary = binary

    def run(self, *args: str) -> Any:
        proc = subprocess.run(
            [self._binary, "-j", *args], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise BpftoolError(f"bpftool {' '.join(args[:3])}: {' / '.join(detail[-3:])}")
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def batch(self, commands: Iterable[Sequence[str]]) -> list[Any]:
        """Run many commands in one process; returns each command's JSON output."""
        with tempfile.NamedTemporaryFile("w", suffix=".bpftool") as f:
            n = 0
            for command in commands:
                f.write(" ".join(command) + "\n")
                n += 1
            if n == 0:
                return []
            f.flush()
            out = self.run("batch", "file", f.name)
        results = [item.get("output") for item in out or []]
        errors = [item for item in out or [] if "error" in item]
        if errors:
            raise BpftoolError(f"bpftool batch: {errors[0]['error']}")
        return results


def is_bpffs(path: Path) -> bool:
    """Whether `path` lies on a mounted bpf filesystem."""
    path = path.resolve()
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    best = ""
    fstype = ""
    for line in mounts:
        parts = line.split()
        mount_point = parts[1]
        if (str(path) + "/").startswith(mount_point.rstrip("/") + "/") and len(mount_point) >= len(
            best
        ):
            best, fstype = mount_point, parts[2]
    return fstype == "bpf"


def ensure_bpffs(path: Path) -> None:
    """Mount a bpffs at /sys/fs/bpf if `path` is not on one yet (a fresh machine has none)."""
    if is_bpffs(path):
        path.mkdir(parents=True, exist_ok=True)
        return
    root = Path("/sys/fs/bpf")
    if not str(path.resolve()).startswith(str(root) + "/"):
        raise FailedPrecondition(f"BPF pin directory {path} is not on a bpf filesystem")
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "bpf", "bpf", str(root)], check=True, capture_output=True)
    path.mkdir(parents=True, exist_ok=True)
