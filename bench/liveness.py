#!/usr/bin/env python3
"""Liveness per segment list at scale, in the diamond lab (r1 - r2 - r4, r1 - r3 - r4): N
liveness sessions on r1, half probing the segment list through r2 and half the one through r3,
each at 100 ms intervals (down after 3 missed replies), answered by r4's reflector.

Measured, for each N: the probes per second r1's node manager sustains (sent over the window,
against N x 10 expected) and the CPU it takes; then the detection time of a cut of r3 - r4 (the
first DOWN event of each session through r3, its probe's T1 minus the cut), median and worst,
against N x interval = 300 ms. ``--quick`` runs N = 4 and 16 with 2 cuts."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/liveness.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import statistics
import time
from collections.abc import Sequence

from srv6pm.lab import diamond, drops, scenario
from srv6pm.lab.errors import LabError
from srv6pm.lab.lab import Lab
from srv6pm.lab.topology import Topology
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

from bench.harness.meters import process_cpu_ns
from bench.harness.report import markdown_table
from bench.harness.run import RESULTS, Run, execute, progress
from bench.harness.topology import lab_running

INTERVAL_MS = diamond.PROBE_INTERVAL_MS
DOWN_AFTER = diamond.DOWN_AFTER
PATHS = (diamond.VIA_R2.segments, diamond.VIA_R3.segments)


def states(lab: Lab, sessions: int) -> dict[str, pb.NodeState]:
    """The diamond scenario's routers with `sessions` liveness sessions on r1 instead of its
    own (delay and liveness only), alternating between the two paths."""
    wanted = diamond.states(lab)
    del wanted["r1"].sessions[:]
    del wanted["r4"].reflector.sessions[:]
    for ssid in range(1, sessions + 1):
        wanted["r1"].sessions.append(
            pb.SenderSession(
                name=f"live-{ssid}",
                ssid=ssid,
                reflector_address=diamond.R4_REFLECTOR_ADDRESS,
                source_address=diamond.R1_PROBE_ADDRESS,
                direct_segments=PATHS[ssid % 2],
                return_segments=diamond.RETURN_SIDS,
                delay_interval_ms=INTERVAL_MS,
                liveness=pb.Liveness(enabled=True, down_after=DOWN_AFTER, up_after=1),
            )
        )
        wanted["r4"].reflector.sessions.append(
            pb.ReflectorSession(
                ssid=ssid,
                forward_flow=diamond.VIA_R2.flow,
                reverse_flow=diamond.RETURN,
                return_paths=[
                    pb.ReturnPath(
                        sender_address=diamond.R1_PROBE_ADDRESS, segments=diamond.RETURN_SIDS
                    )
                ],
            )
        )
    return wanted


def sent(lab: Lab) -> int:
    reply = scenario.stub(lab, "r1").ReadResults(pb.ReadResultsRequest())
    return sum(s.sent for s in reply.senders)


def down_events(lab: Lab, since_ns: int) -> dict[str, int]:
    """The first DOWN of each session at or after `since_ns`: its time."""
    reply = scenario.stub(lab, "r1").ReadResults(pb.ReadResultsRequest(limit=100_000))
    first: dict[str, int] = {}
    for e in reply.liveness:
        if e.state == records_pb2.LIVENESS_STATE_DOWN and e.at_unix_ns >= since_ns:
            first.setdefault(e.session, e.at_unix_ns)
    return first


def measure_one(lab: Lab, sessions: int, window_s: float, cuts: int) -> dict[str, object]:
    scenario.apply_states(lab, states(lab, sessions))
    time.sleep(1.5)  # every session up
    pid = lab.node_managers.pid("r1")
    assert pid is not None
    sent0, cpu0, t0 = sent(lab), process_cpu_ns(pid), time.monotonic()
    time.sleep(window_s)
    sent1, cpu1, t1 = sent(lab), process_cpu_ns(pid), time.monotonic()
    rate = (sent1 - sent0) / (t1 - t0)
    through_r3 = sessions // 2
    detections: list[float] = []
    for _ in range(cuts):
        cut_ns = time.time_ns()
        lab.drop("r3", "r4", drops.MAX_COUNT)
        deadline = time.monotonic() + 10
        found: dict[str, int] = {}
        while len(found) < through_r3 and time.monotonic() < deadline:
            time.sleep(0.1)
            found = down_events(lab, cut_ns)
        lab.clear_drops("r3")
        if len(found) < through_r3:
            raise LabError(f"{through_r3 - len(found)} sessions through r3 never went down")
        detections += [(at - cut_ns) / 1e6 for at in found.values()]
        time.sleep(2.0)  # every session up again
    return {
        "sessions": sessions,
        "probes_per_s": round(rate, 1),
        "expected_per_s": sessions * 1000 / INTERVAL_MS,
        "cpu_per_probe_us": round((cpu1 - cpu0) / 1e3 / max(1, sent1 - sent0), 1),
        "cpu_share": round((cpu1 - cpu0) / 1e9 / (t1 - t0), 3),
        "detection_ms_median": round(statistics.median(detections), 1),
        "detection_ms_worst": round(max(detections), 1),
        "detections": len(detections),
    }


def measure(args: argparse.Namespace) -> dict[str, object]:
    topology = Topology.load("diamond").model_copy(update={"period_s": 2.0})
    lab = Lab(topology, prefix=args.prefix)
    rows = []
    with lab_running(lab):
        diamond.host_addresses(lab)
        for n in args.sessions:
            progress(f"{n} liveness sessions")
            rows.append(measure_one(lab, n, args.window, args.cuts))
    table = markdown_table(
        ["sessions", "probes/s (expected)", "CPU per probe", "CPU", "detection median / worst"],
        [
            [
                str(r["sessions"]),
                f"{r['probes_per_s']} ({r['expected_per_s']:.0f})",
                f"{r['cpu_per_probe_us']} us",
                f"{float(str(r['cpu_share'])) * 100:.0f} %",
                f"{r['detection_ms_median']} / {r['detection_ms_worst']} ms "
                f"(N x interval = {DOWN_AFTER * INTERVAL_MS} ms)",
            ]
            for r in rows
        ],
    )
    return {"rows": rows, "table": table}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, nargs="+", default=[4, 16, 64, 256])
    parser.add_argument("--window", type=float, default=10.0, help="rate window, seconds")
    parser.add_argument("--cuts", type=int, default=5)
    parser.add_argument("--prefix", default="blive", help="lab namespaces (default: blive)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--quick", action="store_true", help="N = 4 and 16, 3 s, 2 cuts")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.window, args.cuts = [4, 16], 3.0, 2
    return execute(
        Run("liveness", "bench/liveness.py"),
        lambda _run: measure(args),
        out=args.out,
        needs_root="namespaces",
        errors=(LabError,),
    )


if __name__ == "__main__":
    sys.exit(main())
