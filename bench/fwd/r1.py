"""r1's node manager through gRPC only, the benchmark's own empty program, and the network
around r1 (RPS, the sink's drop, neighbour entry, clsact qdiscs)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from srv6pm.lab import Lab
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

from bench.fwd.common import GEN_CORE, ROUTER_CORE, STATS_FIELDS
from bench.harness.pinning import rps_command
from bench.harness.run import BenchError
from bench.harness.topology import read_mac, sh


@dataclass(frozen=True)
class Counted:
    """What ReadCounters said: the programs' stats, and the counters of the flows asked for."""

    stats: dict[str, int]
    flows_hit: int = 0  # flows with at least one packet counted
    flow_packets: int = 0  # packets over all flows and colours


STEERING_BASE = 0x53520000  # the node manager's default steering_mark_base


class R1:
    """r1's node manager, through gRPC only, and the benchmark's own empty program."""

    def __init__(self, lab: Lab, empty_program: Path) -> None:
        self._lab = lab
        self._empty = empty_program
        self._empty_on: tuple[str, str] | None = None
        self._rules_on = (0, False)
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

    def set_rules(self, count: int, guarded: bool) -> None:
        """`count` probe steering rules as the node manager lays them out (priority 32001, one
        fwmark each), with its guard and anchor when `guarded`; none left from before."""
        if (count, guarded) == self._rules_on:
            return
        held, was_guarded = self._rules_on
        lines = ["rule del pref 32001"] * held
        lines += ["rule del pref 32000", "rule del pref 32002"] if was_guarded else []
        if guarded:
            lines += [
                "rule add pref 32002 nop proto 202",
                f"rule add pref 32000 not fwmark {STEERING_BASE:#x}/0xfffe0000 goto 32002 "
                "proto 202",
            ]
        lines += [
            f"rule add pref 32001 fwmark {STEERING_BASE + i + 1:#x} table "
            f"{STEERING_BASE + i + 1} proto 202"
            for i in range(count)
        ]
        if lines:
            self._lab.exec(
                "r1",
                ["ip", "-6", "-batch", "-"],
                input="\n".join(lines) + "\n",
                text=True,
                check=True,
            )
        self._rules_on = (count, guarded)

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
    r1_in, r1_out = lab.kernel_interface("r1", "gen"), lab.kernel_interface("r1", "sink")
    sink_in = lab.kernel_interface("sink", "r1")
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
    return read_mac(lab, "gen", lab.kernel_interface("gen", "r1")), read_mac(lab, "r1", r1_in)
