"""The lab's network: one namespace per node, veth links, addresses, routes and the SRv6
sysctls, built with ``ip`` and ``sysctl``; running commands inside a node's namespace.

In the namespace of a VPP router the kernel only carries the veths: VPP drives them through
af_packet (:mod:`.vpp_routers` configures it), so they get no address, no IPv6 and no
forwarding here."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import srv6pm

from .errors import LabError
from .topology import Topology, interface_name

NETNS_DIR = Path("/run/netns")
# In a VPP router's namespace: a veth pair whose far end stays down. An nftables netdev egress
# rule drops a packet VPP sends by forwarding it here (see :mod:`.drops`). A link's interface
# name has a "-" in its first 15 characters, so none has these names.
DROP_SINK = ("drop_sink", "drop_peer")
# ethtool's names of the offloads turned off where VPP meets a veth (see Network.build)
_SUPER_PACKETS = ("tso", "gso", "gro")
_CHECKSUM_LEFT_TO_NIC = ("tx",)


class Network:
    """The namespaces ``<prefix>-<node>`` of ``topology`` and the links between them."""

    def __init__(self, topology: Topology, prefix: str) -> None:
        self.topology = topology
        self.prefix = prefix

    # --- names ---------------------------------------------------------------------------

    def netns(self, node: str) -> str:
        """Namespace name of ``node``: ``<prefix>-<node>``."""
        self.check_node(node)
        return f"{self.prefix}-{node}"

    def interface(self, node: str, peer: str) -> str:
        """Name of ``node``'s interface toward ``peer`` as its data plane knows it: the kernel
        veth's name (:meth:`kernel_interface`), or ``host-<veth>`` for a VPP router (VPP's name
        of the af_packet interface on that veth). This is what a node manager is told."""
        kernel = self.kernel_interface(node, peer)
        return f"host-{kernel}" if self.topology.is_vpp(node) else kernel

    def kernel_interface(self, node: str, peer: str) -> str:
        """Name of the kernel veth of ``node`` toward ``peer`` (inside ``node``'s namespace):
        what ``ip``, ``tc``, ``nft`` and ``ethtool`` take, whatever the node's driver."""
        self.check_node(node)
        self.check_node(peer)
        self.topology.address(node, peer)  # raises if there is no such link
        return interface_name(node, peer)

    def check_node(self, node: str) -> None:
        """:class:`LabError` unless ``node`` is a node of the topology."""
        if node not in self.topology.nodes:
            raise LabError(f"unknown node {node!r} (nodes: {', '.join(self.topology.nodes)})")

    def check_router(self, router: str) -> None:
        """:class:`LabError` unless ``router`` is a router of the topology."""
        if router not in self.topology.routers:
            raise LabError(
                f"unknown router {router!r} (routers: {', '.join(self.topology.routers)})"
            )

    # --- running things in namespaces ----------------------------------------------------

    def exec(
        self, node: str, argv: Sequence[str], *, check: bool = False, **kwargs: Any
    ) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run(["ip", "netns", "exec", <ns>, *argv], check=check, **kwargs)``.

        Without ``env`` the child gets a PYTHONPATH that finds this package.
        """
        kwargs.setdefault("env", child_env())
        return subprocess.run(
            ["ip", "netns", "exec", self.netns(node), *argv], check=check, **kwargs
        )

    def popen(self, node: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Like :meth:`exec` but returns the running ``Popen``."""
        kwargs.setdefault("env", child_env())
        return subprocess.Popen(["ip", "netns", "exec", self.netns(node), *argv], **kwargs)

    def ping(self, node: str, address: str, timeout: int = 2) -> bool:
        """One ICMPv6 echo from ``node`` to ``address``; True if answered."""
        r = self.exec(
            node,
            ["ping", "-6", "-n", "-q", "-c", "1", "-W", str(timeout), address],
            capture_output=True,
            check=False,
        )
        return r.returncode == 0

    def sysctl(self, node: str, settings: dict[str, int]) -> None:
        """Set kernel parameters inside ``node``'s namespace."""
        argv = ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items())]
        r = self.exec(node, argv, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise LabError(f"sysctl in {node} failed: {r.stderr.strip()}")

    # --- build and tear down -------------------------------------------------------------

    def preflight(self) -> None:
        """Refuse to build over namespaces that exist, or without the tools (creates nothing)."""
        taken = [self.netns(n) for n in self.topology.nodes if namespace_exists(self.netns(n))]
        if taken:
            raise LabError(f"namespaces already exist: {', '.join(taken)}")
        tools = ("ip", "sysctl", "nft", *(("ethtool",) if self.topology.vpp_routers else ()))
        for tool in tools:
            if shutil.which(tool) is None:
                raise LabError(
                    f"{tool!r} not found (install iproute2, procps, nftables and ethtool)"
                )

    def build(self, record: Callable[[str], None]) -> None:
        """Create the namespaces, links, addresses and routes. ``record`` is called with each
        namespace's name before it is made, so a teardown finds the half-made ones too."""
        topo = self.topology
        for node in topo.nodes:
            ns = self.netns(node)
            record(ns)
            run(["ip", "netns", "add", ns])
            # defaults first: interfaces created afterwards inherit them
            settings = {"net.ipv6.conf.all.accept_dad": 0, "net.ipv6.conf.default.accept_dad": 0}
            if topo.is_vpp(node):
                settings |= {"net.ipv6.conf.all.forwarding": 0}
            elif node in topo.routers:
                settings |= {
                    "net.ipv6.conf.all.forwarding": 1,
                    "net.ipv6.conf.all.seg6_enabled": 1,
                    "net.ipv6.conf.default.seg6_enabled": 1,
                    "net.ipv6.conf.lo.seg6_enabled": 1,
                }
            self.sysctl(node, settings)
        batch = []
        for link in topo.links:
            (a, _), (b, _) = link.ends.items()
            mtu = f" mtu {link.mtu}" if link.mtu else ""
            batch.append(
                f"link add name {interface_name(a, b)} netns {self.netns(a)}{mtu} type veth "
                f"peer name {interface_name(b, a)} netns {self.netns(b)}{mtu}"
            )
        for router in topo.vpp_routers:
            sink, peer = DROP_SINK
            batch.append(f"link add name {sink} netns {self.netns(router)} type veth "
                         f"peer name {peer} netns {self.netns(router)}")  # fmt: skip
        run(["ip", "-batch", "-"], input="\n".join(batch) + "\n")
        for node in topo.nodes:
            if topo.is_vpp(node):
                self._build_vpp_router(node)
                continue
            ifaces = [(interface_name(node, p), topo.address(node, p)) for p in topo.peers(node)]
            settings = {f"net.ipv6.conf.{ifname}.accept_dad": 0 for ifname, _ in ifaces}
            if node in topo.routers:
                settings |= {f"net.ipv6.conf.{ifname}.seg6_enabled": 1 for ifname, _ in ifaces}
            if settings:
                self.sysctl(node, settings)
            cmds = ["link set lo up"]
            cmds += [f"link set {ifname} up" for ifname, _ in ifaces]
            cmds += [f"address add {addr} dev {ifname} nodad" for ifname, addr in ifaces]
            cmds += [f"route add {r.dst} via {r.via}" for r in topo.routes(node)]
            run(["ip", "-6", "-n", self.netns(node), "-batch", "-"], input="\n".join(cmds) + "\n")
        # Only packets as they would be on a wire may meet VPP, so every link with a VPP end
        # has offloads off. Super-packets (TSO, GSO, GRO), at both ends: af_packet without
        # its vnet header feature cannot take them, and with it VPP would see (and srv6pm's
        # plugin count) one packet where the wire carries many. Checksum offload (tx), at a
        # kernel end sending to VPP: a packet whose checksum is left to the NIC carries its
        # checksum's position in the vnet header, which VPP keeps for a plain packet but drops
        # once the packet is SRv6 (the checksum is then the inner packet's), so the packet
        # would leave VPP with a bad checksum. Not under VPP itself: with tx off on the veth it
        # is given, VPP's af_packet sends nothing that arrives (VPP 26.06).
        for link in topo.links:
            if any(topo.is_vpp(n) for n in link.ends):
                (a, _), (b, _) = link.ends.items()
                for node, peer in ((a, b), (b, a)):
                    off = _SUPER_PACKETS + (() if topo.is_vpp(node) else _CHECKSUM_LEFT_TO_NIC)
                    self.ethtool(node, interface_name(node, peer), dict.fromkeys(off, False))

    def _build_vpp_router(self, router: str) -> None:
        """The kernel's part of a VPP router: its veths (and the drop sink) up, without IPv6,
        so the kernel neither answers nor forwards on them."""
        ifnames = [interface_name(router, p) for p in self.topology.peers(router)]
        ifnames += DROP_SINK
        self.sysctl(router, {f"net.ipv6.conf.{i}.disable_ipv6": 1 for i in ifnames})
        cmds = ["link set lo up"]
        cmds += [f"link set {i} up" for i in ifnames if i != DROP_SINK[1]]
        run(["ip", "-n", self.netns(router), "-batch", "-"], input="\n".join(cmds) + "\n")

    def ethtool(self, node: str, interface: str, features: dict[str, bool]) -> None:
        """Set ethtool features (``tso``, ``gso``, ``gro``, ...) of ``node``'s ``interface``."""
        args = [a for f, on in features.items() for a in (f, "on" if on else "off")]
        r = self.exec(node, ["ethtool", "-K", interface, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise LabError(f"ethtool in {node} failed: {r.stderr.strip()}")

    @staticmethod
    def delete(namespaces: Iterable[str]) -> list[str]:
        """Delete these namespaces (their veths go with them), last made first; the problems
        met (best effort)."""
        problems = []
        for ns in reversed(list(namespaces)):
            if namespace_exists(ns):
                r = run(["ip", "netns", "delete", ns], check=False)
                if r.returncode != 0:
                    problems.append(f"delete namespace {ns}: {r.stderr.strip()}")
        return problems


def namespace_exists(ns: str) -> bool:
    """True if the named network namespace exists."""
    return (NETNS_DIR / ns).exists()


def run(
    argv: list[str], input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a command on the host; :class:`LabError` with its stderr (and input) if it fails."""
    r = subprocess.run(argv, input=input, capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise LabError(
            f"`{' '.join(argv)}` failed: {r.stderr.strip()}"
            + (f"\ninput:\n{input}" if input else "")
        )
    return r


def child_env() -> dict[str, str]:
    """The environment with a PYTHONPATH that finds every ``srv6pm`` package we can import."""
    roots = [str(Path(p).parent) for p in srv6pm.__path__]
    old = os.environ.get("PYTHONPATH", "")
    paths = [*roots, *(p for p in old.split(os.pathsep) if p and p not in roots)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def require_root() -> None:
    """:class:`LabError` unless we are root."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, nftables, BPF)")
