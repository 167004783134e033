#!/usr/bin/env python3
"""Forwarding cost of per-flow eBPF monitoring on the SRv6 ingress router.

Builds gen - r1 - sink (bench/forwarding.yaml) with the lab tool, configures r1 through its node
manager's gRPC API only, offers a fixed load from gen and measures, for plain SRv6 encapsulation
and for 1, 16, 1000 and 10000 monitored flows, how much of r1's core the load takes. The
configurations are interleaved round-robin in one run; the figures are medians over the rounds.
Then a short separate pass reads the marking program's own cost from the kernel's bpf_stats.

Run as root: ``python bench/forwarding.py`` (``--help`` for the knobs). Method and results:
docs/BENCHMARKS.md. Raw data: bench/results/forwarding-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

import grpc
from srv6pm.lab import Lab, LabError, Topology
from srv6pm.node_manager.drivers.linux.bpftool import bpf_syscall, obj_get
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = HERE / "bin"
RESULTS = HERE / "results"
TOPOLOGY = HERE / "forwarding.yaml"
PREFIX = "bzfwd"
BASE_PORT = 52000
PROBE_DIR = Path("/sys/fs/bpf") / f"{PREFIX}-probe"
LOCK = BIN / "forwarding.lock"

GEN_CORE = 0  # generator, sink receive, node manager, this script
ROUTER_CORE = 1  # r1's receive and forwarding (RPS)
EMPTY_HOOK = -1  # no monitored flow, an empty program on the egress hook: the hook's own cost
FLOW_COUNTS = (0, EMPTY_HOOK, 1, 16, 1000, 10000)  # 0 = plain SRv6 encapsulation

SIDS = ("fc00:0:2::e", "fc00:0:3::d6")
POLICY_PREFIX = "fd00:2::/64"
GEN_SRC, GEN_DST = "fd00:1::2", "fd00:2::2"
FRAME_BYTES = 78
MARK_PROGRAM = "srv6pm_mark"

# bpf(2) commands used directly: bpftool 7.1 can neither attach raw tracepoints nor hold
# BPF_ENABLE_STATS open (an fd that turns bpf_stats off by itself when this process dies).
BPF_MAP_LOOKUP_ELEM = 1
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


# ---- small helpers ---------------------------------------------------------------------------


class BenchError(Exception):
    """A failure with a message meant for the user."""


def run(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a command, raise BenchError with its stderr if it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if r.returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` failed: {r.stderr.strip()}")
    return r


def build(source: Path, target: Path, argv: list[str]) -> Path:
    """Compile ``source`` into ``target`` with ``argv`` unless ``target`` is newer."""
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    run([*argv, str(source), "-o", str(target)])
    return target


def build_tools() -> tuple[Path, Path, Path]:
    """The generator binary, the softirq probe and the empty tc program, rebuilt when stale."""
    pktgen = build(HERE / "pktgen.c", BIN / "pktgen", ["gcc", "-O2", "-Wall", "-Wextra"])
    include = f"-I/usr/include/{platform.machine()}-linux-gnu"
    clang = ["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", include, "-c"]
    probe = build(HERE / "softirq.bpf.c", BIN / "softirq.bpf.o", clang)
    empty = build(HERE / "empty.bpf.c", BIN / "empty.bpf.o", clang)
    return pktgen, probe, empty


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


# ---- bpf(2) ----------------------------------------------------------------------------------


class _RawTracepointAttr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_uint64),
        ("prog_fd", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("cookie", ctypes.c_uint64),
    )


class _MapLookupAttr(ctypes.Structure):
    _fields_ = (
        ("map_fd", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("value", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    )


class _EnableStatsAttr(ctypes.Structure):
    _fields_ = (("type", ctypes.c_uint32),)


def bpf(cmd: int, attr: ctypes.Structure) -> int:
    """The bpf(2) system call; returns its (fd) result or raises OSError."""
    result = bpf_syscall(cmd, attr)
    if result < 0:
        raise OSError(-result, os.strerror(-result))
    return result


@contextlib.contextmanager
def bpf_stats() -> Iterator[None]:
    """kernel.bpf_stats_enabled for the duration (and never longer, even on a crash)."""
    fd = bpf(BPF_ENABLE_STATS, _EnableStatsAttr(type=BPF_STATS_RUN_TIME))
    try:
        yield
    finally:
        os.close(fd)


class _NetRxTime(ctypes.Structure):
    """struct net_rx_time of bench/softirq.bpf.c (one per possible CPU in a lookup)."""

    _fields_ = (
        ("start_ns", ctypes.c_uint64),
        ("total_ns", ctypes.c_uint64),
        ("runs", ctypes.c_uint64),
    )


def possible_cpus() -> int:
    """Number of possible CPUs (a per-CPU map value holds one slot for each)."""
    text = Path("/sys/devices/system/cpu/possible").read_text().strip()
    return max(int(part.split("-")[-1]) for part in text.split(",")) + 1


class NetRxProbe:
    """NET_RX softirq time per CPU (bench/softirq.bpf.c), attached while the object lives."""

    def __init__(self, obj: Path) -> None:
        remove_pins(PROBE_DIR)
        PROBE_DIR.mkdir(parents=True)  # bpftool pins into an existing directory only
        progs, maps = str(PROBE_DIR / "progs"), str(PROBE_DIR / "maps")
        run(["bpftool", "prog", "loadall", str(obj), progs, "pinmaps", maps])
        self._fds: list[int] = []
        try:
            self._map_fd = obj_get(PROBE_DIR / "maps" / "bench_net_rx")
            self._fds.append(self._map_fd)
            for tracepoint in ("softirq_entry", "softirq_exit"):
                self._fds.append(self._attach(tracepoint))
        except BaseException:
            self.close()
            raise

    def _attach(self, tracepoint: str) -> int:
        prog = obj_get(PROBE_DIR / "progs" / f"bench_{tracepoint}")
        try:
            name = ctypes.create_string_buffer(tracepoint.encode())
            attr = _RawTracepointAttr(name=ctypes.addressof(name), prog_fd=prog)
            return bpf(BPF_RAW_TRACEPOINT_OPEN, attr)
        finally:
            os.close(prog)

    def read(self, cpu: int) -> tuple[int, int]:
        """(nanoseconds in NET_RX, NET_RX runs) on ``cpu`` since the probe was loaded.

        One bpf(2) call rather than a bpftool process: the read lands microseconds after the
        other counters of a snapshot.
        """
        key = ctypes.c_uint32(0)
        values = (_NetRxTime * possible_cpus())()
        attr = _MapLookupAttr(
            map_fd=self._map_fd, key=ctypes.addressof(key), value=ctypes.addressof(values)
        )
        bpf(BPF_MAP_LOOKUP_ELEM, attr)
        return values[cpu].total_ns, values[cpu].runs

    def close(self) -> None:
        for fd in self._fds:  # closing the link fds detaches the programs
            os.close(fd)
        self._fds = []
        remove_pins(PROBE_DIR)


def remove_pins(path: Path) -> None:
    """Unpin a bpffs tree (unlinking releases the objects)."""
    if path.is_dir():
        for sub in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if sub.is_dir():
                sub.rmdir()
            else:
                sub.unlink()
        path.rmdir()


# ---- reading counters ------------------------------------------------------------------------


class NetnsCounters:
    """Interface counters of one namespace, read from here without a process per read.

    A /proc/<pid>/net file belongs to the namespace of that process when it is opened and keeps
    it for as long as it is open, so a short-lived process in the namespace is enough. Reads
    are then microseconds apart, so the window edges of all counters coincide.
    """

    def __init__(self, lab: Lab, node: str) -> None:
        proc = lab.popen(node, ["sleep", "60"])
        try:
            self._file = self._open_in_netns(proc.pid, node)
        finally:
            proc.kill()  # our own child, by its handle
            proc.wait()

    @staticmethod
    def _open_in_netns(pid: int, node: str) -> TextIO:
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{pid}/ns/net") == own:  # until `ip netns exec` has run
            if time.monotonic() > deadline:
                raise BenchError(f"helper process in {node} did not enter its namespace")
            time.sleep(0.01)
        return open(f"/proc/{pid}/net/dev")  # kept open: it holds the namespace

    def read(self, ifname: str) -> dict[str, int]:
        """rx/tx packets and drops of ``ifname``."""
        self._file.seek(0)
        for line in self._file.read().splitlines()[2:]:
            name, _, rest = line.partition(":")
            if name.strip() == ifname:
                f = [int(x) for x in rest.split()]
                return {"rx": f[1], "rx_drop": f[3], "tx": f[9], "tx_drop": f[11]}
        raise BenchError(f"no interface {ifname} in {self._file.name}")

    def close(self) -> None:
        self._file.close()


USER_HZ = os.sysconf("SC_CLK_TCK")


def cpu_times(cpu: int) -> tuple[float, float]:
    """(idle seconds, tick-sampled busy seconds) of ``cpu`` from /proc/stat.

    The idle figure is exact: with NO_HZ the kernel timestamps idle entry and exit and stops
    the idle clock while it handles an interrupt, softirqs included (/proc/stat only rounds it
    to 10 ms). The busy columns are not: this kernel has no IRQ time accounting and samples
    them on the tick, which is stopped while the core idles between bursts, so most of the
    softirq work of forwarding falls between ticks. Busy is therefore 1 - idle / elapsed; the
    sampled figure is kept only to show the difference. (cpuidle residency is no better: it
    counts the interrupt and softirq work done on waking from HLT as idle.)
    """
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name == f"cpu{cpu}":
            f = [int(x) for x in fields]
            user, nice, system, idle, iowait, irq, softirq = f[:7]
            return (idle + iowait) / USER_HZ, (user + nice + system + irq + softirq) / USER_HZ
    raise BenchError(f"no cpu{cpu} in /proc/stat")


def backlog_drops(cpu: int) -> int:
    """Packets dropped because ``cpu``'s input backlog was full (/proc/net/softnet_stat)."""
    lines = Path("/proc/net/softnet_stat").read_text().splitlines()
    return int(lines[cpu].split()[1], 16)


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


