#!/usr/bin/env python3
"""How many STAMP Session-Sender sessions one node runs at 1 probe/s: N = 1000, 3000, 10000.

Two namespaces, bs-snd and bs-rfl (``--prefix`` bs), joined by a veth pair. In bs-snd, one
process pinned to core 1 (this script with ``--senders N``) runs N ``srv6pm.twamp``
SenderSession objects on one asyncio loop, each with its own socket, as the node manager does:
delay_interval 1 s (one probe per second; the probe due in the middle of each block is the loss
probe of the block before, with a Direct Measurement TLV), period 10 s, all towards one
reflector: our Reflector (bench/reflectors.py --serve) in bs-rfl, pinned to core 0. RPS puts
the receive work of bs-snd's veth on core 1 and that of bs-rfl's on core 0, so core 1 carries
all of the sender side's work and nothing else of the benchmark.

For each N the sender process starts its sessions, runs --warmup s, then measures a --window
of seconds: probes sent per second, replies, probes declared lost (2 s timeout), its CPU time
and core 1's busy time, its RSS, and the lateness of each probe (when it was sent minus when
the engine meant to send it). Then it stops sending, waits for the last replies, and counts
over the whole run: sent = replied + lost.

Variants (``--variants``): ``together``: sessions created in one go and started in the same
loop iteration, as the node manager's apply does; ``spread``: started evenly over one second;
both with each session's loss probe offset in the block (SenderConfig.read_offset_ns) where
the node manager puts it (``loss_probe_offset_ns``: spread over [T/2, 3T/4) by SSID, so the
first 10,000 SSIDs span 0.38 s); ``offsets``: started together, loss probe offsets spread
evenly over one second after the middle.

Run as root: ``python3 -m bench.stamp_sessions`` or ``python3 bench/stamp_sessions.py``
(``--help`` for the knobs, ``--quick`` for a smoke run). Method and results: docs/BENCHMARKS.md.
Raw data: bench/results/stamp-sessions-<YYYYMMDD-HHMMSS>.json (the run id).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/stamp_sessions.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import array
import asyncio
import cProfile
import gc
import io
import json
import pstats
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

from srv6pm.node_manager.service.stamp import loss_probe_offset_ns

from bench.harness import provenance
from bench.harness.meters import idle_s, rss_kib, udp6_counters
from bench.harness.pinning import LOAD_CORE, MEASURED_CORE, taskset
from bench.harness.run import RESULTS, Run, execute, run
from bench.harness.stats import percentile
from bench.harness.topology import Pair, Side
from bench.reflectors import PORT, ConstantCounters, ReflectorProcess

SENDER_CORE = MEASURED_CORE  # the sessions' process and the receive work of their replies
REFLECTOR_CORE = LOAD_CORE  # the reflector, its receive work, and this script
PERIOD_NS = 10_000_000_000
ONE_S = 1_000_000_000
DELAY_INTERVAL_NS = ONE_S
TIMEOUT_NS = 2_000_000_000
NTP_UNIX_OFFSET_S = 2_208_988_800
SESSIONS = (1000, 3000, 10000)
VARIANTS = ("together", "spread", "offsets")

QUICK_SESSIONS = 100


def pair(prefix: str) -> Pair:
    """<prefix>-snd (bss0), the senders', and <prefix>-rfl (bsr1), the reflector's."""
    return Pair(
        Side(f"{prefix}-snd", "bss0", "fd00:bc::1", SENDER_CORE),
        Side(f"{prefix}-rfl", "bsr1", "fd00:bc::2", REFLECTOR_CORE),
    )


# ---- the sender side (--senders N, inside bs-snd) --------------------------------------------


Send = Callable[[bytes, tuple[str, int]], bool]  # a session's send callable


class Percentiles(TypedDict, total=False):
    """Of nanosecond values, in ms; empty when there were none."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


class Totals(TypedDict):
    """SenderStats summed over all sessions."""

    sent: int
    received: int
    lost: int
    unmatched: int
    malformed: int


class SenderResult(TypedDict):
    """What the sender process (--senders N) prints: its sessions over the window."""

    sessions: int
    variant: str
    setup_s: float
    window_s: float
    window: Totals
    sent_per_s: float
    delay_probes_per_s: float
    loss_probes_per_s: float
    expected_probes_per_s: float
    received_per_s: float
    send_failed: int
    cpu_fraction: float
    core_busy: float
    cpu_us_per_probe: float | None
    rss_base_kib: int
    rss_end_kib: int
    rss_per_session_kib: float
    delay_lateness: Percentiles
    loss_lateness: Percentiles
    two_way: Percentiles
    whole_run: Totals
    lost_whole_run: int
    profile: NotRequired[str]  # --profile: cProfile's top functions


