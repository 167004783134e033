#!/usr/bin/env python3
"""STAMP Session-Reflector throughput on one core: NDR (no loss) and the rate at 0.5 % loss.

Two namespaces, bs-gen and bs-refl (``--prefix`` bs), joined by a veth pair. In bs-refl, our
reflector (``srv6pm.twamp`` Reflector, stateless, unauthenticated, on one asyncio loop:
bench/reflectors.py ``--serve``) runs pinned to core 1, and RPS steers the receive work of its
veth to core 1 too.
In bs-gen, bench/stampgen.c (pinned to core 0, RPS of its veth on core 0) sends 44-octet STAMP
test packets at a paced rate and counts the replies on its socket.

Each trial offers one rate for --trial seconds. A search steps the rate up a ladder, then
bisects between the last loss-free step and the first lossy one (NDR, RFC 2544) and between
the last step at <= 0.5 % loss and the first above it. The search is repeated --repeats times.
Longer trials (--confirm s) then start at the median NDR and step down by 10 % until
--confirm-repeats of them in a row lose nothing. A separate pass measures the CPU cost per
reflected packet at a moderate rate. A bare Python loop (recvmsg, struct, sendto; no asyncio,
no TLVs) is measured the same way as a baseline for what Python costs on this machine.

Two more reflectors are measured the same way in the same run unless left out: stamp-suite
(its cached binary, when present; --no-stamp-suite) and srv6pm's in-kernel reflector
(node-manager/bpf/reflector.c, program srv6pm_reflect on bsr0's tc ingress, pinned in a bpffs
directory of its own; --no-kernel). The in-kernel one answers in the receive softirq, which
RPS keeps on core 1, and the reply leaves through the namespace's forwarding. The one-core
generator runs out before it does, so every trial also gives the reflector core's capacity:
reflected packets per second of core 1 busy time (/proc/stat), as bench/forwarding.py measures
a router's. Last, srv6pm's VPP reflector (srv6pm-reflect in a VPP that drives bsr0 through
af_packet as the lab's VPP routers do, its main thread alone on core 1; bench/vpp_reflector.py;
--no-vpp): its core's busy time holds VPP's polling too, so its capacity is a lower bound.

Run as root: ``python3 -m bench.stamp_reflector`` or ``python3 bench/stamp_reflector.py``
(``--help`` for the knobs, ``--quick`` for a smoke run). ``--other NAME=CMD`` adds another
reflector, measured the same way (``{addr}`` and ``{port}`` in CMD are replaced). Method and
results: docs/BENCHMARKS.md. Raw data: bench/results/stamp-reflector-<YYYYMMDD-HHMMSS>.json
(the run id).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/stamp_reflector.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TypedDict

from bench.harness import generators, provenance, trials
from bench.harness.meters import (
    backlog_drops,
    counter_deltas,
    idle_s,
    netns_snmp6,
    snmp6,
    steal_s,
    udp6_counters,
)
from bench.harness.pinning import LOAD_CORE, MEASURED_CORE, taskset
from bench.harness.report import kilo_span
from bench.harness.run import RESULTS, Run, execute, progress, run
from bench.harness.topology import Pair, Side
from bench.reflectors import (
    BARE,
    BPF_ROOT,
    GEN_PORT,
    KERNEL,
    OURS,
    PACKET_OCTETS,
    PORT,
    SCRIPT,
    STAMP_SUITE,
    ProbeCheck,
    ReflectorProcess,
)
from bench.vpp_reflector import VPP, VppReflector

GEN_CORE = LOAD_CORE  # generator, its replies' receive (RPS), this script
REFL_CORE = MEASURED_CORE  # the reflector process and its receive (RPS)
LADDER = (5_000, 10_000, 20_000, 30_000, 40_000, 60_000, 80_000, 100_000, 120_000, 150_000, 200_000)
# beyond what the generator reaches on this machine: only the in-kernel reflector gets there, and
# these steps show where the generator, not the reflector, stops
LADDER_TOP = (250_000, 300_000)
CACHE = Path(os.environ.get("SRV6PM_CACHE", Path.home() / ".cache/srv6pm"))
PDR_LOSS = 0.005  # "rate at 0.5 % loss": the highest rate with loss <= this
QUICK_LADDER = (5_000, 20_000)


def pair(prefix: str) -> Pair:
    """<prefix>-gen (bsg0) and <prefix>-refl (bsr0), the generator's and the reflector's."""
    return Pair(
        Side(f"{prefix}-gen", "bsg0", "fd00:bb::1", GEN_CORE),
        Side(f"{prefix}-refl", "bsr0", "fd00:bb::2", REFL_CORE),
    )


# ---- trials ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    reflector: str
    rate: int  # requested
    duration_s: float
    offered_pps: float  # sent / elapsed
    reflected_pps: float  # replies counted by the generator / elapsed
    sent: int
    received: int
    loss: float  # (sent - received) / sent
    send_errors: int
    schedule_resets: int
    refl_cpu_ns_per_pkt: float  # reflector process CPU time / replies
    core_busy_ns_per_pkt: float  # reflector core busy time (process + softirq) / replies
    core_busy: float  # fraction of the trial's wall time
    core_steal: float  # fraction of the trial's wall time the hypervisor took from the core
    rcvbuf_errors: int  # reflector namespace Udp6RcvbufErrors
    sndbuf_errors: int  # reflector namespace Udp6SndbufErrors
    backlog_drops: int  # reflector core's input backlog
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_max_us: float
    # reflected packets per second of reflector-core busy time: what the core would answer if
    # it did nothing else (bench/forwarding.py's router capacity)
    capacity_pps: float
    gen_backlog_drops: int  # generator core's input backlog (replies)
    gen_rcvbuf_errors: int  # generator namespace Udp6RcvbufErrors
    program: dict[str, int]  # in-kernel reflector: its counters' change over the trial


class Bench:
    """Trials of one generator against the reflector on the other side of ``pair``."""

    def __init__(self, pair: Pair, stampgen: Path, trial_s: float, drain_s: float) -> None:
        self.pair = pair
        self.stampgen = stampgen
        self.trial_s = trial_s
        self.drain_s = drain_s
        self._ssid = 0
        self.trials: list[Trial] = []

    def trial(self, refl: ReflectorProcess, rate: int, duration_s: float | None = None) -> Trial:
        duration = duration_s or self.trial_s
        self._ssid = self._ssid % 65535 + 1  # a new SSID per trial: late replies do not count
        gen, refl_side = self.pair.a, self.pair.b
        argv = ["ip", "netns", "exec", gen.netns, *taskset(GEN_CORE, [str(self.stampgen)])]
        argv += ["--src", gen.address, "--dst", refl_side.address]
        argv += ["--sport", str(GEN_PORT), "--dport", str(PORT), "--ssid", str(self._ssid)]
        argv += ["--rate", str(rate), "--duration", f"{duration:.3f}"]
        argv += ["--drain", f"{self.drain_s:.3f}"]
        refl.drained()
        time.sleep(0.3)
        gen0, gdrops0, prog0 = netns_snmp6(gen.netns), backlog_drops(GEN_CORE), refl.program_stats()
        udp0, drops0, cpu0 = udp6_counters(refl.pid), backlog_drops(REFL_CORE), refl.cpu_ns()
        t0, idle0, steal0 = time.monotonic(), idle_s(REFL_CORE), steal_s(REFL_CORE)
        r = run(argv)
        t1, idle1, steal1 = time.monotonic(), idle_s(REFL_CORE), steal_s(REFL_CORE)
        udp1, drops1, cpu1 = udp6_counters(refl.pid), backlog_drops(REFL_CORE), refl.cpu_ns()
        gen1, gdrops1, prog1 = netns_snmp6(gen.netns), backlog_drops(GEN_CORE), refl.program_stats()
        g = json.loads(r.stdout)
        sent, received, elapsed = g["sent"], g["received"], g["elapsed_s"]
        busy_ns = max(0.0, (t1 - t0) - (idle1 - idle0)) * 1e9
        t = Trial(
            reflector=refl.name,
            rate=rate,
            duration_s=duration,
            offered_pps=sent / elapsed,
            reflected_pps=received / elapsed,
            sent=sent,
            received=received,
            loss=(sent - received) / sent if sent else float("nan"),
            send_errors=g["send_errors"],
            schedule_resets=g["schedule_resets"],
            refl_cpu_ns_per_pkt=(cpu1 - cpu0) / received if received else float("nan"),
            core_busy_ns_per_pkt=busy_ns / received if received else float("nan"),
            core_busy=busy_ns / 1e9 / (t1 - t0),
            core_steal=(steal1 - steal0) / (t1 - t0),
            rcvbuf_errors=udp1.get("Udp6RcvbufErrors", 0) - udp0.get("Udp6RcvbufErrors", 0),
            sndbuf_errors=udp1.get("Udp6SndbufErrors", 0) - udp0.get("Udp6SndbufErrors", 0),
            backlog_drops=drops1 - drops0,
            rtt_p50_us=g["rtt_p50_us"],
            rtt_p99_us=g["rtt_p99_us"],
            rtt_max_us=g["rtt_max_us"],
            capacity_pps=received / (busy_ns / 1e9) if busy_ns > 0 else float("nan"),
            gen_backlog_drops=gdrops1 - gdrops0,
            gen_rcvbuf_errors=gen1.get("Udp6RcvbufErrors", 0) - gen0.get("Udp6RcvbufErrors", 0),
            program={k: v - prog0.get(k, 0) for k, v in prog1.items()},
        )
        self.trials.append(t)
        print(
            f"  {t.reflector}: rate {rate / 1e3:6.1f}k offered {t.offered_pps / 1e3:6.1f}k "
            f"reflected {t.reflected_pps / 1e3:6.1f}k loss {t.loss:7.3%} "
            f"cpu {t.refl_cpu_ns_per_pkt:6.0f} ns/pkt core {t.core_busy:.2f} "
            f"steal {t.core_steal:.2f} "
            f"capacity {t.capacity_pps / 1e3:.0f}k "
            f"drops rcvbuf {t.rcvbuf_errors} sndbuf {t.sndbuf_errors} backlog {t.backlog_drops} "
            f"gen backlog {t.gen_backlog_drops} gen rcvbuf {t.gen_rcvbuf_errors} "
            f"resets {t.schedule_resets} rtt p50/p99/max {t.rtt_p50_us / 1e3:.1f}/"
            f"{t.rtt_p99_us / 1e3:.1f}/{t.rtt_max_us / 1e3:.1f} ms"
            + (f" program {t.program}" if t.program else ""),
            flush=True,
        )
        return t


@dataclass
class Search:
    reflector: str
    repeat: int
    steps: list[Trial]
    ndr_pps: float  # highest offered rate of a trial of this search with 0 loss
    pdr_pps: float  # the same with loss <= PDR_LOSS
    max_reflected_pps: float  # the most replies per second a trial of this search got back
    ndr_capacity_pps: float  # capacity_pps of the trial that gave ndr_pps


class Reflector(TypedDict):
    """One reflector of the run, around its trials."""

    start: dict[str, object]  # what it said when it started, and the probe check
    final: dict[str, object]  # what it said when stopped
    netns_counters: dict[str, int]  # its namespace's snmp6 counters over its trials


class ReflectorResult(TypedDict):
    settings: dict[str, object]  # the arguments and the packet size
    reflectors: dict[str, Reflector]
    trials: list[dict[str, object]]  # Trial, every one but the warm-ups
    searches: list[dict[str, object]]  # Search, its steps counted
    cpu: dict[str, list[dict[str, object]]]  # Trial
    confirm: dict[str, list[dict[str, object]]]  # Trial
    table: str


def search(bench: Bench, refl: ReflectorProcess, repeat: int, ladder: Sequence[int]) -> Search:
    """Step up the ladder until loss passes 5 % (or twice above 0.5 %), then bisect.

    NDR and the 0.5 % rate are the highest offered rates among all trials of this search that
    met the criterion (results are not monotonic: a higher rate can pass where a lower failed)."""
    first = len(bench.trials)
    steps = trials.step_up(
        lambda rate: bench.trial(refl, rate),
        ladder,
        lambda steps: steps[-1].loss > 0.05 or sum(s.loss > PDR_LOSS for s in steps) >= 2,
    )
    for limit in (0.0, PDR_LOSS):

        def passes(t: Trial, limit: float = limit) -> bool:
            return t.loss <= limit

        first_bad = next((s for s in steps if s.loss > limit), None)
        passing = [
            s for s in steps if s.loss <= limit and (not first_bad or s.rate < first_bad.rate)
        ]
        if first_bad:  # the highest passing rate between the last pass and the first failure
            trials.bisect(
                lambda rate: bench.trial(refl, rate),
                passes,
                passing[-1].rate if passing else 0,
                first_bad.rate,
                1000,
            )
    mine = bench.trials[first:]
    at_ndr = max((t for t in mine if t.loss == 0), key=lambda t: t.offered_pps, default=None)
    return Search(
        refl.name,
        repeat,
        steps,
        at_ndr.offered_pps if at_ndr else 0.0,
        max((t.offered_pps for t in mine if t.loss <= PDR_LOSS), default=0.0),
        max(t.reflected_pps for t in mine),
        at_ndr.capacity_pps if at_ndr else float("nan"),
    )


def confirm_pass(
    bench: Bench, refl: ReflectorProcess, ndr: float, duration_s: float, repeats: int
) -> list[Trial]:
    """Longer trials, from the median NDR down in steps of 10 % until ``repeats`` in a row
    have no loss (at most 5 rates): what the reflector sustains beyond a 3 s trial."""
    trials: list[Trial] = []
    rate = int(round(ndr / 500) * 500)
    for _ in range(5):
        at_rate = []
        for _ in range(repeats):
            at_rate.append(bench.trial(refl, rate, duration_s=duration_s))
            if at_rate[-1].loss > 0:
                break
        trials += at_rate
        if all(t.loss == 0 for t in at_rate):
            break
        rate = int(round(rate * 0.9 / 500) * 500)
    return trials


def cpu_pass(bench: Bench, refl: ReflectorProcess, rate: int, repeats: int) -> list[Trial]:
    return [bench.trial(refl, rate, duration_s=5.0) for _ in range(repeats)]


# ---- report ----------------------------------------------------------------------------------


def capacity_of(confirm: Sequence[Trial]) -> list[float]:
    """Capacity from the loss-free longer trials: the highest load the reflector kept up with,
    so its core is as busy as it gets without loss and the busy fraction is least noisy."""
    return [t.capacity_pps for t in confirm if t.loss == 0]


def summary(
    searches: Sequence[Search],
    cpu: dict[str, list[Trial]],
    confirm: dict[str, list[Trial]],
    trials: Sequence[Trial],
) -> list[str]:
    """One line per reflector: NDR, 0.5 % rate, cost, capacity; then where loss happened."""
    names = list(dict.fromkeys(s.reflector for s in searches))
    lines = [
        "| reflector | NDR median (min-max) | rate at <= 0.5 % loss | core busy ns/pkt "
        "(CPU pass) | capacity at each search's NDR | capacity, loss-free 10 s trials "
        "| core busy in them |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in names:
        mine = [s for s in searches if s.reflector == name]
        busy_ns = [t.core_busy_ns_per_pkt for t in cpu.get(name, [])]
        long = [t for t in confirm.get(name, []) if t.loss == 0]
        cap = capacity_of(confirm.get(name, []))
        lines.append(
            f"| {name} | {kilo_span([s.ndr_pps for s in mine])} "
            f"| {kilo_span([s.pdr_pps for s in mine])} "
            f"| {statistics.median(busy_ns) if busy_ns else float('nan'):.0f} "
            f"| {kilo_span([s.ndr_capacity_pps for s in mine])} "
            f"| {kilo_span(cap) if cap else '-'} "
            f"| {' / '.join(f'{t.core_busy:.2f}' for t in long) or '-'} |"
        )
    lines += ["", *ratios(searches, confirm)]
    lines += [
        "",
        "| reflector | trials | with loss | highest offered | lost | reflector backlog "
        "| reflector rcvbuf | generator backlog | generator rcvbuf | program (all trials) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        ran = [t for t in trials if t.reflector == name]
        program: dict[str, int] = {}
        for t in ran:
            for k, v in t.program.items():
                program[k] = program.get(k, 0) + v
        lines.append(
            f"| {name} | {len(ran)} | {sum(t.loss > 0 for t in ran)} "
            f"| {max(t.offered_pps for t in ran) / 1e3:.1f}k "
            f"| {sum(t.sent - t.received for t in ran)} | {sum(t.backlog_drops for t in ran)} "
            f"| {sum(t.rcvbuf_errors for t in ran)} | {sum(t.gen_backlog_drops for t in ran)} "
            f"| {sum(t.gen_rcvbuf_errors for t in ran)} "
            f"| {', '.join(f'{k} {v}' for k, v in program.items()) or '-'} |"
        )
    return lines


def ratios(searches: Sequence[Search], confirm: dict[str, list[Trial]]) -> list[str]:
    """The data planes' reflectors against each other and against stamp-suite, medians of one
    run: capacity (loss-free longer trials) over capacity, and over stamp-suite's NDR."""
    capacity = {name: capacity_of(confirm.get(name, [])) for name in (KERNEL, VPP, STAMP_SUITE)}
    peer_ndr = [s.ndr_pps for s in searches if s.reflector == STAMP_SUITE]
    lines = []
    for name in (KERNEL, VPP):
        if not capacity[name]:
            continue
        mine = statistics.median(capacity[name])
        if peer_ndr:
            ratio = mine / statistics.median(peer_ndr)
            lines.append(f"{name} capacity / {STAMP_SUITE} NDR (medians): {ratio:.2f}")
        if capacity[STAMP_SUITE]:
            ratio = mine / statistics.median(capacity[STAMP_SUITE])
            lines.append(f"{name} capacity / {STAMP_SUITE} capacity (medians): {ratio:.2f}")
    if capacity[KERNEL] and capacity[VPP]:
        ratio = statistics.median(capacity[VPP]) / statistics.median(capacity[KERNEL])
        lines.append(f"{VPP} capacity / {KERNEL} capacity (medians): {ratio:.2f}")
    return lines