class Meters:
    """Everything sampled at the edges of a measurement window."""

    def __init__(self, lab: Lab, probe: NetRxProbe) -> None:
        self._probe = probe
        self._gen_if = lab.interface("gen", "r1")
        self._sink_if = lab.interface("sink", "r1")
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
            t, idle, ticked, net_rx_ns, runs, gen["tx"] + gen["tx_drop"], sink["rx"], drops
        )

    def close(self) -> None:
        self._gen.close()
        self._sink.close()


# ---- the lab and r1's configuration ----------------------------------------------------------


def flow(i: int, ifname: str) -> pb.MonitoredFlow:
    """Flow 0 carries the traffic (the policy's SID list); the others only fill the map."""
    segments = SIDS if i == 0 else (SIDS[0], f"fc00:0:4:{i:x}::d6")
    return pb.MonitoredFlow(
        name=f"bench-{i:05d}",
        segments=segments,
        role=pb.ROLE_INGRESS,
        interfaces=[ifname],
        flow_mon_id=i + 1,
    )


def node_state(lab: Lab, flows: int) -> pb.NodeState:
    ifname = lab.interface("r1", "sink")
    policy = pb.SrPolicy(
        name="bench", prefix=POLICY_PREFIX, segments=SIDS, mode=pb.ENCAP_MODE_ENCAP
    )
    return pb.NodeState(policies=[policy], flows=[flow(i, ifname) for i in range(flows)])