class SessionsResult(SenderResult):
    """One N and variant: the sender process's result and the reflector's side."""

    reflector_rcvbuf_errors: int
    reflector: object  # the reflector's final stats, as it printed them


class SessionsRunResult(TypedDict):
    settings: dict[str, object]  # the arguments
    results: list[SessionsResult]
    table: str


class Probes:
    """What all sessions sent, recorded by a wrapper around each session's send callable.

    Lateness of a probe = its T1 (read back from the packet) minus when the engine meant to
    send it. SenderSession.run() (as of commit 72d2680) sends a probe once ``now`` reaches
    ``next_delay`` or ``next_loss``, and after any probe sets ``next_delay = now +
    delay_interval`` (a loss probe measures delay too); ``now`` is read a few microseconds
    before T1. So a delay probe is meant for the T1 of the session's previous probe + 1 s, to
    within those microseconds. A loss probe is meant for read_offset_ns into a block (0: the
    middle): its lateness is (T1 - offset) mod period."""

    def __init__(self) -> None:
        self.measuring = False
        self.delay_sent = 0
        self.loss_sent = 0
        self.send_failed = 0
        self.delay_lateness = array.array("q")
        self.loss_lateness = array.array("q")

    def wrap(self, send: Send, offset_ns: int) -> Send:
        last = 0

        def tracked(data: bytes, destination: tuple[str, int]) -> bool:
            nonlocal last
            ntp = int.from_bytes(data[4:12], "big")
            t1 = ((ntp >> 32) - NTP_UNIX_OFFSET_S) * 1_000_000_000
            t1 += ((ntp & 0xFFFFFFFF) * 1_000_000_000) >> 32
            if self.measuring:
                if len(data) > 44:  # a loss probe: it carries a Direct Measurement TLV
                    self.loss_sent += 1
                    self.loss_lateness.append((t1 - offset_ns) % PERIOD_NS)
                else:
                    self.delay_sent += 1
                    if last:
                        self.delay_lateness.append(t1 - last - DELAY_INTERVAL_NS)
            last = t1
            ok = send(data, destination)
            if not ok:
                self.send_failed += 1
            return ok

        return tracked


def percentiles(values: Sequence[int]) -> Percentiles:
    """p50, p90, p99 and max of nanosecond values, in ms."""
    if not values:
        return {}

    def at(q: float) -> float:
        return percentile(values, q, "floor") / 1e6

    return {"p50_ms": at(50), "p90_ms": at(90), "p99_ms": at(99), "max_ms": max(values) / 1e6}


