#!/usr/bin/env python3
"""Run time of each tc program per packet, by BPF_PROG_TEST_RUN on the compiled object.

For the ingress (srv6pm_mark) and the transit (srv6pm_count) program, in ALTMARK and DSCP mode,
with 1, 1,000 and 10,000 flows in the maps, on the packet shapes Linux head-ends build (IPv6 +
SRH of 2 SIDs + inner IPv6/UDP; transit packets marked as the ingress marks them). Each figure is
the kernel's own measurement of the program (BPF_PROG_TEST_RUN duration), the median of rounds
of single runs on fresh packets (a marking program changes the packet it runs on, so it cannot
be repeated on the same skb). Complements bench/forwarding.py: stable, cheap, and it isolates
the program from the rest of the forwarding path.

Run as root: ``python3 -m bench.programs`` or ``python3 bench/programs.py`` (about 15 s;
``--quick``: 2,000 rounds). Results: docs/BENCHMARKS.md; raw data:
bench/results/programs-<YYYYMMDD-HHMMSS>.json (the run id).
"""

# ruff: noqa: E402 (the path set-up below comes before the imports it enables)
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # python3 bench/programs.py
    sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "node-manager" / "tests"))  # bpf_harness

import argparse
import os
import secrets
import statistics
from collections.abc import Sequence
from typing import TypedDict

from bpf_harness import Programs
from scapy.layers.inet import UDP
from scapy.layers.inet6 import (
    HBHOptUnknown,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrSegmentRouting,
)
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from srv6pm.common.srv6 import MarkingMode, Role
from srv6pm.node_manager.domain.model import Marking, MonitoredFlow
from srv6pm.node_manager.drivers.linux.bpftool import obj_get, prog_test_run

from bench.harness import provenance
from bench.harness.report import markdown_table
from bench.harness.run import RESULTS, Run, execute, progress

PERIOD_NS = 10**18
FLOW_COUNTS = (1, 1000, 10000)


class Row(TypedDict):
    """One program, mode and flow count."""

    program: str
    mode: str
    flows: int
    ns_per_run_median: float
    every_run_counted: bool  # the program counted the packet on each run


class Settings(TypedDict):
    rounds: int
    period_ns: int


class ProgramsResult(TypedDict):
    settings: Settings
    rows: list[Row]
    table: str
    environment: dict[str, object]  # the machine and the object measured


def sids(i: int) -> tuple[str, str]:
    return ("fc00:0:2::e", f"fc00:0:3:{i:x}::d6")


def packet(i: int, mode: MarkingMode | None) -> bytes:
    """Flow i's packet: as the ingress sees it (mode None) or as it marked it."""
    outer = IPv6(src="fcf0:12::1", dst="fc00:0:2::e")
    mark = []
    if mode is MarkingMode.ALTMARK:
        data = ((i + 1) << 12 | 1 << 11).to_bytes(4, "big")
        mark = [IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x12, optlen=4, optdata=data)])]
    elif mode is MarkingMode.DSCP:
        outer.tc = 0x0C
    layers = [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02"), outer, *mark]
    layers.append(IPv6ExtHdrSegmentRouting(addresses=list(reversed(sids(i))), segleft=1))
    layers += [IPv6(src="fd00:1::2", dst="fd00:2::2"), UDP(sport=1, dport=9), Raw(bytes(16))]
    frame = layers[0]
    for layer in layers[1:]:
        frame = frame / layer
    return bytes(frame)


def measure_program(programs: Programs, program: str, packets: list[bytes], rounds: int) -> float:
    """Median ns per run over `rounds` single runs cycling through `packets`."""
    prog = next((programs.root / "bpf" / "progs").iterdir()) / program
    fd = obj_get(prog)
    try:
        runs = [prog_test_run(fd, packets[r % len(packets)])[2] for r in range(rounds)]
    finally:
        os.close(fd)
    return statistics.median(runs)


def measure(rounds: int) -> list[Row]:
    """Every program, mode and flow count; ns per run (median of ``rounds`` single runs)."""
    root = Path("/run") / f"srv6pm-bench-{secrets.token_hex(3)}" / "fs"
    programs = Programs(root, PERIOD_NS)
    rows: list[Row] = []
    try:
        for mode in MarkingMode:
            for n in FLOW_COUNTS:
                for role, program in (
                    (Role.INGRESS, "srv6pm_mark"),
                    (Role.TRANSIT, "srv6pm_count"),
                ):
                    flows = [MonitoredFlow(f"f{i}", sids(i), role, ("x",), i + 1) for i in range(n)]
                    programs.configure(Marking(mode=mode), flows)
                    shape = None if role is Role.INGRESS else mode
                    # traffic spread over up to 256 of the flows, as a router sees it
                    packets = [packet(i * n // 256, shape) for i in range(min(n, 256))]
                    before = programs.stats()
                    ns = measure_program(programs, program, packets, rounds)
                    counted = programs.stats().counted - before.counted
                    rows.append(
                        {
                            "program": program,
                            "mode": mode.name,
                            "flows": n,
                            "ns_per_run_median": ns,
                            "every_run_counted": counted == rounds,
                        }
                    )
                    progress(f"{program} {mode.name} {n} flows: {ns:.0f} ns")
    finally:
        programs.close()
    return rows


def table(rows: Sequence[Row]) -> str:
    return markdown_table(
        ["program", "mode", "flows", "ns per run (median)", "every run counted"],
        [
            [
                r["program"],
                r["mode"],
                str(r["flows"]),
                f"{r['ns_per_run_median']:.0f}",
                "yes" if r["every_run_counted"] else "NO",
            ]
            for r in rows
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2,000 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = 2000

    def body(_run: Run) -> ProgramsResult:
        rows = measure(args.rounds)
        obj = provenance.ROOT / "node-manager/src/srv6pm/node_manager/bpf/monitor.o"
        return {
            "settings": {"rounds": args.rounds, "period_ns": PERIOD_NS},
            "rows": rows,
            "table": table(rows),
            "environment": {**provenance.machine(), "monitor_o_sha256": provenance.sha256(obj)},
        }

    return execute(
        Run("programs", "bench/programs.py"), body, out=args.out, needs_root="eBPF, bpffs"
    )


if __name__ == "__main__":
    sys.exit(main())
