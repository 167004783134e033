"""Configurations of r1 within a (role, N) group, and the group's policies, End SID, flows and
frame files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

from bench.fwd.common import END_SID, MODE_PB
from bench.fwd.frames import build_frames, destination, ingress_sids, transit_sids, write_frames


@dataclass(frozen=True)
class Config:
    """One configuration of r1 within a (role, N) group."""

    name: str
    frames: str  # frame kind the generator sends: "ip", "altmark", "dscp"
    mode: str  # r1's marking mode
    flows: bool  # N monitored flows installed (else none)
    empty_hook: bool  # an empty tc program on the hook the monitoring would use
    baseline: str  # the plain configuration it is compared with (itself for a plain one)
    # probe steering rules on r1 as the node manager lays them out (one per STAMP session),
    # with or without the guard that sends unmarked packets past them
    rules: int = 0
    guarded: bool = False

    @property
    def monitored(self) -> bool:
        return self.flows or self.empty_hook


def configs(
    role: str, n: int, modes: Sequence[str], empty_hook_at: Sequence[int], steering_rules: int = 0
) -> list[Config]:
    """The configurations of a group, in the order a round applies them. Plain first; between
    two monitored configurations there is a change of mode or a plain one, so every monitored
    sample starts with freshly installed flows (counters from zero)."""
    empty = n in empty_hook_at
    if role == "ingress":
        out = [Config("plain", "ip", modes[0], False, False, "plain")]
        if steering_rules:
            k = steering_rules
            out += [
                Config(f"plain, {k} probe rules", "ip", modes[0], False, False, "plain", k),
                Config(f"plain, {k} rules + guard", "ip", modes[0], False, False, "plain", k, True),
            ]
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
