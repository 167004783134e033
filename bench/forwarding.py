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

Run as root: ``python bench/forwarding.py`` (``--help`` for the knobs; progress on stderr, the
table on stdout). Method: docs/BENCHMARKS.md. Raw data: bench/results/forwarding-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import ipaddress
import json
import os
import platform
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, TextIO

import grpc
from machine import machine  # bench/machine.py, beside this script
from scapy.layers.inet import UDP
from scapy.layers.inet6 import HBHOptUnknown, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from srv6pm.lab import Lab, LabError, Topology
from srv6pm.node_manager.drivers.linux.bpftool import bpf_syscall, obj_get
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc
from srv6pm.proto.v1 import records_pb2

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

ROLES = ("ingress", "transit")
SIZES = (1, 16, 1000, 10000)  # policies (ingress) or flows (both roles) per group
MAX_SIZE = 16384  # the data plane's flow limit; the SIDs below also hold i in 16 bits
MODES = ("altmark", "dscp")
MODE_PB = {"altmark": pb.MARKING_MODE_ALTMARK, "dscp": pb.MARKING_MODE_DSCP}
PROGRAM = {"ingress": "srv6pm_mark", "transit": "srv6pm_count"}
TARGET = 0.98  # capacity with monitoring / plain capacity, at every N and role

GEN_SRC = "fd00:1::2"  # gen: the customer's source, and the upstream head-end's (transit)
END_SID = "fc00:0:1::e"  # r1's End SID (transit role)
UDP_PORT = 9000
PAYLOAD = bytes(range(16))  # 78-octet Ethernet/IPv6/UDP frames, as before
DSCP_MARKED = 0x0C  # outer Traffic Class of DSCP-marked transit frames: monitored | colour bit
ALTMARK_COLOUR = 0  # L bit of the transit frames' AltMark option (constant)
FRAME_BYTES = {"ip": 78, "altmark": 166, "dscp": 158}  # gen -> r1, on the wire

# bpf(2) commands used directly: bpftool 7.1 can neither attach raw tracepoints nor hold
# BPF_ENABLE_STATS open (an fd that turns bpf_stats off by itself when this process dies).
BPF_MAP_LOOKUP_ELEM = 1
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0

STATS_FIELDS = (
    "counted",
    "not_srv6",
    "unmarked",
    "no_flow",
    "parse_error",
    "foreign_mark",
    "mark_failed",
)


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


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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
    node_manager_cpu_s: float  # r1's node manager (it shares the generator's core)


def process_cpu_s(pid: int) -> float:
    """CPU time of a process (all its threads, and its children once they have exited)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(x) for x in fields[11:15]) / USER_HZ  # utime stime cutime cstime


def wait_idle(pid: int, min_s: float, quiet_s: float = 0.3, max_s: float = 10.0) -> float:
    """Wait at least ``min_s``, then until ``pid`` used (almost) no CPU for ``quiet_s``, at
    most ``max_s`` in all; returns the time waited. After a large ApplyState the node manager
    keeps working for a while on the generator's core, which makes the generator fall behind."""
    start = time.monotonic()
    time.sleep(min_s)
    while time.monotonic() - start < max_s:
        before = process_cpu_s(pid)
        time.sleep(quiet_s)
        if process_cpu_s(pid) - before <= 0.02:
            break
    return time.monotonic() - start


class Meters:
    """Everything sampled at the edges of a measurement window."""

    def __init__(self, lab: Lab, probe: NetRxProbe, node_manager: int) -> None:
        self._probe = probe
        self._node_manager = node_manager
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
            t,
            idle,
            ticked,
            net_rx_ns,
            runs,
            gen["tx"] + gen["tx_drop"],
            sink["rx"],
            drops,
            process_cpu_s(self._node_manager),
        )

    def close(self) -> None:
        self._gen.close()
        self._sink.close()


# ---- addresses and frames --------------------------------------------------------------------


def destination(i: int) -> str:
    """The customer destination of policy (ingress) or flow (transit) i."""
    return f"fd00:2::{i + 1:x}"


def ingress_sids(i: int) -> tuple[str, str]:
    """SID list of r1's policy i (ingress role); fc00:0:2::/48 is routed to sink."""
    return (f"fc00:0:2:{i:x}::e", "fc00:0:3::d6")