def tables(
    searches: Sequence[Search],
    cpu: dict[str, list[Trial]],
    confirm: dict[str, list[Trial]],
    trials: Sequence[Trial],
) -> str:
    lines = [
        "| reflector | requested | offered (median) | reflected per search | loss per search |",
        "|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(s.reflector for s in searches):
        mine = [s for s in searches if s.reflector == name]
        rates = sorted({t.rate for s in mine for t in s.steps})
        for rate in rates:
            at = [next((t for t in s.steps if t.rate == rate), None) for s in mine]
            found = [t for t in at if t]
            offered = statistics.median(t.offered_pps for t in found)
            reflected = " / ".join(f"{t.reflected_pps / 1e3:.1f}k" if t else "-" for t in at)
            loss = " / ".join(f"{t.loss:.2%}" if t else "-" for t in at)
            lines.append(
                f"| {name} | {rate / 1e3:.0f}k | {offered / 1e3:.1f}k | {reflected} | {loss} |"
            )
    lines += [
        "",
        "| reflector | NDR median (min-max) | rate at <= 0.5 % loss | max reflected |",
        "|---|---|---|---|",
    ]
    for name in dict.fromkeys(s.reflector for s in searches):
        mine = [s for s in searches if s.reflector == name]
        lines.append(
            f"| {name} | {kilo_span([s.ndr_pps for s in mine])} "
            f"| {kilo_span([s.pdr_pps for s in mine])} "
            f"| {kilo_span([s.max_reflected_pps for s in mine])} |"
        )
    lines += [
        "",
        "| reflector | trial | requested | offered | loss | core busy | capacity "
        "| RTT p50 / p99 / max ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, longer in confirm.items():
        for t in longer:
            lines.append(
                f"| {name} | {t.duration_s:.0f} s | {t.rate / 1e3:.1f}k "
                f"| {t.offered_pps / 1e3:.1f}k | {t.loss:.3%} | {t.core_busy:.3f} "
                f"| {t.capacity_pps / 1e3:.0f}k "
                f"| {t.rtt_p50_us / 1e3:.2f} / {t.rtt_p99_us / 1e3:.2f} / "
                f"{t.rtt_max_us / 1e3:.1f} |"
            )
    lines += [
        "",
        "| reflector | rate | process CPU ns/pkt | core busy ns/pkt | core busy | capacity |",
        "|---|---|---|---|---|---|",
    ]
    for name, at_cpu_rate in cpu.items():
        for t in at_cpu_rate:
            lines.append(
                f"| {name} | {t.offered_pps / 1e3:.1f}k | {t.refl_cpu_ns_per_pkt:.0f} "
                f"| {t.core_busy_ns_per_pkt:.0f} | {t.core_busy:.3f} "
                f"| {t.capacity_pps / 1e3:.0f}k |"
            )
    return "\n".join([*lines, "", *summary(searches, cpu, confirm, trials)])


# ---- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--no-baseline", action="store_true", help="skip the bare Python loop baseline")
    p.add_argument(
        "--no-kernel",
        dest="kernel",
        action="store_false",
        help=f"skip the in-kernel reflector ({KERNEL}, tc eBPF)",
    )
    p.add_argument(
        "--bpf-root",
        type=Path,
        default=BPF_ROOT,
        help="bpffs directory; the in-kernel reflector is pinned in a new one under it "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--stamp-suite",
        type=Path,
        default=CACHE / "stamp-suite/bin/stamp-suite",
        help="stamp-suite binary, measured when it exists (default: %(default)s)",
    )
    p.add_argument("--no-stamp-suite", action="store_true", help="skip stamp-suite")
    p.add_argument(
        "--no-vpp",
        dest="vpp",
        action="store_false",
        help=f"skip the VPP reflector ({VPP}, srv6pm-reflect; needs VPP and make vpp-plugin)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="measure only these reflectors (names as in the table)",
    )
    p.add_argument(
        "--trial", type=float, default=3.0, help="seconds per rate (default: %(default)s)"
    )
    p.add_argument(
        "--drain", type=float, default=0.5, help="receive after sending, s (default: %(default)s)"
    )
    p.add_argument("--repeats", type=int, default=3, help="NDR searches (default: %(default)s)")
    p.add_argument(
        "--ladder", type=int, nargs="+", default=[*LADDER, *LADDER_TOP], help="rates, pps"
    )
    p.add_argument(
        "--cpu-rate", type=int, default=20_000, help="rate of the CPU pass (default: %(default)s)"
    )
    p.add_argument("--cpu-repeats", type=int, default=3, help="trials of 5 s in the CPU pass")
    p.add_argument("--confirm", type=float, default=10.0, help="longer trials at the median NDR, s")
    p.add_argument(
        "--confirm-repeats", type=int, default=2, help="loss-free ones needed (default: 2)"
    )
    p.add_argument(
        "--other",
        action="append",
        default=[],
        metavar="NAME=CMD",
        help="another reflector: CMD with {addr} and {port}",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    p.add_argument(
        "--prefix",
        default="bs",
        help="namespaces <prefix>-gen and <prefix>-refl (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run (about 1 min): 1 s trials, ladder {QUICK_LADDER}, one search, one CPU"
        " trial, 2 s confirm trials; figures meaningless",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.trial, args.drain, args.repeats, args.ladder = 1.0, 0.2, 1, list(QUICK_LADDER)
        args.cpu_rate, args.cpu_repeats, args.confirm, args.confirm_repeats = 5000, 1, 2.0, 1
    return args


def name_and_command(other: str) -> tuple[str, str]:
    """``NAME=CMD`` of --other."""
    name, _, command = other.partition("=")
    return name, command


def other_reflector(name: str, command: str, side: Side) -> Callable[[], ReflectorProcess]:
    return lambda: ReflectorProcess.other(name, command, side, REFL_CORE)


def measure(args: argparse.Namespace, pair: Pair, stampgen: Path) -> ReflectorResult:
    """Each reflector in turn: a check, a warm-up, the CPU pass, the searches, the longer
    trials; then the tables."""
    bench = Bench(pair, stampgen, args.trial, args.drain)
    searches: list[Search] = []
    cpu: dict[str, list[Trial]] = {}
    confirm: dict[str, list[Trial]] = {}
    info: dict[str, Reflector] = {}
    side = pair.b
    candidates: list[tuple[str, Callable[[], ReflectorProcess]]] = [
        (OURS, lambda: ReflectorProcess.ours(side, REFL_CORE))
    ]
    if not args.no_baseline:
        candidates.append((BARE, lambda: ReflectorProcess.ours(side, REFL_CORE, bare=True)))
    others = [name_and_command(other) for other in args.other]
    if not args.no_stamp_suite:
        if args.stamp_suite.exists():
            # its defaults: stateless and unauthenticated, as ours
            command = (
                f"{args.stamp_suite} --is-reflector --local-addr {{addr}} --local-port {{port}}"
            )
            others.insert(0, (STAMP_SUITE, command))
        else:
            progress(f"{args.stamp_suite} is missing: stamp-suite not measured")
    for name, command in others:
        candidates.append((name, other_reflector(name, command, side)))
    if args.kernel:
        candidates.append(
            (KERNEL, lambda: ReflectorProcess.in_kernel(side, REFL_CORE, args.bpf_root))
        )
    if args.vpp:
        candidates.append((VPP, lambda: VppReflector(side, pair.a, REFL_CORE)))
    if args.only:
        candidates = [(name, start) for name, start in candidates if name in args.only]
    for name, start in candidates:
        print(f"{name}:", flush=True)
        refl = start()
        netns0: dict[str, int] = {}
        try:
            netns0 = snmp6(refl.pid)
            refl.info["check"] = probe_check(pair.a, side)
            print(f"  check: {refl.info['check']}", flush=True)
            bench.trial(refl, 2000, duration_s=1.0)  # warm-up, not kept
            bench.trials.pop()
            cpu[name] = cpu_pass(bench, refl, args.cpu_rate, args.cpu_repeats)
            for rep in range(1, args.repeats + 1):
                s = search(bench, refl, rep, args.ladder)
                print(
                    f"  search {rep}: NDR {s.ndr_pps / 1e3:.1f}k pps, "
                    f"<= 0.5 % loss {s.pdr_pps / 1e3:.1f}k pps",
                    flush=True,
                )
                searches.append(s)
            ndr = statistics.median(s.ndr_pps for s in searches if s.reflector == name)
            confirm[name] = confirm_pass(bench, refl, ndr, args.confirm, args.confirm_repeats)
        finally:
            # the namespace's own counters over this reflector's trials: forwarded replies,
            # ICMPv6 sent (redirects), what reached a socket
            netns: dict[str, int] = {}
            with contextlib.suppress(OSError):
                netns = counter_deltas(netns0, snmp6(refl.pid))
            info[name] = {"start": refl.info, "final": refl.stop(), "netns_counters": netns}
    return {
        "settings": {
            **{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "packet_octets": PACKET_OCTETS,
        },
        "reflectors": info,
        "trials": [asdict(t) for t in bench.trials],
        "searches": [
            {k: v for k, v in asdict(s).items() if k != "steps"} | {"steps": len(s.steps)}
            for s in searches
        ],
        "cpu": {k: [asdict(t) for t in v] for k, v in cpu.items()},
        "confirm": {k: [asdict(t) for t in v] for k, v in confirm.items()},
        "table": tables(searches, cpu, confirm, bench.trials),
    }


def probe_check(gen: Side, refl: Side) -> ProbeCheck:
    """A few probes from a plain socket in the generator's namespace (see probe_once)."""
    argv = ["ip", "netns", "exec", gen.netns, *taskset(GEN_CORE, [sys.executable, str(SCRIPT)])]
    argv += ["--probe-once", gen.address]
    argv += ["--address", refl.address, "--port", str(PORT)]
    check: ProbeCheck = json.loads(run(argv, timeout=60).stdout)
    return check


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body(_run: Run) -> ReflectorResult:
        stampgen = generators.stampgen()
        with pair(args.prefix).running() as p:
            return measure(args, p, stampgen)

    # this script and what it starts stay off the reflector's core
    return execute(
        Run("stamp-reflector", "bench/stamp_reflector.py"),
        body,
        out=args.out,
        needs_root="namespaces",
        pin=GEN_CORE,
        environment=provenance.udp_environment,
    )


if __name__ == "__main__":
    sys.exit(main())