class R1:
    """r1's node manager, through gRPC only."""

    def __init__(self, lab: Lab, empty_program: Path) -> None:
        self._lab = lab
        self._empty = empty_program
        options = [("grpc.enable_http_proxy", 0), ("grpc.max_send_message_length", 64 << 20)]
        self._channel = grpc.insecure_channel(lab.grpc_address("r1"), options=options)
        self._stub = pb_grpc.NodeManagerStub(self._channel)

    def apply(self, flows: int) -> float:
        """Converge r1 to the policy plus ``flows`` monitored flows (EMPTY_HOOK: none, and an
        empty program on the hook instead); seconds it took."""
        start = time.monotonic()
        request = pb.ApplyStateRequest(desired=node_state(self._lab, max(flows, 0)))
        self._stub.ApplyState(request, timeout=120)
        self._empty_hook(flows == EMPTY_HOOK)
        return time.monotonic() - start

    def _empty_hook(self, attached: bool) -> None:
        # tc(8) here: this is the benchmark's own probe, not the node manager's (prio 1, its
        # own handle, so the node manager's filter is never touched)
        dev = self._lab.interface("r1", "sink")
        self._lab.exec("r1", ["tc", "qdisc", "add", "dev", dev, "clsact"], capture_output=True)
        self._lab.exec(
            "r1", ["tc", "filter", "del", "dev", dev, "egress", "prio", "1"], capture_output=True
        )
        if attached:
            sh(
                self._lab,
                "r1",
                f"tc filter add dev {dev} egress prio 1 handle 1 bpf da obj {self._empty} sec tc",
            )

    def close(self) -> None:
        self._channel.close()


