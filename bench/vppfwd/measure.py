"""A (role, N) group on a fresh VPP (policies or End SID, flows, the frames of its streams),
its configurations, and one measurement: a fixed number of packets through VPP, the clocks of
every node of the path from the stats segment, the plugin's counters checked."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.fwd.common import END_SID
from bench.fwd.frames import build_frames, destination, ingress_sids, transit_sids
from bench.vppfwd.router import GEN_MAC, IN_IF, OUT_IF, PLUGIN_FIELDS, Nodes, Router

GENERATOR_NODE = "pg-input"
PLUGIN_NODE = {"ingress": "srv6pm-mark", "transit": "srv6pm-count"}
HOOK = {"ingress": ("mark", OUT_IF), "transit": ("count", IN_IF)}  # node and interface
ROLE = {"ingress": 1, "transit": 2}  # srv6pm.api's srv6pm_role


@dataclass(frozen=True)
class Config:
    """One configuration of a group: the frames pg sends, the marking mode, whether the
    plugin's node is on the hook (with the group's N flows), the plain one it is compared with."""

    name: str
    frames: str  # "ip", "altmark", "dscp" (bench/fwd/frames.py)
    mode: str
    hooked: bool
    baseline: str
    empty: bool = False  # hooked, but the plugin not configured (period 0): the hook's floor


def configs(role: str, modes: Sequence[str], empty_hook: bool) -> list[Config]:
    """A group's configurations in the order of a round: plain first; on transit each mode has
    its frames (the AltMark header makes them 8 octets longer) and its own plain baseline.
    ``empty_hook``: also the plugin's node hooked but not configured (it passes every packet
    on untouched), the cost of a feature node there, compared with the first plain one."""
    if role == "ingress":
        out = [Config("plain", "ip", modes[0], False, "plain")]
        if empty_hook:
            out.append(Config("empty hook", "ip", modes[0], True, "plain", True))
        return out + [Config(m, "ip", m, True, "plain") for m in modes]
    out = []
    for m in modes:
        plain = f"plain/{m}"
        out.append(Config(plain, m, m, False, plain))
        if empty_hook and m == modes[0]:
            out.append(Config(f"empty hook/{m}", m, m, True, plain, True))
        out.append(Config(m, m, m, True, plain))
    return out


@dataclass
class Sample:
    role: str
    n: int
    config: str
    round: int
    packets: int
    cpp: float  # clocks per packet of the forwarding path: every node but the generator
    plugin_cpp: float  # the plugin's node (0 when not hooked)
    generator_cpp: float  # pg-input, not in cpp
    nodes_cpp: dict[str, float]  # the path's nodes
    other_clocks: int  # nodes that saw fewer than half the packets (processes, ND): not in cpp
    forwarded: int  # packets pg1 transmitted
    dropped: int  # packets error-drop saw
    waited_s: float
    attempts: int  # samples taken: repeated when VPP's thread was preempted or stolen from
    disturbed: bool  # the kept one was too
    involuntary: int
    run_delay_ms: float
    steal_s: float
    stats: dict[str, int] = field(default_factory=dict)  # the plugin's, delta
    flows_hit: int = 0
    flow_packets: int = 0
    flow_min: int = 0
    flow_max: int = 0
    counting_ok: bool = False


def write_pcap(path: Path, frames: Sequence[bytes]) -> Path:
    """A classic pcap file (Ethernet) of the frames."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for f in frames:
        out.append(struct.pack("<IIII", 0, 0, len(f), len(f)) + f)
    path.write_bytes(b"".join(out))
    return path


