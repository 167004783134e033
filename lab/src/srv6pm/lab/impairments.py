"""Impairments a test injects on a lab link: exact packet drops (nftables rules, see
:mod:`.drops`), a fixed delay (an NFQUEUE program, see :mod:`.delay`) and NIC offloads
switched on or off (ethtool). They act on the kernel's veths (:meth:`Network.kernel_interface`),
whatever the node's driver."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

from . import drops
from .drops import DropRule
from .errors import LabError
from .network import DROP_SINK, Network
from .programs import module_argv, readline
from .topology import parse_ipv6_dst

_OFFLOAD_NAMES = {
    "tso": "tcp-segmentation-offload",
    "gso": "generic-segmentation-offload",
    "gro": "generic-receive-offload",
}


class Impairments:
    """What a test does to the packets ``network``'s nodes forward."""

    def __init__(self, network: Network) -> None:
        self.network = network

    # --- loss ----------------------------------------------------------------------------

    def drop(
        self,
        node: str,
        to_peer: str,
        count: int,
        dst: str | None = None,
        min_length: int | None = None,
        every: int | None = None,
    ) -> DropRule:
        """Drop exactly the next ``count`` packets forwarded by ``node`` toward ``to_peer``.

        ``dst`` restricts the rule to that IPv6 destination (outer header: the active SID)
        or prefix, ``min_length`` to packets of at least that many octets, ``every`` to each
        n-th of the matching packets (see :mod:`srv6pm.lab.drops`). Returns the rule
        (its ``handle`` identifies it in :meth:`drop_counters`; its ``interface`` is the
        kernel veth it sits on). On a VPP router the rule sits on the veth VPP sends on.
        """
        if not 1 <= count <= drops.MAX_COUNT:
            raise LabError(f"count must be in 1..{drops.MAX_COUNT}, got {count}")
        interface = self.network.kernel_interface(node, to_peer)
        parsed = parse_ipv6_dst(dst) if dst is not None else None
        if self.network.topology.is_vpp(node):
            script = drops.add_egress_rule_script(
                interface, count, parsed, min_length, every, sink=DROP_SINK[0]
            )
        else:
            script = drops.add_rule_script(interface, count, parsed, min_length, every)
        r = self.network.exec(
            node,
            ["nft", "--echo", "--handle", "-f", "-"],
            input=script,
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise LabError(f"nft in {node} failed: {r.stderr.strip()}")
        return DropRule(
            node=node,
            handle=drops.parse_echo_handle(r.stdout),
            interface=interface,
            count=count,
            dst=str(parsed) if parsed is not None else None,
        )

    def drop_counters(self, node: str) -> dict[int, DropRule]:
        """The drop rules of ``node`` by handle, with their current ``dropped`` counters."""
        r = self.network.exec(
            node,
            ["nft", "-j", "list", "table", self._family(node), drops.TABLE],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            if "No such file or directory" in r.stderr:
                return {}
            raise LabError(f"nft in {node} failed: {r.stderr.strip()}")
        return drops.parse_rules(node, r.stdout)

    def clear_drops(self, node: str) -> None:
        """Remove every drop rule of ``node`` (deletes its ``srv6pm_lab`` table)."""
        self.network.exec(
            node,
            ["nft", "delete", "table", self._family(node), drops.TABLE],
            capture_output=True,
            check=False,
        )

    def _family(self, node: str) -> str:
        """The nftables family of ``node``'s drop rules: ``netdev`` on a VPP router (egress
        chains of its veths), else ``ip6`` (the forward hook)."""
        self.network.check_node(node)
        return "netdev" if self.network.topology.is_vpp(node) else "ip6"

    # --- delay ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def delay(self, node: str, to_peer: str, delay_ms: float, queue: int = 7) -> Iterator[None]:
        """Context manager: every packet ``node`` forwards toward ``to_peer`` is held
        ``delay_ms`` (see :mod:`srv6pm.lab.delay`; there is no netem in this kernel).
        Not on a VPP router: what it forwards never meets the kernel's forward hook, and
        netfilter cannot queue to userspace from a veth's egress hook."""
        interface = self.network.kernel_interface(node, to_peer)
        if self.network.topology.is_vpp(node):
            raise LabError(
                f"delay injection needs a Linux router as the sending end: {node} is a VPP "
                f"router (delay {to_peer}'s side instead, or use another link)"
            )
        rule = [
            "-t",
            "mangle",
            "FORWARD",
            "-o",
            interface,
            "-j",
            "NFQUEUE",
            "--queue-num",
            str(queue),
            "--queue-bypass",
        ]
        argv = module_argv("delay", "--queue", str(queue), "--delay-ms", str(delay_ms))
        proc = self.network.popen(
            node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            if readline(proc, 10.0).strip() != "ready":
                raise LabError(
                    f"delayer in {node} did not start: {proc.stderr.read() if proc.stderr else ''}"
                )
            r = self.network.exec(
                node,
                ["ip6tables", rule[0], rule[1], "-A", *rule[2:]],
                capture_output=True,
                text=True,
                check=False,
            )
            if r.returncode != 0:
                raise LabError(f"ip6tables in {node} failed: {r.stderr.strip()}")
            try:
                yield
            finally:
                self.network.exec(
                    node, ["ip6tables", rule[0], rule[1], "-D", *rule[2:]], check=False
                )
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    # --- offloads ------------------------------------------------------------------------

    @contextlib.contextmanager
    def offloads(self, node: str, peer: str, **features: bool) -> Iterator[None]:
        """Context manager: ethtool features (``tso``, ``gso``, ``gro``, ...) of ``node``'s
        interface toward ``peer`` set for its duration, then set back as they were."""
        interface = self.network.kernel_interface(node, peer)
        shown = self.network.exec(
            node, ["ethtool", "-k", interface], capture_output=True, text=True
        )
        before = {f: f"{_OFFLOAD_NAMES.get(f, f)}: on" in shown.stdout for f in features}
        self.network.ethtool(node, interface, features)
        try:
            yield
        finally:
            self.network.ethtool(node, interface, before)
