#!/usr/bin/env python3
"""Forwarding cost of srv6pm's VPP plugin on one worker, in the ingress and transit roles,
measured inside VPP: no kernel in the path.

For each role and group size N (default 1, 16, 1000 and 10000) a fresh VPP (main thread only,
pinned to the measured core) holds N SR policies steering N destinations (ingress: VPP
encapsulates, H.Encaps) or one End SID (transit: packets an upstream head-end encapsulated and
marked), and N flows of srv6pm's plugin. VPP's packet generator replays N frames, one per
policy or flow, in order, from pg0's ethernet-input: a fixed number of packets per sample, as
fast as the thread can; they leave through pg1 (a static neighbour, so ip6-rewrite and the
ip6-output arc run). Plain forwarding (the plugin's node on no arc) and the plugin's node
hooked (ingress: srv6pm-mark on pg1's ip6-output, ALTMARK and DSCP modes; transit: srv6pm-count
on pg0's ip6-unicast, each mode with its own frames and plain baseline) are alternated round by
round. A sample's cost is VPP's own clocks per packet (the stats segment's per-node clocks, as
VPP reports its performance), summed over every node of the path but the generator. Every
sample also checks that every packet was forwarded and, through the plugin's counters, counted
once for its flow. A sample during which VPP's thread was preempted, or its core's time stolen,
is taken again.

Run as root: ``python3 -m bench.vpp_forwarding`` (``--help`` for the knobs, ``--quick`` for a
smoke run). Method and results: docs/BENCHMARKS.md. Raw data:
bench/results/vpp-forwarding-<YYYYMMDD-HHMMSS>.json (the run id).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/vpp_forwarding.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TypedDict

from srv6pm.lab.errors import LabError
from srv6pm.lab.vpp import srv6pm_plugin_dir

from bench.fwd.common import MAX_SIZE, MODES, ROLES, SIZES
from bench.harness import generators, provenance, trials
from bench.harness.pinning import LOAD_CORE, MEASURED_CORE
from bench.harness.provenance import load_average
from bench.harness.run import RESULTS, Run, execute, progress
from bench.harness.topology import single_instance
from bench.vppfwd.measure import Config, Group, Sample
from bench.vppfwd.router import Router, check_vpp
from bench.vppfwd.summary import TARGET, Row, summarise, table, warnings

LOCK = generators.BIN / "vpp-forwarding.lock"
PREFIX = "vb"  # namespaces: <prefix><random>


class GroupInfo(TypedDict):
    role: str
    n: int
    configs: list[dict[str, object]]
    setup_s: float
    wall_s: float


class VppForwardingResult(TypedDict):
    settings: dict[str, object]
    groups: list[GroupInfo]
    samples: list[dict[str, object]]
    summary: list[Row]
    table: str
    warnings: list[str]
    environment: dict[str, object]


def environment(plugin_dir: Path | None) -> dict[str, object]:
    plugin = (plugin_dir or srv6pm_plugin_dir()) / "srv6pm_plugin.so"
    source = provenance.ROOT / "node-manager/vpp-plugin/srv6pm/node.c"
    return {
        **provenance.machine(),
        "plugin": str(plugin),
        "plugin_sha256": provenance.sha256(plugin),
        "node_c": provenance.source_revision(source),
        "vpp": Path("/opt/vpp/bin/vpp").resolve().as_posix(),
        "loadavg": load_average(),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--packets",
        type=int,
        default=2_000_000,
        help="packets per sample (default: %(default)s)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=10,
        help="measured rounds per group (after one warm-up) (default: %(default)s)",
    )
    p.add_argument(
        "--retries",
        type=int,
        default=3,
        help="times a sample is taken again when VPP's thread was preempted (default: %(default)s)",
    )
    p.add_argument("--roles", nargs="+", choices=ROLES, default=list(ROLES))
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="N per group")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument(
        "--empty-hook-at",
        type=int,
        nargs="*",
        default=[1],
        help="sizes N that also get the plugin's node hooked but not configured (default: "
        "%(default)s)",
    )
    p.add_argument(
        "--no-realtime",
        dest="realtime",
        action="store_false",
        help="leave VPP's main thread SCHED_OTHER (default: SCHED_FIFO priority 1)",
    )
    p.add_argument(
        "--plugin-dir",
        type=Path,
        help="load srv6pm_plugin.so and srv6pm.api.json from this directory (another build, to"
        " compare two; node_c in the results then says nothing about it) (default: the node"
        " manager package's, `make vpp-plugin`)",
    )
    p.add_argument(
        "--out", type=Path, default=RESULTS, help="results directory (default: %(default)s)"
    )
    p.add_argument("--prefix", default=PREFIX, help="namespace prefix (default: %(default)s)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (under a minute): N = 1 and 16, 1 round, 256,000 packets; figures "
        "meaningless",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.rounds, args.packets = [1, 16], 1, 256_000
    if args.rounds < 1 or args.retries < 0:
        p.error("--rounds must be at least 1, --retries not negative")
    if any(not 1 <= n <= MAX_SIZE for n in args.sizes):
        p.error(f"--sizes must be 1..{MAX_SIZE}")
    if args.packets < max(args.sizes):
        p.error("--packets must be at least the largest N")
    args.roles = list(dict.fromkeys(args.roles))
    args.sizes = list(dict.fromkeys(args.sizes))
    args.modes = list(dict.fromkeys(args.modes))
    return args


def run_group(
    args: argparse.Namespace, role: str, n: int, tmp: Path
) -> tuple[GroupInfo, list[Config], list[Sample]]:
    """A fresh VPP, the group's set-up, its rounds; VPP always stopped."""
    t0 = time.monotonic()
    router = Router(tmp, MEASURED_CORE, args.prefix, args.plugin_dir)
    try:
        if args.realtime:
            router.realtime()
        empty = n in args.empty_hook_at
        group = Group(router, role, n, args.modes, empty, args.packets, tmp)
        setup_s = time.monotonic() - t0
        progress(
            f"== {role} N={n}: {', '.join(c.name for c in group.configs)}; VPP {router.netns} "
            f"set up in {setup_s:.1f} s"
        )

        def one(cfg: Config, rnd: int) -> Sample:
            s = group.measure(cfg, rnd, MEASURED_CORE, args.retries)
            progress(
                f"  {role} N={n} round {rnd} {cfg.name:14s} {s.cpp:7.1f} clocks/pkt "
                f"(plugin {s.plugin_cpp:5.1f}) forwarded {s.forwarded} "
                f"counted {'ok' if s.counting_ok else 'NO'} attempts {s.attempts}"
                f"{' disturbed' if s.disturbed else ''}"
            )
            return s

        samples = trials.alternate(group.configs, args.rounds, one)
    finally:
        router.close()
    info: GroupInfo = {
        "role": role,
        "n": n,
        "configs": [asdict(c) for c in group.configs],
        "setup_s": setup_s,
        "wall_s": time.monotonic() - t0,
    }
    return info, group.configs, samples


