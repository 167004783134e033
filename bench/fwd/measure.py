"""One measurement (apply a configuration, offer the load, sample the window, check the
counters), the rounds of a group, and the bpf_stats pass."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from srv6pm.lab import Lab

from bench.fwd.common import GEN_CORE, PROGRAM, ROUTER_CORE, STATS_FIELDS
from bench.fwd.groups import Config, Group, flow_name
from bench.fwd.r1 import R1, Counted
from bench.harness import trials
from bench.harness.bpf import NetRxProbe, bpf_stats, program_stats
from bench.harness.meters import backlog_drops, cpu_times, process_cpu_s, wait_idle
from bench.harness.pinning import taskset
from bench.harness.run import BenchError, progress
from bench.harness.stats import Quartiles, quartiles
from bench.harness.topology import NetnsCounters


class PktgenResult(TypedDict):
    """What bench/pktgen.c prints when done."""

    sent: int
    errors: int
    schedule_resets: int
    elapsed_s: float
    rate_pps: float
    batch: int
    frames: int
    bytes: int


class Cost(TypedDict):
    """A monitored configuration's program, ns per run over the bpf_stats rounds."""

    role: str
    n: int
    config: str
    ns_per_run: Quartiles
    samples: list[float]


@dataclass(frozen=True)
class Snapshot:
    t: float
    idle_s: float
    ticked_busy_s: float
    net_rx_ns: int
    net_rx_runs: int
    offered: int  # gen -> r1: transmitted or dropped on r1's backlog
    forwarded: int  # r1 -> sink, received by sink
    backlog_drops: int
    node_manager_cpu_s: float  # r1's node manager (it shares the generator's core)


class Meters:
    """Everything sampled at the edges of a measurement window."""

    def __init__(self, lab: Lab, probe: NetRxProbe, node_manager: int) -> None:
        self._probe = probe
        self._node_manager = node_manager
        self._gen_if = lab.kernel_interface("gen", "r1")
        self._sink_if = lab.kernel_interface("sink", "r1")
        self._gen = NetnsCounters(lab, "gen")
        self._sink = NetnsCounters(lab, "sink")

    def snapshot(self) -> Snapshot:
        t = time.monotonic()
        net_rx_ns, runs = self._probe.read(ROUTER_CORE)
        idle, ticked = cpu_times(ROUTER_CORE)
        gen = self._gen.read(self._gen_if)
        sink = self._sink.read(self._sink_if)
        drops = backlog_drops(ROUTER_CORE)
        return Snapshot(
            t,
            idle,
            ticked,
            net_rx_ns,
            runs,
            gen["tx"] + gen["tx_drop"],
            sink["rx"],
            drops,
            process_cpu_s(self._node_manager, children=True) or 0.0,
        )

    def close(self) -> None:
        self._gen.close()
        self._sink.close()


@dataclass(frozen=True)
class Timing:
    rate: int
    warmup_s: float
    window_s: float
    settle_s: float
    drain_s: float = 0.2

    @property
    def load_s(self) -> float:
        return self.warmup_s + self.window_s + 0.2


@dataclass(frozen=True)
class Sample:
    role: str
    n: int
    config: str
    round: int
    apply_s: float
    settle_s: float  # waited after ApplyState (at least --settle, until the node manager idles)
    offered_pps: float
    forwarded_pps: float
    sent: int  # by the generator, whole run
    received: int  # by the sink, whole run
    loss: float  # (sent - received) / sent, whole run
    backlog_drops: int  # on the router core, in the window
    busy: float  # router core, in the window: 1 - idle / elapsed
    busy_tick_sampled: float  # the same from /proc/stat's busy columns (undercounts here)
    capacity_pps: float  # forwarded_pps / busy
    net_rx_ns_per_pkt: float  # NET_RX time on the router core / forwarded packets
    pkts_per_net_rx_run: float  # batching: forwarded packets / NET_RX softirq runs
    gen_errors: int  # frames sendmmsg() did not take
    gen_schedule_resets: int  # times the generator fell > 4 batches behind and skipped ahead
    node_manager_cpu: float  # r1's node manager's CPU time / window (on the generator's core)
    stats: dict[str, int] = field(default_factory=dict)  # ReadCounters stats, whole run
    flows_hit: int = 0  # flows whose counters grew
    flow_packets: int = 0  # packets over all flows' counters (installed for this sample)
    counting_ok: bool = True  # see counting_check()


