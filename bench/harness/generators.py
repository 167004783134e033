"""The C generators and eBPF objects of bench/, compiled into bench/bin when older than their
source: pktgen (AF_PACKET frames at a paced rate), stampgen (STAMP probes, replies counted),
softirq.bpf.o (NET_RX time per CPU), empty.bpf.o (an empty tc program)."""

from __future__ import annotations

import platform
from pathlib import Path

from bench.harness.run import run

HERE = Path(__file__).resolve().parents[1]
BIN = HERE / "bin"
GCC = ["gcc", "-O2", "-Wall", "-Wextra"]
CLANG_BPF = [
    "clang",
    "-O2",
    "-g",
    "-Wall",
    "-Werror",
    "-target",
    "bpf",
    f"-I/usr/include/{platform.machine()}-linux-gnu",
    "-c",
]


def build(source: Path, target: Path, argv: list[str]) -> Path:
    """Compile ``source`` into ``target`` with ``argv`` unless ``target`` is newer."""
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    run([*argv, str(source), "-o", str(target)])
    return target


def pktgen() -> Path:
    """bench/bin/pktgen (bench/pktgen.c)."""
    return build(HERE / "pktgen.c", BIN / "pktgen", GCC)


def stampgen() -> Path:
    """bench/bin/stampgen (bench/stampgen.c)."""
    return build(HERE / "stampgen.c", BIN / "stampgen", GCC)


def bpf_object(name: str) -> Path:
    """bench/bin/<name>.bpf.o from bench/<name>.bpf.c."""
    return build(HERE / f"{name}.bpf.c", BIN / f"{name}.bpf.o", CLANG_BPF)
