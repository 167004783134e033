#!/usr/bin/env python3
"""Run time of each tc program per packet, by BPF_PROG_TEST_RUN on the compiled object.

For the ingress (srv6pm_mark) and the transit (srv6pm_count) program, in ALTMARK and DSCP mode,
with 1, 1,000 and 10,000 flows in the maps, on the packet shapes Linux head-ends build (IPv6 +
SRH of 2 SIDs + inner IPv6/UDP; transit packets marked as the ingress marks them). Each figure is
the kernel's own measurement of the program (BPF_PROG_TEST_RUN duration), the median of rounds
of single runs on fresh packets (a marking program changes the packet it runs on, so it cannot
be repeated on the same skb). Complements bench/forwarding.py: stable, cheap, and it isolates
the program from the rest of the forwarding path.

Run as root: ``python bench/programs.py`` (a few seconds). Results: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "node-manager" / "tests"))

from bpf_harness import Programs  # noqa: E402
from scapy.layers.inet import UDP  # noqa: E402
from scapy.layers.inet6 import (  # noqa: E402
    HBHOptUnknown,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrSegmentRouting,
)
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from srv6pm.node_manager.domain.model import (  # noqa: E402
    Marking,
    MarkingMode,
    MonitoredFlow,
    Role,
)
from srv6pm.node_manager.drivers.linux.bpftool import obj_get, prog_test_run  # noqa: E402

PERIOD_NS = 10**18
FLOW_COUNTS = (1, 1000, 10000)


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


def measure(programs: Programs, program: str, packets: list[bytes], rounds: int) -> float:
    """Median ns per run over `rounds` single runs cycling through `packets`."""
    prog = next((programs.root / "bpf" / "progs").iterdir()) / program
    fd = obj_get(prog)
    try:
        runs = [prog_test_run(fd, packets[r % len(packets)])[2] for r in range(rounds)]
    finally:
        os.close(fd)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    root = Path("/run") / f"srv6pm-bench-{secrets.token_hex(3)}" / "fs"
    programs = Programs(root, PERIOD_NS)
    rows = []
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
                    ns = measure(programs, program, packets, args.rounds)
                    counted = programs.stats().counted - before.counted
                    rows.append((program, mode.name, n, ns, counted == args.rounds))
                    print(f"{program} {mode.name} {n} flows: {ns:.0f} ns", file=sys.stderr)
    finally:
        programs.close()
    print("| program | mode | flows | ns per run (median) | every run counted |")
    print("|---|---|---|---|---|")
    for program, mode, n, ns, all_counted in rows:
        print(f"| {program} | {mode} | {n} | {ns:.0f} | {'yes' if all_counted else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
