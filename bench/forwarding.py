#!/usr/bin/env python3
"""Forwarding cost of per-flow eBPF monitoring on an SRv6 router, in the ingress and transit roles.

Builds gen - r1 - sink (bench/forwarding.yaml) with the lab tool and configures r1 through its
node manager's gRPC API only. For each role and each group size N (default 1, 16, 1000 and
10000) r1 holds N SR policies (ingress role: r1 encapsulates) or one End SID (transit role: r1
forwards packets an upstream head-end encapsulated and marked), and the generator cycles its
frames over N destinations or N flows. Within a group, plain forwarding (no monitored flow),
an empty tc program on the hook (the hook's own cost, at N = 1) and N monitored flows in
ALTMARK and in DSCP mode are alternated round-robin; for each, the script offers a fixed load
and measures how much of r1's core it takes. Then a short separate pass reads the programs' own
cost from the kernel's bpf_stats. Every sample also checks, through ReadCounters, that the
programs counted every forwarded packet.

Run as root: ``python3 -m bench.forwarding`` or ``python3 bench/forwarding.py`` (``--help`` for
the knobs, ``--quick`` for a smoke run; progress on stderr, the table on stdout). Method:
docs/BENCHMARKS.md. Raw data: bench/results/forwarding-<YYYYMMDD-HHMMSS>.json (the run id).
The parts (frames, configurations, r1, one measurement, the summary) are in bench/fwd/.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/forwarding.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NotRequired, TypedDict

import grpc
from srv6pm.lab import Lab, LabError, Topology

from bench.fwd.common import FRAME_BYTES, GEN_CORE, MAX_SIZE, MODES, ROLES, SIZES, TARGET
from bench.fwd.groups import Group, configs
from bench.fwd.measure import Cost, Generator, Meters, Sample, Timing, main_pass, stats_pass
from bench.fwd.r1 import R1, prepare_network
from bench.fwd.summary import Row, summarise, table, warnings
from bench.harness import generators, provenance
from bench.harness.bpf import NetRxProbe
from bench.harness.run import RESULTS, BenchError, Run, execute, progress
from bench.harness.topology import lab_running, single_instance

HERE = Path(__file__).resolve().parent
TOPOLOGY = HERE / "forwarding.yaml"
PREFIX = "bzfwd"  # lab namespaces, nft table, probe pins (--prefix)
BASE_PORT = 52000
LOCK = generators.BIN / "forwarding.lock"


class GroupInfo(TypedDict):
    """A (role, N) group: its configurations and how long it took."""

    role: str
    n: int
    configs: list[dict[str, object]]  # Config
    frames_build_s: float
    group_apply_s: float
    wall_s: float


class ForwardingResult(TypedDict):
    settings: dict[str, object]  # the arguments, the frame sizes and the target
    groups: list[GroupInfo]
    samples: list[dict[str, object]]  # Sample
    summary: list[Row]
    ebpf_cost: list[Cost]
    table: str
    warnings: list[str]
    environment: NotRequired[dict[str, object]]  # at the end, and the load at the start


def environment() -> dict[str, object]:
    obj = provenance.ROOT / "node-manager/src/srv6pm/node_manager/bpf/monitor.o"
    return {
        **provenance.machine(),
        "monitor_o_sha256": provenance.sha256(obj),
        **provenance.net_core_sysctls("netdev_max_backlog"),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--rate", type=int, default=250_000, help="offered load, packets/s (default: %(default)s)"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="measured rounds per group (after one warm-up) (default: %(default)s)",
    )
    p.add_argument(
        "--window", type=float, default=2.0, help="measurement window, s (default: %(default)s)"
    )
    p.add_argument(
        "--warmup", type=float, default=0.5, help="load before the window, s (default: %(default)s)"
    )
    p.add_argument(
        "--settle",
        type=float,
        default=0.3,
        help="pause after each ApplyState, then until r1's node manager idles (10 s at most),"
        " s (default: %(default)s)",
    )
    p.add_argument(
        "--stats-rounds",
        type=int,
        default=3,
        help="rounds of the bpf_stats pass per group, 0: none (default: %(default)s)",
    )
    p.add_argument(
        "--roles",
        nargs="+",
        choices=ROLES,
        default=list(ROLES),
        help="roles of r1 (default: %(default)s)",
    )
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(SIZES),
        help="N: policies / monitored flows per group (default: %(default)s)",
    )
    p.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="marking modes (default: %(default)s)",
    )
    p.add_argument(
        "--empty-hook-at",
        type=int,
        nargs="*",
        default=[1],
        help="sizes N that also get the empty-program configuration (default: %(default)s)",
    )
    p.add_argument(
        "--steering-rules",
        type=int,
        default=0,
        help="ingress groups also get plain forwarding with this many STAMP probe steering "
        "rules on r1, without and with the node manager's guard rule (default: none)",
    )
    p.add_argument(
        "--out", type=Path, default=RESULTS, help="results directory (default: %(default)s)"
    )
    p.add_argument(
        "--prefix",
        default=PREFIX,
        help="lab namespaces, nft table and probe pins are named after it (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (about 1 min): ingress N=1 ALTMARK only, 1 round, 0.5 s windows,"
        " 1 bpf_stats round; figures meaningless",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.roles, args.sizes, args.modes = ["ingress"], [1], ["altmark"]
        args.rounds, args.window, args.warmup, args.stats_rounds = 1, 0.5, 0.2, 1
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if any(not 1 <= n <= MAX_SIZE for n in args.sizes):
        p.error(f"--sizes must be 1..{MAX_SIZE}")
    if args.window <= 0 or args.warmup < 0 or args.settle < 0 or args.stats_rounds < 0:
        p.error("--window must be positive; --warmup, --settle and --stats-rounds not negative")
    args.roles = list(dict.fromkeys(args.roles))
    args.sizes = list(dict.fromkeys(args.sizes))
    args.modes = list(dict.fromkeys(args.modes))
    return args


def estimate_s(args: argparse.Namespace) -> float:
    """Rough wall time of a run: the measurements, and ApplyState times as measured here
    (10,000 policies make every ingress ApplyState take ~5-15 s: ~10 s on average)."""
    per = args.settle + 0.3 + args.warmup + args.window + 0.2 + 0.2 + 0.3
    total = 0.0
    for role in args.roles:
        for n in args.sizes:
            cfgs = configs(role, n, args.modes, args.empty_hook_at, args.steering_rules)
            applies = len(cfgs) * (args.rounds + 1) + sum(c.monitored for c in cfgs) * max(
                args.stats_rounds, 0
            )
            total += applies * (per + n / 10000 * (10.0 if role == "ingress" else 1.5))
    return total


def bench(
    args: argparse.Namespace, lab: Lab, pktgen: Path, probe_obj: Path, empty_obj: Path
) -> ForwardingResult:
    """Every group, then the summary, the table and the warnings."""
    timing = Timing(args.rate, args.warmup, args.window, args.settle)
    samples: list[Sample] = []
    costs: list[Cost] = []
    groups: list[Group] = []
    group_info: list[GroupInfo] = []
    with contextlib.ExitStack() as cleanup:
        r1 = R1(lab, empty_obj)
        # closed before lab.down() stops the node manager: a server that closes a connection first
        # leaves its port in TIME_WAIT, and the next `lab.up()` would find it taken
        cleanup.callback(r1.close)
        gen_mac, r1_mac = prepare_network(lab, args.prefix)
        gen = Generator(lab, pktgen)
        probe = NetRxProbe(probe_obj, Path("/sys/fs/bpf") / f"{args.prefix}-probe")
        cleanup.callback(probe.close)
        meters = Meters(lab, probe, r1.pid)
        cleanup.callback(meters.close)
        frames = tempfile.TemporaryDirectory(prefix=f"{args.prefix}-")
        frames_dir = Path(cleanup.enter_context(frames))
        r1_gen_if, r1_sink_if = lab.interface("r1", "gen"), lab.interface("r1", "sink")
        started = time.monotonic()
        for role in args.roles:
            for n in args.sizes:
                cfgs = configs(role, n, args.modes, args.empty_hook_at, args.steering_rules)
                group = Group(role, n, cfgs, r1_gen_if, r1_sink_if)
                t0 = time.monotonic()
                group.write_frames(frames_dir, gen_mac, r1_mac)
                frames_s = time.monotonic() - t0
                # policies or the End SID once per group; configurations then change only the
                # flows, the mode and the empty program
                apply_s = r1.apply(group.state(cfgs[0]))
                progress(
                    f"== {group.label}: {', '.join(c.name for c in cfgs)}; frames built in "
                    f"{frames_s:.1f} s, group state applied in {apply_s:.1f} s "
                    f"(run time so far {time.monotonic() - started:.0f} s)"
                )
                samples += main_pass(r1, gen, meters, timing, group, args.rounds)
                costs += stats_pass(lab, r1, gen, timing, group, args.stats_rounds)
                groups.append(group)
                group_info.append(
                    {
                        "role": role,
                        "n": n,
                        "configs": [asdict(c) for c in cfgs],
                        "frames_build_s": frames_s,
                        "group_apply_s": apply_s,
                        "wall_s": time.monotonic() - t0,
                    }
                )
    rows = summarise(groups, samples, costs)
    settings = {**vars(args), "out": str(args.out), "frame_bytes": FRAME_BYTES, "target": TARGET}
    return {
        "settings": settings,
        "groups": group_info,
        "samples": [asdict(s) for s in samples],
        "summary": rows,
        "ebpf_cost": costs,
        "table": table(rows),
        "warnings": warnings(rows, args.rate),
    }


def run_lab(args: argparse.Namespace) -> ForwardingResult:
    """Up, measure, down (always, even on failure or a signal)."""
    pktgen = generators.pktgen()
    probe_obj, empty_obj = generators.bpf_object("softirq"), generators.bpf_object("empty")
    lab = Lab(Topology.load(TOPOLOGY), prefix=args.prefix, base_port=BASE_PORT)
    with single_instance(LOCK, "forwarding benchmark"), lab_running(lab, BASE_PORT):
        return bench(args, lab, pktgen, probe_obj, empty_obj)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run = Run("forwarding", "bench/forwarding.py")

    def measure(_run: Run) -> ForwardingResult:
        progress(
            f"forwarding.py {run.run_id}: roles {args.roles}, N {args.sizes}, modes {args.modes},"
            f" {args.rounds} rounds + warm-up, {args.stats_rounds} bpf_stats rounds; about "
            f"{estimate_s(args) / 60:.0f} min plus ApplyState time"
        )
        loadavg_start = environment()["loadavg"]
        try:
            result = run_lab(args)
        except grpc.RpcError as e:
            raise BenchError(f"gRPC call to r1 failed: {e}") from e
        result["environment"] = {**environment(), "loadavg_start": loadavg_start}
        return result

    # This process and everything it starts (node manager, bpftool, ip, nft) stay off the
    # router core, so the router core's busy time is r1's forwarding.
    return execute(
        run,
        measure,
        out=args.out,
        needs_root="namespaces, eBPF",
        pin=GEN_CORE,
        errors=(LabError,),
    )


if __name__ == "__main__":
    sys.exit(main())