def bench(args: argparse.Namespace) -> VppForwardingResult:
    check_vpp(args.plugin_dir)
    infos: list[GroupInfo] = []
    groups: list[tuple[str, int, Sequence[Config]]] = []
    samples: list[Sample] = []
    loadavg_start = load_average()
    with (
        single_instance(LOCK, "VPP forwarding benchmark"),
        tempfile.TemporaryDirectory(prefix=f"{args.prefix}-") as tmp,
    ):
        for role in args.roles:
            for n in args.sizes:
                info, cfgs, got = run_group(args, role, n, Path(tmp))
                infos.append(info)
                groups.append((role, n, cfgs))
                samples += got
    rows = summarise(groups, samples)
    settings = {**vars(args), "out": str(args.out), "target": TARGET}
    settings["plugin_dir"] = str(args.plugin_dir or srv6pm_plugin_dir())
    return {
        "settings": settings,
        "groups": infos,
        "samples": [asdict(s) for s in samples],
        "summary": rows,
        "table": table(rows),
        "warnings": warnings(rows),
        "environment": {**environment(args.plugin_dir), "loadavg_start": loadavg_start},
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run = Run("vpp-forwarding", "bench/vpp_forwarding.py")
    progress(
        f"vpp_forwarding.py {run.run_id}: roles {args.roles}, N {args.sizes}, modes "
        f"{args.modes}, {args.rounds} rounds + warm-up of {args.packets} packets"
    )
    # This process, vppctl and the API clients stay off VPP's core.
    return execute(
        run,
        lambda _run: bench(args),
        out=args.out,
        needs_root="network namespaces, VPP",
        pin=LOAD_CORE,
        errors=(LabError,),
    )


if __name__ == "__main__":
    sys.exit(main())