class Generator:
    """bench/bin/pktgen in gen's namespace, pinned to the generator core."""

    def __init__(self, lab: Lab, binary: Path) -> None:
        self._lab = lab
        gen_if = lab.kernel_interface("gen", "r1")
        self._argv = taskset(GEN_CORE, [str(binary), "--ifname", gen_if])

    def start(self, frames: Path, rate: int, duration_s: float) -> subprocess.Popen[str]:
        argv = [*self._argv, "--frames", str(frames), "--rate", str(rate)]
        argv += ["--duration", f"{duration_s:.3f}"]
        return self._lab.popen(
            "gen", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    @staticmethod
    def result(proc: subprocess.Popen[str]) -> PktgenResult:
        out, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            raise BenchError(f"pktgen failed: {err.strip()}")
        result: PktgenResult = json.loads(out.strip().splitlines()[-1])
        return result


def counting_check(cfg: Config, n: int, received: int, c0: Counted, c1: Counted) -> bool:
    """Monitored flows: the programs counted each packet of the run once (the sink received
    them all), for a flow (each of the N got some), and saw nothing they could not attribute
    (only not_srv6, e.g. neighbour discovery, may grow). Otherwise: no program of the node
    manager saw a packet (none is attached)."""
    delta = {k: c1.stats[k] - c0.stats[k] for k in STATS_FIELDS}
    if not cfg.flows:
        return not any(delta.values())
    problems = sum(v for k, v in delta.items() if k not in ("counted", "not_srv6"))
    return (
        delta["counted"] == received
        and problems == 0
        and c1.flows_hit == n
        and c1.flow_packets == delta["counted"]
    )


def measure(
    r1: R1, gen: Generator, meters: Meters, timing: Timing, group: Group, cfg: Config, rnd: int
) -> Sample:
    """Apply ``cfg``, offer the load, sample the window in its middle; check the counters."""
    apply_s = r1.apply(group.state(cfg), group.hook if cfg.empty_hook else None)
    r1.set_rules(cfg.rules, cfg.guarded)
    settle_s = wait_idle(r1.pid, timing.settle_s)  # its work is on the generator's core
    # stats only (one flow's counters come with them; asking for none means all of them)
    c0 = r1.counters([flow_name(0)] if cfg.flows else [])
    before = meters.snapshot()
    proc = gen.start(group.frame_files[cfg.frames], timing.rate, timing.load_s)
    time.sleep(timing.warmup_s)
    a = meters.snapshot()
    time.sleep(timing.window_s)
    b = meters.snapshot()
    sent = Generator.result(proc)
    time.sleep(timing.drain_s)  # the last packets drain
    after = meters.snapshot()
    c1 = r1.counters([])  # every flow: each of the N must have counted packets
    received = after.forwarded - before.forwarded
    s = sample(group, cfg, rnd, (apply_s, settle_s), a, b, sent, received)
    stats = {k: c1.stats[k] - c0.stats[k] for k in STATS_FIELDS}
    ok = counting_check(cfg, group.n, received, c0, c1)
    return replace(
        s, stats=stats, flows_hit=c1.flows_hit, flow_packets=c1.flow_packets, counting_ok=ok
    )


def sample(
    group: Group,
    cfg: Config,
    rnd: int,
    apply_settle_s: tuple[float, float],
    a: Snapshot,
    b: Snapshot,
    gen: PktgenResult,
    received: int,
) -> Sample:
    wall = b.t - a.t
    forwarded = b.forwarded - a.forwarded
    runs = b.net_rx_runs - a.net_rx_runs
    busy = 1 - (b.idle_s - a.idle_s) / wall
    sent = int(gen["sent"])
    return Sample(
        role=group.role,
        n=group.n,
        config=cfg.name,
        round=rnd,
        apply_s=apply_settle_s[0],
        settle_s=apply_settle_s[1],
        offered_pps=(b.offered - a.offered) / wall,
        forwarded_pps=forwarded / wall,
        sent=sent,
        received=received,
        loss=(sent - received) / sent if sent else float("nan"),
        backlog_drops=b.backlog_drops - a.backlog_drops,
        busy=busy,
        busy_tick_sampled=(b.ticked_busy_s - a.ticked_busy_s) / wall,
        capacity_pps=forwarded / wall / busy if busy > 0 else float("nan"),
        net_rx_ns_per_pkt=(b.net_rx_ns - a.net_rx_ns) / forwarded if forwarded else float("nan"),
        pkts_per_net_rx_run=forwarded / runs if runs else float("nan"),
        gen_errors=int(gen["errors"]),
        gen_schedule_resets=int(gen["schedule_resets"]),
        node_manager_cpu=(b.node_manager_cpu_s - a.node_manager_cpu_s) / wall,
    )


def describe(s: Sample) -> str:
    counted = s.stats.get("counted", 0)
    check = "counted ok" if s.counting_ok else f"COUNTING PROBLEM {s.stats}"
    return (
        f"offered {s.offered_pps / 1e3:6.1f} kpps, forwarded {s.forwarded_pps / 1e3:6.1f} kpps, "
        f"loss {s.loss:.3%}, busy {s.busy:.3f}, capacity {s.capacity_pps / 1e3:4.0f} kpps, "
        f"NET_RX {s.net_rx_ns_per_pkt:5.0f} ns/pkt, counted {counted}/{s.received} "
        f"({s.flows_hit} flows): {check}, apply {s.apply_s:.2f} s + settle {s.settle_s:.2f} s, "
        f"generator resets {s.gen_schedule_resets}, node manager CPU {s.node_manager_cpu:.2f}"
    )


def main_pass(
    r1: R1, gen: Generator, meters: Meters, timing: Timing, group: Group, rounds: int
) -> list[Sample]:
    """Round 0 warms up (every configuration once, not kept); rounds 1..N are measured."""

    def one(cfg: Config, rnd: int) -> Sample:
        s = measure(r1, gen, meters, timing, group, cfg, rnd)
        progress(
            f"{group.label} round {rnd} {cfg.name:>16}: {describe(s)}"
            + (" (warm-up)" if rnd == 0 else "")
        )
        return s

    return trials.alternate(group.configs, rounds, one)


# ---- bpf_stats pass --------------------------------------------------------------------------


def pinned_program(lab: Lab, name: str) -> Path:
    """A pinned program of r1's node manager."""
    found = sorted(lab.bpf_dir("r1").glob(f"progs/*/{name}"))
    if len(found) != 1:
        raise BenchError(f"expected one pinned {name} under {lab.bpf_dir('r1')}: {found}")
    return found[0]


def program_cost(
    lab: Lab, r1: R1, gen: Generator, timing: Timing, group: Group, cfg: Config
) -> float:
    """ns per run of the configuration's program (the node manager's, or the empty one) under
    the same load."""
    r1.apply(group.state(cfg), group.hook if cfg.empty_hook else None)
    wait_idle(r1.pid, timing.settle_s)
    program = r1.empty_program_id() if cfg.empty_hook else pinned_program(lab, PROGRAM[group.role])
    with bpf_stats():
        proc = gen.start(group.frame_files[cfg.frames], timing.rate, timing.load_s)
        time.sleep(timing.warmup_s)  # the steady state only, as in the main pass
        ns0, cnt0 = program_stats(program)
        time.sleep(timing.window_s)
        ns1, cnt1 = program_stats(program)
        Generator.result(proc)
    return (ns1 - ns0) / (cnt1 - cnt0) if cnt1 > cnt0 else float("nan")


def stats_pass(
    lab: Lab, r1: R1, gen: Generator, timing: Timing, group: Group, rounds: int
) -> list[Cost]:
    """Each monitored configuration's program cost, interleaved like the main pass."""
    monitored = [c for c in group.configs if c.monitored]
    costs: dict[str, list[float]] = {c.name: [] for c in monitored}
    for rnd in range(1, rounds + 1):
        for cfg in monitored:
            costs[cfg.name].append(program_cost(lab, r1, gen, timing, group, cfg))
            progress(
                f"{group.label} bpf_stats round {rnd} {cfg.name:>16}: "
                f"{costs[cfg.name][-1]:.1f} ns/run"
            )
    return [
        {"role": group.role, "n": group.n, "config": name, "ns_per_run": quartiles(v), "samples": v}
        for name, v in costs.items()
        if v
    ]