async def _senders(args: argparse.Namespace) -> SenderResult:
    from srv6pm.twamp.results import ResultStore  # noqa: PLC0415
    from srv6pm.twamp.sender import SenderConfig, SenderSession  # noqa: PLC0415
    from srv6pm.twamp.transport import Endpoint, open_socket  # noqa: PLC0415

    n: int = args.senders
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1024), hard))
    loop = asyncio.get_running_loop()
    rss_base = rss_kib()
    probes = Probes()
    counters = ConstantCounters()
    sessions: list[SenderSession] = []
    stores: list[ResultStore] = []  # each session's results
    endpoints: list[Endpoint] = []
    t_setup = time.monotonic()
    for i in range(n):
        endpoint = Endpoint(open_socket(args.local, 0))
        ssid = i % 65535 + 1
        # "offsets": loss probes (and so the delay probes after them) spread over 1 s; else
        # where the node manager puts them
        offset = (
            PERIOD_NS // 2 + i * ONE_S // n
            if args.variant == "offsets"
            else loss_probe_offset_ns(PERIOD_NS, ssid)
        )
        config = SenderConfig(
            name=f"s{i}",
            ssid=ssid,
            reflector=(args.reflector, PORT),
            forward_flow="fwd",
            reverse_flow="rev",
            period_ns=PERIOD_NS,
            delay_interval_ns=DELAY_INTERVAL_NS,
            timeout_ns=TIMEOUT_NS,
            read_offset_ns=offset,
        )
        send = probes.wrap(endpoint.send, offset)
        store = ResultStore()
        session = SenderSession(config, counters, send, results=store)
        endpoint.serve(session.handle)
        sessions.append(session)
        stores.append(store)
        endpoints.append(endpoint)
    setup_s = time.monotonic() - t_setup

    async def start(session: SenderSession, delay_s: float) -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        await session.run()

    spread = args.variant == "spread"
    tasks = [loop.create_task(start(s, i / n if spread else 0.0)) for i, s in enumerate(sessions)]

    def totals() -> Totals:
        stats = [s.stats for s in sessions]
        return Totals(
            sent=sum(t.sent for t in stats),
            received=sum(t.received for t in stats),
            lost=sum(t.lost for t in stats),
            unmatched=sum(t.unmatched for t in stats),
            malformed=sum(t.malformed for t in stats),
        )

    await asyncio.sleep(args.warmup)
    before, cpu0, t0, idle0 = totals(), time.process_time(), time.monotonic(), idle_s(SENDER_CORE)
    probes.measuring = True
    await asyncio.sleep(args.window)
    probes.measuring = False
    after, cpu1, t1, idle1 = totals(), time.process_time(), time.monotonic(), idle_s(SENDER_CORE)
    rss_end = rss_kib()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep((TIMEOUT_NS + 500_000_000) / 1e9)  # last replies, then expire the rest
    now = time.time_ns()
    for s in sessions:
        s.expire(now + TIMEOUT_NS)
    final = totals()
    rtts = [d.two_way_ns for store in stores for d in store.delay]
    for endpoint in endpoints:
        endpoint.close()
    elapsed = t1 - t0
    window = Totals(
        sent=after["sent"] - before["sent"],
        received=after["received"] - before["received"],
        lost=after["lost"] - before["lost"],
        unmatched=after["unmatched"] - before["unmatched"],
        malformed=after["malformed"] - before["malformed"],
    )
    return {
        "sessions": n,
        "variant": args.variant + (" no-gc" if args.no_gc else ""),
        "setup_s": setup_s,
        "window_s": elapsed,
        "window": window,
        "sent_per_s": window["sent"] / elapsed,
        "delay_probes_per_s": probes.delay_sent / elapsed,
        "loss_probes_per_s": probes.loss_sent / elapsed,
        "expected_probes_per_s": n * 1e9 / DELAY_INTERVAL_NS,
        "received_per_s": window["received"] / elapsed,
        "send_failed": probes.send_failed,
        "cpu_fraction": (cpu1 - cpu0) / elapsed,
        "core_busy": 1 - (idle1 - idle0) / elapsed,
        "cpu_us_per_probe": (cpu1 - cpu0) / window["sent"] * 1e6 if window["sent"] else None,
        "rss_base_kib": rss_base,
        "rss_end_kib": rss_end,
        "rss_per_session_kib": (rss_end - rss_base) / n,
        "delay_lateness": percentiles(probes.delay_lateness),
        "loss_lateness": percentiles(probes.loss_lateness),
        "two_way": percentiles(rtts),
        "whole_run": final,
        "lost_whole_run": final["sent"] - final["received"],
    }


def senders(args: argparse.Namespace) -> int:
    if args.no_gc:
        gc.disable()
    profile = cProfile.Profile() if args.profile else None
    if profile:
        profile.enable()
    result = asyncio.run(_senders(args))
    if profile:
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        result["profile"] = text.getvalue()
    print(json.dumps(result), flush=True)
    return 0


# ---- orchestration ---------------------------------------------------------------------------


def run_one(args: argparse.Namespace, p: Pair, n: int, variant: str) -> SessionsResult:
    refl = ReflectorProcess.ours(p.b, REFLECTOR_CORE)
    try:
        udp0 = udp6_counters(refl.pid)
        argv = [sys.executable, str(Path(__file__).resolve()), "--senders", str(n)]
        argv = ["ip", "netns", "exec", p.a.netns, *taskset(SENDER_CORE, argv)]
        argv += ["--local", p.a.address, "--reflector", p.b.address]
        argv += ["--variant", variant]
        argv += ["--warmup", str(args.warmup), "--window", str(args.window)]
        if args.profile:
            argv.append("--profile")
        if args.no_gc:
            argv.append("--no-gc")
        r = run(argv, timeout=args.warmup + args.window + 600)
        sender: SenderResult = json.loads(r.stdout.splitlines()[-1])
        udp1 = udp6_counters(refl.pid)
        rcvbuf_errors = udp1.get("Udp6RcvbufErrors", 0) - udp0.get("Udp6RcvbufErrors", 0)
    finally:
        result_refl = refl.stop()
    return {
        **sender,
        "reflector_rcvbuf_errors": rcvbuf_errors,
        "reflector": result_refl.get("stats", {}),
    }