def sh(lab: Lab, node: str, command: str) -> None:
    r = lab.exec(node, ["sh", "-c", command], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"{node}: `{command}` failed: {r.stderr.strip()}")


def prepare_network(lab: Lab) -> str:
    """RPS, the sink's drop, r1's neighbour entry; returns r1's MAC toward gen."""
    r1_in, r1_out = lab.interface("r1", "gen"), lab.interface("r1", "sink")
    sink_in = lab.interface("sink", "r1")
    # r1's receive and forwarding on the router core, away from the generator.
    sh(lab, "r1", f"echo {1 << ROUTER_CORE:x} > /sys/class/net/{r1_in}/queues/rx-0/rps_cpus")
    # veth delivers on the transmitting CPU: without this the sink's receive would run on the
    # router core and be counted as r1's work.
    sh(lab, "sink", f"echo {1 << GEN_CORE:x} > /sys/class/net/{sink_in}/queues/rx-0/rps_cpus")
    # The sink drops everything at once, on the netdev ingress hook (this kernel has neither
    # cls_matchall nor act_gact); it only counts, with its interface rx counter.
    ruleset = (
        f"table netdev {PREFIX} {{\n  chain sink {{\n"
        f'    type filter hook ingress device "{sink_in}" priority 0; policy drop;\n  }}\n}}\n'
    )
    r = lab.exec("sink", ["nft", "-f", "-"], input=ruleset, capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"sink: nft failed: {r.stderr.strip()}")
    # The sink drops neighbour solicitations too, so r1 gets a permanent entry for it.
    sink_mac = read_mac(lab, "sink", sink_in)
    sink_ip = lab.topology.address("sink", "r1").ip
    sh(lab, "r1", f"ip -6 neigh replace {sink_ip} lladdr {sink_mac} dev {r1_out} nud permanent")
    return read_mac(lab, "r1", r1_in)