def transit_sids(i: int) -> tuple[str, str]:
    """SID list of flow i as the upstream head-end built it (transit role): r1's End SID, then
    a SID of fc00:0:3::/48, routed to sink."""
    return (END_SID, f"fc00:0:3:{i:x}::d6")


def altmark_data(flow_mon_id: int) -> bytes:
    """RFC 9343 AltMark option data: FlowMonID (20 bits), L, D = 0, 10 reserved bits."""
    return (flow_mon_id << 12 | ALTMARK_COLOUR << 11).to_bytes(4, "big")


def scapy_frame(kind: str, i: int, src_mac: str, dst_mac: str) -> bytes:
    """Frame i of a kind, built by scapy: "ip" (plain IPv6/UDP to destination i, for the ingress
    role), "altmark" or "dscp" (what an upstream head-end sends for flow i after H.Encaps and
    marking: outer IPv6 to r1's End SID, [AltMark Destination Options header,] SRH with
    Segments Left 1, the customer's IPv6/UDP packet)."""
    inner = IPv6(src=GEN_SRC, dst=destination(i)) / UDP(sport=UDP_PORT, dport=UDP_PORT)
    inner = inner / Raw(PAYLOAD)
    eth = Ether(src=src_mac, dst=dst_mac)
    if kind == "ip":
        return bytes(eth / inner)
    outer = IPv6(src=GEN_SRC, dst=END_SID, tc=DSCP_MARKED if kind == "dscp" else 0)
    srh = IPv6ExtHdrSegmentRouting(addresses=list(reversed(transit_sids(i))), segleft=1)
    if kind == "altmark":
        option = HBHOptUnknown(otype=0x12, optlen=4, optdata=altmark_data(i + 1))
        return bytes(eth / outer / IPv6ExtHdrDestOpt(options=[option]) / srh / inner)
    return bytes(eth / outer / srh / inner)