class Group:
    """A (role, N) group on its own VPP: the policies (ingress: N SR policies, H.Encaps,
    steering destination i into policy i) or the End SID (transit), the N flows, a stream per
    frame kind."""

    def __init__(
        self,
        router: Router,
        role: str,
        n: int,
        modes: Sequence[str],
        empty_hook: bool,
        packets: int,
        tmp: Path,
    ) -> None:
        self.router, self.role, self.n, self.packets = router, role, n, packets
        self.configs = configs(role, modes, empty_hook)
        if role == "ingress":
            lines = []
            for i in range(n):
                sids = " ".join(f"next {s}" for s in ingress_sids(i))
                bsid = f"fc00:ff::{i + 1:x}"
                lines.append(f"sr policy add bsid {bsid} {sids} encap")
                lines.append(f"sr steer l3 {destination(i)}/128 via bsid {bsid}")
            router.exec(lines)
            router.add_flows(ROLE[role], (ingress_sids(i) for i in range(n)))
        else:
            router.exec([f"sr localsid address {END_SID} behavior end"])
            router.add_flows(ROLE[role], (transit_sids(i) for i in range(n)))
        for kind in dict.fromkeys(c.frames for c in self.configs):
            frames = build_frames(kind, n, GEN_MAC, router.in_mac)
            router.add_stream(kind, write_pcap(tmp / f"{role}-{n}-{kind}.pcap", frames), packets)
        self._expected_s: dict[str, float] = {}

    def apply(self, cfg: Config) -> None:
        hook, ifname = HOOK[self.role]
        if cfg.hooked:
            self.router.set_mode(cfg.mode, configured=not cfg.empty)
        self.router.set_hook(hook, ifname, cfg.hooked)

    def measure(self, cfg: Config, rnd: int, core: int, retries: int) -> Sample:
        """One sample of ``cfg``, taken again (``retries`` times at most) while VPP's thread
        was preempted or its core's time stolen during it."""
        self.apply(cfg)
        for attempt in range(1, retries + 2):
            s = self._once(cfg, rnd, core)
            s.attempts = attempt
            if not s.disturbed:
                break
        return s

    def _once(self, cfg: Config, rnd: int, core: int) -> Sample:
        r, packets = self.router, self.packets
        stats0 = r.plugin_stats()
        counting = cfg.hooked and not cfg.empty
        flows0 = r.flow_packets() if counting else {}
        nodes0 = r.nodes()
        sched0 = r.sched(core)
        expected = self._expected_s.get(cfg.name, packets / 30e6)
        waited = r.run_stream(cfg.frames, expected)
        sched1 = r.sched(core)
        nodes1 = r.nodes()
        stats1 = r.plugin_stats()
        flows1 = r.flow_packets() if counting else {}
        self._expected_s[cfg.name] = 0.8 * waited
        s = self._sample(cfg, rnd, nodes0, nodes1)
        s.waited_s = waited
        s.disturbed = sched1.disturbed(sched0)
        s.involuntary = sched1.involuntary - sched0.involuntary
        s.run_delay_ms = (sched1.run_delay_ns - sched0.run_delay_ns) / 1e6
        s.steal_s = sched1.steal_s - sched0.steal_s
        s.stats = {f: stats1[f] - stats0[f] for f in PLUGIN_FIELDS}
        deltas = [flows1.get(slot, 0) - flows0.get(slot, 0) for slot in range(self.n)]
        if counting:
            s.flows_hit = sum(d > 0 for d in deltas)
            s.flow_packets = sum(deltas)
            s.flow_min, s.flow_max = min(deltas), max(deltas)
        s.counting_ok = self.counting_ok(cfg, s)
        return s

    def _sample(self, cfg: Config, rnd: int, before: Nodes, after: Nodes) -> Sample:
        packets = self.packets
        clocks = {k: v - before.clocks.get(k, 0) for k, v in after.clocks.items()}
        vectors = {k: v - before.vectors.get(k, 0) for k, v in after.vectors.items()}
        path = {
            k: clocks[k] / packets
            for k, v in vectors.items()
            if v >= packets // 2 and k != GENERATOR_NODE
        }
        other = sum(c for k, c in clocks.items() if k not in path and k != GENERATOR_NODE)
        return Sample(
            role=self.role,
            n=self.n,
            config=cfg.name,
            round=rnd,
            packets=packets,
            cpp=sum(path.values()),
            plugin_cpp=path.get(PLUGIN_NODE[self.role], 0.0),
            generator_cpp=clocks.get(GENERATOR_NODE, 0) / packets,
            nodes_cpp=dict(sorted(path.items(), key=lambda kv: -kv[1])),
            other_clocks=other,
            forwarded=vectors.get(f"{OUT_IF}-tx", 0),
            dropped=vectors.get("error-drop", 0),
            waited_s=0.0,
            attempts=1,
            disturbed=False,
            involuntary=0,
            run_delay_ms=0.0,
            steal_s=0.0,
        )

    def counting_ok(self, cfg: Config, s: Sample) -> bool:
        """Every packet forwarded, none dropped; with the plugin hooked, every one counted once
        for its flow (pg cycles over the N frames: each flow gets packets / N, rounded either
        way) and no other reason; without, or not configured, the plugin counted nothing."""
        if s.forwarded != s.packets or s.dropped:
            return False
        if not cfg.hooked or cfg.empty:
            return not any(s.stats.values())
        others = any(v for k, v in s.stats.items() if k != "counted")
        low, high = s.packets // self.n, -(-s.packets // self.n)
        return (
            s.stats["counted"] == s.packets
            and not others
            and s.flow_packets == s.packets
            and s.flows_hit == self.n
            and low <= s.flow_min <= s.flow_max <= high
        )