def read_mac(lab: Lab, node: str, ifname: str) -> str:
    r = lab.exec(node, ["cat", f"/sys/class/net/{ifname}/address"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"cannot read the MAC of {node}/{ifname}: {r.stderr.strip()}")
    return str(r.stdout).strip()


# ---- one measurement -------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    rate: int
    warmup_s: float
    window_s: float
    settle_s: float


@dataclass(frozen=True)
class Sample:
    flows: int
    round: int
    apply_s: float
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


class Generator:
    """bench/bin/pktgen in gen's namespace, pinned to the generator core."""

    def __init__(self, lab: Lab, binary: Path, r1_mac: str) -> None:
        self._lab = lab
        self._argv = [
            "taskset",
            "-c",
            str(GEN_CORE),
            str(binary),
            "--ifname",
            lab.interface("gen", "r1"),
            "--dst-mac",
            r1_mac,
            "--src",
            GEN_SRC,
            "--dst",
            GEN_DST,
            "--size",
            str(FRAME_BYTES),
        ]

    def start(self, rate: int, duration_s: float) -> subprocess.Popen[str]:
        argv = [*self._argv, "--rate", str(rate), "--duration", f"{duration_s:.3f}"]
        return self._lab.popen(
            "gen", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    @staticmethod
    def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
        out, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            raise BenchError(f"pktgen failed: {err.strip()}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result


def measure(r1: R1, gen: Generator, meters: Meters, timing: Timing, flows: int, rnd: int) -> Sample:
    """Apply ``flows``, offer the load, sample the window in its middle."""
    apply_s = r1.apply(flows)
    time.sleep(timing.settle_s)  # the node manager's work after a large apply is on core 0 too
    before = meters.snapshot()
    proc = gen.start(timing.rate, timing.warmup_s + timing.window_s + 0.2)
    time.sleep(timing.warmup_s)
    a = meters.snapshot()
    time.sleep(timing.window_s)
    b = meters.snapshot()
    sent = Generator.result(proc)
    time.sleep(0.2)  # the last packets drain
    after = meters.snapshot()
    return sample(flows, rnd, apply_s, a, b, sent, after.forwarded - before.forwarded)


def sample(
    flows: int,
    rnd: int,
    apply_s: float,
    a: Snapshot,
    b: Snapshot,
    gen: dict[str, Any],
    received: int,
) -> Sample:
    wall = b.t - a.t
    forwarded = b.forwarded - a.forwarded
    runs = b.net_rx_runs - a.net_rx_runs
    busy = 1 - (b.idle_s - a.idle_s) / wall
    sent = int(gen["sent"])
    return Sample(
        flows=flows,
        round=rnd,
        apply_s=apply_s,
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
    )


# ---- bpf_stats pass --------------------------------------------------------------------------


def mark_program(lab: Lab) -> Path:
    """The pinned marking program of r1's node manager (attached on r1's egress)."""
    found = sorted(lab.bpf_dir("r1").glob(f"progs/*/{MARK_PROGRAM}"))
    if len(found) != 1:
        raise BenchError(f"expected one pinned {MARK_PROGRAM} under {lab.bpf_dir('r1')}: {found}")
    return found[0]


def program_stats(path: Path) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of a pinned program (zeros while bpf_stats is off)."""
    info = json.loads(run(["bpftool", "-j", "prog", "show", "pinned", str(path)]).stdout)
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


def program_cost(lab: Lab, r1: R1, gen: Generator, timing: Timing, flows: int) -> float:
    """ns per run of the marking program with ``flows`` installed, under the same load."""
    r1.apply(flows)
    time.sleep(timing.settle_s)
    path = mark_program(lab)
    with bpf_stats():
        proc = gen.start(timing.rate, timing.warmup_s + timing.window_s + 0.2)
        time.sleep(timing.warmup_s)  # the steady state only, as in the main pass
        ns0, cnt0 = program_stats(path)
        time.sleep(timing.window_s)
        ns1, cnt1 = program_stats(path)
        Generator.result(proc)
    return (ns1 - ns0) / (cnt1 - cnt0) if cnt1 > cnt0 else float("nan")


def stats_pass(
    lab: Lab, r1: R1, gen: Generator, timing: Timing, flows: Sequence[int], rounds: int
) -> list[dict[str, Any]]:
    """The marking program's cost per configuration, interleaved like the main pass."""
    monitored = [n for n in flows if n > 0]
    costs: dict[int, list[float]] = {n: [] for n in monitored}
    for rnd in range(1, rounds + 1):
        for n in monitored:
            costs[n].append(program_cost(lab, r1, gen, timing, n))
            print(f"bpf_stats round {rnd} flows {n:>5}: {costs[n][-1]:.1f} ns/run", flush=True)
    return [{"flows": n, "ns_per_packet": quartiles(v), "samples": v} for n, v in costs.items()]


# ---- summary ---------------------------------------------------------------------------------


def quartiles(values: Sequence[float]) -> dict[str, float]:
    v = sorted(values)
    q1, q2, q3 = statistics.quantiles(v, n=4) if len(v) > 1 else (v[0], v[0], v[0])
    return {"min": v[0], "q1": q1, "median": q2, "q3": q3, "max": v[-1]}


def summarise(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Per configuration: medians and spread, capacity ratios to plain (of the medians, and
    the median of per-round ratios, which cancels drift between rounds)."""
    by_flows = {n: [s for s in samples if s.flows == n] for n in sorted({s.flows for s in samples})}
    plain = {s.round: s for s in by_flows.get(0, [])}
    plain_cap = median([s.capacity_pps for s in plain.values()])
    plain_ns = median([s.net_rx_ns_per_pkt for s in plain.values()])
    rows = []
    for n, group in by_flows.items():
        cap = median([s.capacity_pps for s in group])
        ns = median([s.net_rx_ns_per_pkt for s in group])
        paired = [s.capacity_pps / plain[s.round].capacity_pps for s in group if s.round in plain]
        pairs = [(plain[s.round], s) for s in group if s.round in plain]
        paired_ns = [p.net_rx_ns_per_pkt / s.net_rx_ns_per_pkt for p, s in pairs]
        added_ns = [s.net_rx_ns_per_pkt - p.net_rx_ns_per_pkt for p, s in pairs]
        rows.append(
            {
                "flows": n,
                "rounds": len(group),
                "offered_pps": median([s.offered_pps for s in group]),
                "forwarded_pps": median([s.forwarded_pps for s in group]),
                "loss": median([s.loss for s in group]),
                "loss_max": max(s.loss for s in group),
                "busy": quartiles([s.busy for s in group]),
                "capacity_pps": quartiles([s.capacity_pps for s in group]),
                "capacity_ratio": cap / plain_cap,
                "capacity_ratio_paired": quartiles(paired),
                "net_rx_ns_per_pkt": quartiles([s.net_rx_ns_per_pkt for s in group]),
                "net_rx_capacity_pps": 1e9 / ns,
                "net_rx_ratio": plain_ns / ns,
                "net_rx_ratio_paired": quartiles(paired_ns),
                "net_rx_added_ns_paired": quartiles(added_ns),
            }
        )
    return rows


def config_name(flows: int) -> str:
    if flows == EMPTY_HOOK:
        return "empty tc program"
    return "plain encap" if flows == 0 else f"{flows} flow{'s' if flows > 1 else ''}"


def span(q: dict[str, float], scale: float = 1.0, fmt: str = ".3f") -> str:
    """``median (q1-q3)``."""
    return f"{q['median'] / scale:{fmt}} ({q['q1'] / scale:{fmt}}-{q['q3'] / scale:{fmt}})"


def table(rows: Sequence[dict[str, Any]], costs: Sequence[dict[str, Any]]) -> str:
    """The figures as Markdown tables (pasted into docs/BENCHMARKS.md)."""
    lines = [
        "| config | offered kpps | forwarded kpps | loss | r1 core busy | capacity kpps "
        "| ratio to plain | paired ratio | NET_RX ns/pkt | NET_RX ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {config_name(r['flows'])} | {r['offered_pps'] / 1e3:.1f} "
            f"| {r['forwarded_pps'] / 1e3:.1f} | {r['loss']:.2%} (max {r['loss_max']:.2%}) "
            f"| {span(r['busy'])} | {span(r['capacity_pps'], 1e3, '.0f')} "
            f"| {r['capacity_ratio']:.3f} | {span(r['capacity_ratio_paired'])} "
            f"| {span(r['net_rx_ns_per_pkt'], 1, '.0f')} | {r['net_rx_ratio']:.3f} |"
        )
    net_rx = {r["flows"]: r["net_rx_ns_per_pkt"]["median"] for r in rows}
    lines += [
        "",
        "| config | srv6pm_mark ns/run (median, min-max) | share of r1's NET_RX ns/pkt |",
        "|---|---|---|",
    ]
    for c in costs:
        q = c["ns_per_packet"]
        share = q["median"] / net_rx[c["flows"]] if c["flows"] in net_rx else float("nan")
        lines.append(
            f"| {config_name(c['flows'])} | {q['median']:.1f} ({q['min']:.1f}-{q['max']:.1f}) "
            f"| {share:.1%} |"
        )
    return "\n".join(lines)


# ---- environment and the run -----------------------------------------------------------------


def environment() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    git = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    obj = ROOT / "node-manager/src/srv6pm/node_manager/bpf/monitor.o"
    return {
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "git": git,
        "monitor_o_sha256": hashlib.sha256(obj.read_bytes()).hexdigest() if obj.exists() else None,
        "netdev_max_backlog": int(Path("/proc/sys/net/core/netdev_max_backlog").read_text()),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--rate", type=int, default=250_000, help="offered load, packets/s (default: %(default)s)"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=20,
        help="measured rounds (after one warm-up) (default: %(default)s)",
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
        help="pause after each ApplyState, s (default: %(default)s)",
    )
    p.add_argument(
        "--stats-rounds",
        type=int,
        default=3,
        help="rounds of the bpf_stats pass (default: %(default)s)",
    )
    p.add_argument(
        "--flows",
        type=int,
        nargs="+",
        default=list(FLOW_COUNTS),
        help="configurations (default: %(default)s)",
    )
    p.add_argument(
        "--out", type=Path, default=RESULTS, help="results directory (default: %(default)s)"
    )
    args = p.parse_args(argv)
    if 0 not in args.flows:
        p.error("--flows must include 0 (plain encapsulation, the reference)")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def raise_on_signal(signum: int, _frame: object) -> NoReturn:
    raise SystemExit(f"stopped by signal {signum}")


def main_pass(
    r1: R1, gen: Generator, meters: Meters, timing: Timing, flows: Sequence[int], rounds: int
) -> list[Sample]:
    """Round 0 warms up (every configuration once, not kept); rounds 1..N are measured."""
    samples = []
    for rnd in range(rounds + 1):
        for n in flows:
            s = measure(r1, gen, meters, timing, n, rnd)
            print(
                f"round {rnd} flows {n:>5}: offered {s.offered_pps / 1e3:6.1f} kpps, "
                f"forwarded {s.forwarded_pps / 1e3:6.1f} kpps, loss {s.loss:.3%}, "
                f"busy {s.busy:.3f}, capacity {s.capacity_pps / 1e3:6.0f} kpps, "
                f"NET_RX {s.net_rx_ns_per_pkt:5.0f} ns/pkt, apply {s.apply_s:.2f} s"
                + (" (warm-up)" if rnd == 0 else ""),
                flush=True,
            )
            if rnd > 0:
                samples.append(s)
    return samples


def bench(
    args: argparse.Namespace, lab: Lab, pktgen: Path, probe_obj: Path, empty_obj: Path
) -> dict[str, Any]:
    timing = Timing(args.rate, args.warmup, args.window, args.settle)
    with contextlib.ExitStack() as cleanup:
        r1 = R1(lab, empty_obj)
        # closed before lab.down() stops the node manager: a server that closes a connection first
        # leaves its port in TIME_WAIT, and the next `lab.up()` would find it taken
        cleanup.callback(r1.close)
        r1.apply(0)  # the policy's route must exist before the first frame
        gen = Generator(lab, pktgen, prepare_network(lab))
        probe = NetRxProbe(probe_obj)
        cleanup.callback(probe.close)
        meters = Meters(lab, probe)
        cleanup.callback(meters.close)
        samples = main_pass(r1, gen, meters, timing, args.flows, args.rounds)
        costs = stats_pass(lab, r1, gen, timing, args.flows, args.stats_rounds)
    rows = summarise(samples)
    return {
        "settings": {**vars(args), "out": str(args.out), "frame_bytes": FRAME_BYTES},
        "samples": [asdict(s) for s in samples],
        "summary": rows,
        "ebpf_cost": costs,
        "table": table(rows, costs),
    }


def bindable(port: int, reuse: bool) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, int(reuse))
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for_port(port: int, timeout_s: float = 70.0) -> None:
    """Wait while ``port`` is held only by TIME_WAIT connections of an earlier run.

    The lab's pre-flight check binds without SO_REUSEADDR, so it refuses such a port for up to
    a minute, although the node manager could listen on it.
    """
    deadline = time.monotonic() + timeout_s
    while not bindable(port, reuse=False) and bindable(port, reuse=True):
        if time.monotonic() > deadline:
            return  # let the lab report it
        time.sleep(1)


@contextlib.contextmanager
def single_instance() -> Iterator[None]:
    """Refuse to run twice at once: both runs would share the lab prefix, ports and probe."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchError("another forwarding benchmark is running") from None
        yield


def run_lab(args: argparse.Namespace) -> dict[str, Any]:
    """Up, measure, down (always, even on failure or a signal)."""
    pktgen, probe_obj, empty_obj = build_tools()
    lab = Lab(Topology.load(TOPOLOGY), prefix=PREFIX, base_port=BASE_PORT)
    if lab.is_up():
        print(f"removing a lab {PREFIX!r} left by an earlier run", file=sys.stderr)
        lab.down()
    try:
        wait_for_port(BASE_PORT)
        lab.up()
        return bench(args, lab, pktgen, probe_obj, empty_obj)
    finally:
        for problem in lab.down():
            print(f"teardown: {problem}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("forwarding.py needs root (namespaces, eBPF)", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_on_signal)
    # This process and everything it starts (node manager, bpftool, ip, nft) stay off the
    # router core, so the router core's busy time is r1's forwarding.
    os.sched_setaffinity(0, {GEN_CORE})
    started = time.time()
    try:
        with single_instance():
            result = run_lab(args)
    except (BenchError, LabError) as e:
        print(f"forwarding.py: {e}", file=sys.stderr)
        return 1
    result["environment"] = environment()
    result["wall_s"] = time.time() - started
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"forwarding-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{result['table']}\n\nresults: {path}; wall time {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