def _ones_sum(data: bytes) -> int:
    words: tuple[int, ...] = struct.unpack(f"!{len(data) // 2}H", data[: len(data) & ~1])
    total = sum(words)
    if len(data) & 1:
        total += data[-1] << 8
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def build_frames(kind: str, n: int, src_mac: str, dst_mac: str) -> list[bytes]:
    """Frames 0..n-1 of a kind: scapy builds frame 0, the others are copies with the addresses,
    the AltMark option and the UDP checksum rewritten (scapy takes ~1 ms a frame). A few are
    checked against scapy's own."""
    template = scapy_frame(kind, 0, src_mac, dst_mac)
    inner = 14 if kind == "ip" else 14 + 40 + (8 if kind == "altmark" else 0) + 8 + 32
    udp = inner + 40
    frames = []
    for i in range(n):
        f = bytearray(template)
        f[inner + 24 : inner + 40] = ipaddress.IPv6Address(destination(i)).packed
        if kind != "ip":  # the SRH's Segment List[0]: the last SID
            f[inner - 32 : inner - 16] = ipaddress.IPv6Address(transit_sids(i)[1]).packed
        if kind == "altmark":
            f[14 + 40 + 4 : 14 + 40 + 8] = altmark_data(i + 1)
        f[udp + 6 : udp + 8] = b"\0\0"
        pseudo = bytes(f[inner + 8 : inner + 40]) + struct.pack("!IxxxB", len(f) - udp, 17)
        checksum = 0xFFFF - _ones_sum(pseudo + bytes(f[udp:]))
        f[udp + 6 : udp + 8] = (checksum or 0xFFFF).to_bytes(2, "big")
        frames.append(bytes(f))
    for i in sorted({0, n // 2, n - 1}):
        if frames[i] != scapy_frame(kind, i, src_mac, dst_mac):
            raise BenchError(f"frame {i} of kind {kind} differs from scapy's")
    if len(template) != FRAME_BYTES[kind]:
        raise BenchError(f"{kind} frames are {len(template)} octets, not {FRAME_BYTES[kind]}")
    return frames


def write_frames(path: Path, frames: Sequence[bytes]) -> Path:
    """The file pktgen --frames reads: each frame preceded by its length (2 octets, big end)."""
    path.write_bytes(b"".join(len(f).to_bytes(2, "big") + f for f in frames))
    return path


# ---- configurations --------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One configuration of r1 within a (role, N) group."""

    name: str
    frames: str  # frame kind the generator sends: "ip", "altmark", "dscp"
    mode: str  # r1's marking mode
    flows: bool  # N monitored flows installed (else none)
    empty_hook: bool  # an empty tc program on the hook the monitoring would use
    baseline: str  # the plain configuration it is compared with (itself for a plain one)

    @property
    def monitored(self) -> bool:
        return self.flows or self.empty_hook


def configs(role: str, n: int, modes: Sequence[str], empty_hook_at: Sequence[int]) -> list[Config]:
    """The configurations of a group, in the order a round applies them. Plain first; between
    two monitored configurations there is a change of mode or a plain one, so every monitored
    sample starts with freshly installed flows (counters from zero)."""
    empty = n in empty_hook_at
    if role == "ingress":
        out = [Config("plain", "ip", modes[0], False, False, "plain")]
        if empty:
            out.append(Config("empty hook", "ip", modes[0], False, True, "plain"))
        out += [Config(m, "ip", m, True, False, "plain") for m in modes]
        return out
    # transit: each mode has its frames (the AltMark header makes them 8 octets longer), so
    # each has its own plain baseline with the same frames
    out = []
    for m in modes:
        plain = f"plain/{m}"
        out.append(Config(plain, m, m, False, False, plain))
        if empty and m == modes[0]:
            out.append(Config(f"empty hook/{m}", m, m, False, True, plain))
        out.append(Config(m, m, m, True, False, plain))
    return out


class Group:
    """A role and a size N: r1's policies or End SID, the flows, the generator's frames."""

    def __init__(
        self, role: str, n: int, cfgs: Sequence[Config], r1_gen_if: str, r1_sink_if: str
    ) -> None:
        self.role = role
        self.n = n
        self.configs = list(cfgs)
        hook_if = r1_sink_if if role == "ingress" else r1_gen_if
        # (device, direction) of the monitoring hook: egress toward sink for the marking
        # program, ingress from gen for the counting one
        self.hook = (hook_if, "egress" if role == "ingress" else "ingress")
        sids = ingress_sids if role == "ingress" else transit_sids
        pb_role = records_pb2.ROLE_INGRESS if role == "ingress" else records_pb2.ROLE_TRANSIT
        self.flows = [
            pb.MonitoredFlow(
                name=flow_name(i),
                segments=sids(i),
                role=pb_role,
                interfaces=[hook_if],
                flow_mon_id=i + 1,
            )
            for i in range(n)
        ]
        self.policies = (
            [
                pb.SrPolicy(
                    name=flow_name(i),
                    prefix=f"{destination(i)}/128",
                    segments=ingress_sids(i),
                    mode=pb.ENCAP_MODE_ENCAP,
                )
                for i in range(n)
            ]
            if role == "ingress"
            else []
        )
        self.local_sids = (
            [pb.LocalSid(sid=END_SID, behaviour=pb.BEHAVIOUR_END)] if role == "transit" else []
        )
        self.frame_files: dict[str, Path] = {}

    @property
    def label(self) -> str:
        return f"{self.role} N={self.n}"

    def state(self, cfg: Config) -> pb.NodeState:
        return pb.NodeState(
            marking=pb.MarkingSettings(mode=MODE_PB[cfg.mode]),
            policies=self.policies,
            local_sids=self.local_sids,
            flows=self.flows if cfg.flows else [],
        )

    def write_frames(self, directory: Path, src_mac: str, dst_mac: str) -> None:
        for kind in sorted({c.frames for c in self.configs}):
            frames = build_frames(kind, self.n, src_mac, dst_mac)
            path = directory / f"frames-{self.role}-{kind}-{self.n}.bin"
            self.frame_files[kind] = write_frames(path, frames)


def flow_name(i: int) -> str:
    return f"bench-{i:05d}"


# ---- the lab and r1 --------------------------------------------------------------------------


@dataclass(frozen=True)
class Counted:
    """What ReadCounters said: the programs' stats, and the counters of the flows asked for."""

    stats: dict[str, int]
    flows_hit: int = 0  # flows with at least one packet counted
    flow_packets: int = 0  # packets over all flows and colours


class R1:
    """r1's node manager, through gRPC only, and the benchmark's own empty program."""

    def __init__(self, lab: Lab, empty_program: Path) -> None:
        self._lab = lab
        self._empty = empty_program
        self._empty_on: tuple[str, str] | None = None
        options = [
            ("grpc.enable_http_proxy", 0),
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.max_receive_message_length", 64 << 20),
        ]
        self._channel = grpc.insecure_channel(lab.grpc_address("r1"), options=options)
        self._stub = pb_grpc.NodeManagerStub(self._channel)
        pid = lab.pid("r1")
        if pid is None:
            raise BenchError("r1's node manager is not running")
        self.pid = pid

    def apply(self, state: pb.NodeState, empty_hook: tuple[str, str] | None = None) -> float:
        """Converge r1 to ``state``, with the empty program on ``empty_hook`` (device,
        direction) or nowhere; seconds it took."""
        start = time.monotonic()
        self._stub.ApplyState(pb.ApplyStateRequest(desired=state), timeout=600)
        if empty_hook != self._empty_on:
            self._set_empty_hook(empty_hook)
        return time.monotonic() - start

    def _set_empty_hook(self, hook: tuple[str, str] | None) -> None:
        # tc(8) here: this is the benchmark's own program, not the node manager's (prio 1, its
        # own handle, so the node manager's filter is never touched)
        if self._empty_on:
            dev, direction = self._empty_on
            self._lab.exec(
                "r1",
                ["tc", "filter", "del", "dev", dev, direction, "prio", "1"],
                capture_output=True,
            )
            self._empty_on = None
        if hook:
            dev, direction = hook
            sh(
                self._lab,
                "r1",
                f"tc filter add dev {dev} {direction} prio 1 handle 1 bpf da "
                f"obj {self._empty} sec tc",
            )
            self._empty_on = hook

    def empty_program_id(self) -> int:
        """The kernel's id of the attached empty program (for bpf_stats)."""
        if not self._empty_on:
            raise BenchError("no empty program is attached")
        dev, direction = self._empty_on
        r = self._lab.exec(
            "r1",
            ["tc", "-j", "filter", "show", "dev", dev, direction, "prio", "1"],
            capture_output=True,
            text=True,
        )
        for f in json.loads(r.stdout or "[]"):
            prog = f.get("options", {}).get("prog", {})
            if "id" in prog:
                return int(prog["id"])
        raise BenchError(f"cannot find the empty program on {dev} {direction}: {r.stdout}")

    def counters(self, names: Sequence[str]) -> Counted:
        """The programs' stats and the counters of the flows ``names`` (empty: every flow)."""
        reply = self._stub.ReadCounters(pb.ReadCountersRequest(flows=names), timeout=120)
        stats = {name: int(getattr(reply.stats, name)) for name in STATS_FIELDS}
        totals = [sum(c.packets for c in f.colours) for f in reply.flows]
        return Counted(stats, sum(1 for t in totals if t), sum(totals))

    def close(self) -> None:
        self._channel.close()


def sh(lab: Lab, node: str, command: str) -> None:
    r = lab.exec(node, ["sh", "-c", command], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"{node}: `{command}` failed: {r.stderr.strip()}")


def prepare_network(lab: Lab) -> tuple[str, str]:
    """RPS, the sink's drop, r1's neighbour entry, clsact qdiscs; returns (gen's MAC, r1's MAC
    toward gen)."""
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
    # Both hooks' clsact qdiscs exist from the start, as on a router where monitoring was
    # configured once: every configuration, plain included, has them (the node manager creates
    # them when it first attaches and never removes them).
    for dev in (r1_in, r1_out):
        sh(lab, "r1", f"tc qdisc replace dev {dev} clsact")
    return read_mac(lab, "gen", lab.interface("gen", "r1")), read_mac(lab, "r1", r1_in)


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
        gen_if = lab.interface("gen", "r1")
        self._argv = ["taskset", "-c", str(GEN_CORE), str(binary), "--ifname", gen_if]

    def start(self, frames: Path, rate: int, duration_s: float) -> subprocess.Popen[str]:
        argv = [*self._argv, "--frames", str(frames), "--rate", str(rate)]
        argv += ["--duration", f"{duration_s:.3f}"]
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
    gen: dict[str, Any],
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
    samples = []
    for rnd in range(rounds + 1):
        for cfg in group.configs:
            s = measure(r1, gen, meters, timing, group, cfg, rnd)
            progress(
                f"{group.label} round {rnd} {cfg.name:>16}: {describe(s)}"
                + (" (warm-up)" if rnd == 0 else "")
            )
            if rnd > 0:
                samples.append(s)
    return samples


# ---- bpf_stats pass --------------------------------------------------------------------------


def pinned_program(lab: Lab, name: str) -> Path:
    """A pinned program of r1's node manager."""
    found = sorted(lab.bpf_dir("r1").glob(f"progs/*/{name}"))
    if len(found) != 1:
        raise BenchError(f"expected one pinned {name} under {lab.bpf_dir('r1')}: {found}")
    return found[0]


def program_stats(program: Path | int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of a pinned program or a program id (zeros while bpf_stats is
    off)."""
    which = ["pinned", str(program)] if isinstance(program, Path) else ["id", str(program)]
    info = json.loads(run(["bpftool", "-j", "prog", "show", *which]).stdout)
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


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
) -> list[dict[str, Any]]:
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


# ---- summary ---------------------------------------------------------------------------------


def quartiles(values: Sequence[float]) -> dict[str, float]:
    v = sorted(values)
    q1, q2, q3 = statistics.quantiles(v, n=4) if len(v) > 1 else (v[0], v[0], v[0])
    return {"min": v[0], "q1": q1, "median": q2, "q3": q3, "max": v[-1]}


def summarise(
    groups: Sequence[Group], samples: Sequence[Sample], costs: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per (role, N, configuration): medians and spread; capacity and NET_RX ratios to the
    plain configuration with the same frames (of the medians, and the median of per-round
    ratios, which cancels drift between rounds); the counters' check; the target."""
    cost = {(c["role"], c["n"], c["config"]): c["ns_per_run"] for c in costs}
    rows = []
    for g in groups:
        by_cfg = {
            c.name: [s for s in samples if (s.role, s.n, s.config) == (g.role, g.n, c.name)]
            for c in g.configs
        }
        for cfg in g.configs:
            group = by_cfg[cfg.name]
            if not group:
                continue
            base = {s.round: s for s in by_cfg[cfg.baseline]}
            base_cap = median([s.capacity_pps for s in base.values()])
            base_ns = median([s.net_rx_ns_per_pkt for s in base.values()])
            cap = median([s.capacity_pps for s in group])
            ns = median([s.net_rx_ns_per_pkt for s in group])
            pairs = [(base[s.round], s) for s in group if s.round in base]
            paired = quartiles([s.capacity_pps / p.capacity_pps for p, s in pairs])
            paired_ns = quartiles([p.net_rx_ns_per_pkt / s.net_rx_ns_per_pkt for p, s in pairs])
            stats = {k: sum(s.stats.get(k, 0) for s in group) for k in STATS_FIELDS}
            rows.append(
                {
                    "role": g.role,
                    "n": g.n,
                    "config": cfg.name,
                    "baseline": cfg.baseline,
                    "frames": cfg.frames,
                    "frame_bytes": FRAME_BYTES[cfg.frames],
                    "monitored": cfg.monitored,
                    "rounds": len(group),
                    "offered_pps": median([s.offered_pps for s in group]),
                    "forwarded_pps": median([s.forwarded_pps for s in group]),
                    "loss": median([s.loss for s in group]),
                    "loss_max": max(s.loss for s in group),
                    "backlog_drops": sum(s.backlog_drops for s in group),
                    "gen_schedule_resets": median([s.gen_schedule_resets for s in group]),
                    "node_manager_cpu": median([s.node_manager_cpu for s in group]),
                    "apply_s": median([s.apply_s for s in group]),
                    "settle_s": median([s.settle_s for s in group]),
                    "busy": quartiles([s.busy for s in group]),
                    "capacity_pps": quartiles([s.capacity_pps for s in group]),
                    "capacity_ratio": cap / base_cap,
                    "capacity_ratio_paired": paired,
                    "net_rx_ns_per_pkt": quartiles([s.net_rx_ns_per_pkt for s in group]),
                    "net_rx_ratio": base_ns / ns,
                    "net_rx_ratio_paired": paired_ns,
                    "net_rx_added_ns_paired": quartiles(
                        [s.net_rx_ns_per_pkt - p.net_rx_ns_per_pkt for p, s in pairs]
                    ),
                    "ebpf_ns_per_run": cost.get((g.role, g.n, cfg.name)),
                    "stats": stats,
                    "counted_over_received": (
                        stats["counted"] / sum(s.received for s in group) if cfg.flows else None
                    ),
                    "counting_ok_rounds": sum(s.counting_ok for s in group),
                    "meets_target": (
                        paired["median"] >= TARGET if cfg.name != cfg.baseline else None
                    ),
                    "meets_target_net_rx": (
                        paired_ns["median"] >= TARGET if cfg.name != cfg.baseline else None
                    ),
                }
            )
    return rows


def span(q: dict[str, float], scale: float = 1.0, fmt: str = ".3f") -> str:
    """``median (q1-q3)``."""
    return f"{q['median'] / scale:{fmt}} ({q['q1'] / scale:{fmt}}-{q['q3'] / scale:{fmt}})"


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "**NO**")


def counting_cell(r: dict[str, Any]) -> str:
    """Monitored flows: did the counters count every packet? Otherwise: did no program of the
    node manager see any (plain forwarding really is plain)?"""
    rounds, ok = r["rounds"], r["counting_ok_rounds"]
    ratio = r["counted_over_received"]
    if ok == rounds:
        return f"yes ({ok}/{rounds})" if ratio is not None else "-"
    odd = {k: v for k, v in r["stats"].items() if v and k != "counted"}
    ratio_text = f"counted/forwarded {ratio:.4f}, " if ratio is not None else ""
    return f"**NO** ({ok}/{rounds} rounds ok; {ratio_text}{odd})"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The figures as a Markdown table (pasted into docs/BENCHMARKS.md)."""
    lines = [
        "| role | N | config | frame B | offered kpps | forwarded kpps | loss | r1 core busy "
        "| capacity kpps | ratio to plain | paired ratio | NET_RX ns/pkt | NET_RX paired ratio "
        "| eBPF ns/run | every packet counted | >= 0.98 (capacity / NET_RX) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        loss = "0" if r["loss_max"] <= 0 else f"**{r['loss']:.3%} (max {r['loss_max']:.3%})**"
        ebpf = r["ebpf_ns_per_run"]
        ebpf_text = f"{ebpf['median']:.1f} ({ebpf['min']:.1f}-{ebpf['max']:.1f})" if ebpf else "-"
        plain = r["config"] == r["baseline"]
        ratio = "1.000" if plain else f"{r['capacity_ratio']:.3f}"
        paired = "-" if plain else span(r["capacity_ratio_paired"])
        paired_ns = "-" if plain else span(r["net_rx_ratio_paired"])
        target = (
            "-" if plain else f"{yes_no(r['meets_target'])} / {yes_no(r['meets_target_net_rx'])}"
        )
        lines.append(
            f"| {r['role']} | {r['n']} | {r['config']} | {r['frame_bytes']} "
            f"| {r['offered_pps'] / 1e3:.1f} | {r['forwarded_pps'] / 1e3:.1f} | {loss} "
            f"| {span(r['busy'])} | {span(r['capacity_pps'], 1e3, '.0f')} | {ratio} | {paired} "
            f"| {span(r['net_rx_ns_per_pkt'], 1, '.0f')} | {paired_ns} | {ebpf_text} "
            f"| {counting_cell(r)} | {target} |"
        )
    return "\n".join(lines)


def warnings(rows: Sequence[dict[str, Any]], rate: int) -> list[str]:
    out = []
    for r in rows:
        where = f"{r['role']} N={r['n']} {r['config']}"
        if r["offered_pps"] < 0.97 * rate:
            out.append(
                f"{where}: the generator offered {r['offered_pps'] / 1e3:.0f} of "
                f"{rate / 1e3:.0f} kpps (median; {r['gen_schedule_resets']} schedule resets)"
            )
        if r["loss_max"] > 0:
            out.append(f"{where}: loss in some rounds (max {r['loss_max']:.3%}): lower --rate")
        if r["counting_ok_rounds"] != r["rounds"]:
            out.append(f"{where}: counters disagree with the packets forwarded: {r['stats']}")
    return out


# ---- environment and the run -----------------------------------------------------------------


def environment() -> dict[str, Any]:
    obj = ROOT / "node-manager/src/srv6pm/node_manager/bpf/monitor.o"
    return {
        **machine(),
        "monitor_o_sha256": hashlib.sha256(obj.read_bytes()).hexdigest() if obj.exists() else None,
        "netdev_max_backlog": int(Path("/proc/sys/net/core/netdev_max_backlog").read_text()),
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
        "--out", type=Path, default=RESULTS, help="results directory (default: %(default)s)"
    )
    args = p.parse_args(argv)
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


def raise_on_signal(signum: int, _frame: object) -> NoReturn:
    raise SystemExit(f"stopped by signal {signum}")


def estimate_s(args: argparse.Namespace) -> float:
    """Rough wall time of a run: the measurements, and ApplyState times as measured here
    (10,000 policies make every ingress ApplyState take ~5-15 s: ~10 s on average)."""
    per = args.settle + 0.3 + args.warmup + args.window + 0.2 + 0.2 + 0.3
    total = 0.0
    for role in args.roles:
        for n in args.sizes:
            cfgs = configs(role, n, args.modes, args.empty_hook_at)
            applies = len(cfgs) * (args.rounds + 1) + sum(c.monitored for c in cfgs) * max(
                args.stats_rounds, 0
            )
            total += applies * (per + n / 10000 * (10.0 if role == "ingress" else 1.5))
    return total


def bench(
    args: argparse.Namespace, lab: Lab, pktgen: Path, probe_obj: Path, empty_obj: Path
) -> dict[str, Any]:
    timing = Timing(args.rate, args.warmup, args.window, args.settle)
    samples: list[Sample] = []
    costs: list[dict[str, Any]] = []
    groups: list[Group] = []
    group_info: list[dict[str, Any]] = []
    with contextlib.ExitStack() as cleanup:
        r1 = R1(lab, empty_obj)
        # closed before lab.down() stops the node manager: a server that closes a connection first
        # leaves its port in TIME_WAIT, and the next `lab.up()` would find it taken
        cleanup.callback(r1.close)
        gen_mac, r1_mac = prepare_network(lab)
        gen = Generator(lab, pktgen)
        probe = NetRxProbe(probe_obj)
        cleanup.callback(probe.close)
        meters = Meters(lab, probe, r1.pid)
        cleanup.callback(meters.close)
        frames_dir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="bzfwd-")))
        r1_gen_if, r1_sink_if = lab.interface("r1", "gen"), lab.interface("r1", "sink")
        started = time.monotonic()
        for role in args.roles:
            for n in args.sizes:
                cfgs = configs(role, n, args.modes, args.empty_hook_at)
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
        progress(f"removing a lab {PREFIX!r} left by an earlier run")
        lab.down()
    try:
        wait_for_port(BASE_PORT)
        lab.up()
        return bench(args, lab, pktgen, probe_obj, empty_obj)
    finally:
        for problem in lab.down():
            progress(f"teardown: {problem}")


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
    progress(
        f"forwarding.py: roles {args.roles}, N {args.sizes}, modes {args.modes}, "
        f"{args.rounds} rounds + warm-up, {args.stats_rounds} bpf_stats rounds; about "
        f"{estimate_s(args) / 60:.0f} min plus ApplyState time"
    )
    started = time.time()
    env_start = environment()
    try:
        with single_instance():
            result = run_lab(args)
    except (BenchError, LabError) as e:
        print(f"forwarding.py: {e}", file=sys.stderr)
        return 1
    except grpc.RpcError as e:
        print(f"forwarding.py: gRPC call to r1 failed: {e}", file=sys.stderr)
        return 1
    result["environment"] = {**environment(), "loadavg_start": env_start["loadavg"]}
    result["wall_s"] = time.time() - started
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"forwarding-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{result['table']}\n")
    for w in result["warnings"]:
        print(f"WARNING: {w}")
    print(f"results: {path}; wall time {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