def line(r: SessionsResult) -> str:
    lat = r["delay_lateness"]
    return (
        f"N={r['sessions']:>5} {r['variant']:>8}: sent {r['sent_per_s']:8.1f}/s "
        f"of {r['expected_probes_per_s']:.0f} (delay {r['delay_probes_per_s']:.1f}, "
        f"loss {r['loss_probes_per_s']:.1f}), "
        f"window lost {r['window']['lost']}, run lost {r['lost_whole_run']} of "
        f"{r['whole_run']['sent']}, cpu {r['cpu_fraction']:.3f} (core {r['core_busy']:.3f}), "
        f"rss {r['rss_end_kib'] / 1024:.0f} MiB, lateness p50 {lat.get('p50_ms', 0):.2f} "
        f"p99 {lat.get('p99_ms', 0):.2f} max {lat.get('max_ms', 0):.2f} ms"
    )


def table(results: Sequence[SessionsResult]) -> str:
    rows = [
        "| N | variant | sent/s (delay + loss probes) | expected/s | replies/s | lost "
        "(window) | lost (whole run) | sender CPU (of one core) | core 1 busy | CPU µs/probe "
        "| RSS MiB (KiB/session) | delay probe lateness p50 / p99 / max ms "
        "| loss probe lateness p50 / p99 / max ms | RTT p50 / p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lat, rtt, llat = r["delay_lateness"], r["two_way"], r["loss_lateness"]
        rows.append(
            f"| {r['sessions']} | {r['variant']} | {r['sent_per_s']:.0f} "
            f"({r['delay_probes_per_s']:.0f} + {r['loss_probes_per_s']:.0f}) "
            f"| {r['expected_probes_per_s']:.0f} | {r['received_per_s']:.0f} "
            f"| {r['window']['lost']} | {r['lost_whole_run']} of {r['whole_run']['sent']} "
            f"| {r['cpu_fraction']:.3f} | {r['core_busy']:.3f} | {r['cpu_us_per_probe']:.1f} "
            f"| {r['rss_end_kib'] / 1024:.0f} ({r['rss_per_session_kib']:.1f}) "
            f"| {lat.get('p50_ms', 0):.2f} / {lat.get('p99_ms', 0):.2f} / "
            f"{lat.get('max_ms', 0):.1f} "
            f"| {llat.get('p50_ms', 0):.1f} / {llat.get('p99_ms', 0):.1f} / "
            f"{llat.get('max_ms', 0):.1f} "
            f"| {rtt.get('p50_ms', 0):.2f} / {rtt.get('p99_ms', 0):.2f} |"
        )
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--senders", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--local", default="::", help=argparse.SUPPRESS)
    p.add_argument("--reflector", default="::1", help=argparse.SUPPRESS)
    p.add_argument("--sessions", type=int, nargs="+", default=list(SESSIONS), help="values of N")
    p.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        default=list(VARIANTS),
        help="together: all start at once; spread: over 1 s; offsets: at once, loss probe\n"
        "offsets (read_offset_ns) spread over 1 s (default: all)",
    )
    p.add_argument("--variant", choices=VARIANTS, default="together", help=argparse.SUPPRESS)
    p.add_argument(
        "--warmup",
        type=float,
        default=16.0,
        help="s before the window: past every session's first loss probe (default: %(default)s)",
    )
    p.add_argument("--window", type=float, default=20.0, help="measured s (default: %(default)s)")
    p.add_argument("--profile", action="store_true", help="cProfile the sender process")
    p.add_argument(
        "--no-gc", action="store_true", help="diagnostic: the sender process runs gc.disable()"
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    p.add_argument(
        "--prefix", default="bs", help="namespaces <prefix>-snd and <prefix>-rfl (default: bs)"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run (about 1 min): N={QUICK_SESSIONS}, together only, 12 s warm-up, 3 s"
        " window; figures meaningless",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.variants = [QUICK_SESSIONS], ["together"]
        args.warmup, args.window = 12.0, 3.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.senders:
        return senders(args)

    def measure(_run: Run) -> SessionsRunResult:
        results: list[SessionsResult] = []
        with pair(args.prefix).running() as p:
            for n in args.sessions:
                for variant in args.variants:
                    r = run_one(args, p, n, variant)
                    print(line(r), flush=True)
                    results.append(r)
        return {
            "settings": {**vars(args), "out": str(args.out)},
            "results": results,
            "table": table(results),
        }

    def report(result: SessionsRunResult) -> None:
        print(f"\n{result['table']}\n")
        if args.profile:
            for r in result["results"]:
                print(f"\nprofile N={r['sessions']} {r['variant']}:\n{r.get('profile', '')}")

    return execute(
        Run("stamp-sessions", "bench/stamp_sessions.py"),
        measure,
        out=args.out,
        needs_root="namespaces",
        pin=REFLECTOR_CORE,
        errors=(subprocess.TimeoutExpired,),
        environment=provenance.udp_environment,
        report=report,
    )


if __name__ == "__main__":
    sys.exit(main())
