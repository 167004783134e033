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
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/forwarding.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import ipaddress
import json
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import grpc
from scapy.layers.inet import UDP
from scapy.layers.inet6 import HBHOptUnknown, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from srv6pm.lab import Lab, LabError, Topology
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc
from srv6pm.proto.v1 import records_pb2

from bench.harness import generators, provenance, trials
from bench.harness.bpf import NetRxProbe, bpf_stats, program_stats
from bench.harness.meters import backlog_drops, cpu_times, process_cpu_s, wait_idle
from bench.harness.pinning import LOAD_CORE, MEASURED_CORE, rps_command, taskset
from bench.harness.report import quartile_span, yes_no
from bench.harness.run import RESULTS, BenchError, Run, execute, progress
from bench.harness.stats import median, paired, quartiles
from bench.harness.topology import NetnsCounters, lab_running, read_mac, sh, single_instance

HERE = Path(__file__).resolve().parent
TOPOLOGY = HERE / "forwarding.yaml"
PREFIX = "bzfwd"  # lab namespaces, nft table, probe pins (--prefix)
BASE_PORT = 52000
LOCK = generators.BIN / "forwarding.lock"

GEN_CORE = LOAD_CORE  # generator, sink receive, node manager, this script
ROUTER_CORE = MEASURED_CORE  # r1's receive and forwarding (RPS)

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

STATS_FIELDS = (
    "counted",
    "not_srv6",
    "unmarked",
    "no_flow",
    "parse_error",
    "foreign_mark",
    "mark_failed",
)


# ---- counters at the edges of a window ---------------------------------------------------------


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
            process_cpu_s(self._node_manager, children=True) or 0.0,
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


def prepare_network(lab: Lab, prefix: str) -> tuple[str, str]:
    """RPS, the sink's drop, r1's neighbour entry, clsact qdiscs; returns (gen's MAC, r1's MAC
    toward gen)."""
    r1_in, r1_out = lab.interface("r1", "gen"), lab.interface("r1", "sink")
    sink_in = lab.interface("sink", "r1")
    # r1's receive and forwarding on the router core, away from the generator.
    sh(lab, "r1", rps_command(r1_in, ROUTER_CORE))
    # veth delivers on the transmitting CPU: without this the sink's receive would run on the
    # router core and be counted as r1's work.
    sh(lab, "sink", rps_command(sink_in, GEN_CORE))
    # The sink drops everything at once, on the netdev ingress hook (this kernel has neither
    # cls_matchall nor act_gact); it only counts, with its interface rx counter.
    ruleset = (
        f"table netdev {prefix} {{\n  chain sink {{\n"
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
        self._argv = taskset(GEN_CORE, [str(binary), "--ifname", gen_if])

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
            by_round = [(s.round, s) for s in group]
            paired_cap = quartiles(
                paired(base, by_round, lambda p, s: s.capacity_pps / p.capacity_pps)
            )
            paired_ns = quartiles(
                paired(base, by_round, lambda p, s: p.net_rx_ns_per_pkt / s.net_rx_ns_per_pkt)
            )
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
                    "capacity_ratio_paired": paired_cap,
                    "net_rx_ns_per_pkt": quartiles([s.net_rx_ns_per_pkt for s in group]),
                    "net_rx_ratio": base_ns / ns,
                    "net_rx_ratio_paired": paired_ns,
                    "net_rx_added_ns_paired": quartiles(
                        paired(
                            base, by_round, lambda p, s: s.net_rx_ns_per_pkt - p.net_rx_ns_per_pkt
                        )
                    ),
                    "ebpf_ns_per_run": cost.get((g.role, g.n, cfg.name)),
                    "stats": stats,
                    "counted_over_received": (
                        stats["counted"] / sum(s.received for s in group) if cfg.flows else None
                    ),
                    "counting_ok_rounds": sum(s.counting_ok for s in group),
                    "meets_target": (
                        paired_cap["median"] >= TARGET if cfg.name != cfg.baseline else None
                    ),
                    "meets_target_net_rx": (
                        paired_ns["median"] >= TARGET if cfg.name != cfg.baseline else None
                    ),
                }
            )
    return rows


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
        paired_text = "-" if plain else quartile_span(r["capacity_ratio_paired"])
        paired_ns = "-" if plain else quartile_span(r["net_rx_ratio_paired"])
        target = (
            "-" if plain else f"{yes_no(r['meets_target'])} / {yes_no(r['meets_target_net_rx'])}"
        )
        lines.append(
            f"| {r['role']} | {r['n']} | {r['config']} | {r['frame_bytes']} "
            f"| {r['offered_pps'] / 1e3:.1f} | {r['forwarded_pps'] / 1e3:.1f} | {loss} "
            f"| {quartile_span(r['busy'])} | {quartile_span(r['capacity_pps'], 1e3, '.0f')} "
            f"| {ratio} | {paired_text} "
            f"| {quartile_span(r['net_rx_ns_per_pkt'], 1, '.0f')} | {paired_ns} | {ebpf_text} "
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


def environment() -> dict[str, Any]:
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
            cfgs = configs(role, n, args.modes, args.empty_hook_at)
            applies = len(cfgs) * (args.rounds + 1) + sum(c.monitored for c in cfgs) * max(
                args.stats_rounds, 0
            )
            total += applies * (per + n / 10000 * (10.0 if role == "ingress" else 1.5))
    return total


def bench(
    args: argparse.Namespace, lab: Lab, pktgen: Path, probe_obj: Path, empty_obj: Path
) -> dict[str, Any]:
    """Every group, then the summary, the table and the warnings."""
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


def run_lab(args: argparse.Namespace) -> dict[str, Any]:
    """Up, measure, down (always, even on failure or a signal)."""
    pktgen = generators.pktgen()
    probe_obj, empty_obj = generators.bpf_object("softirq"), generators.bpf_object("empty")
    lab = Lab(Topology.load(TOPOLOGY), prefix=args.prefix, base_port=BASE_PORT)
    with single_instance(LOCK, "forwarding benchmark"), lab_running(lab, BASE_PORT):
        return bench(args, lab, pktgen, probe_obj, empty_obj)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run = Run("forwarding", "bench/forwarding.py")

    def measure(_run: Run) -> dict[str, Any]:
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
