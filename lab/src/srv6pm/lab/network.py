"""The lab's network: one namespace per node, veth links, addresses, routes and the SRv6
sysctls, built with ``ip`` and ``sysctl``; running commands inside a node's namespace."""

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
        """Name of ``node``'s interface toward ``peer`` (inside ``node``'s namespace)."""
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
        for tool in ("ip", "sysctl", "nft"):
            if shutil.which(tool) is None:
                raise LabError(f"{tool!r} not found (install iproute2, procps and nftables)")

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
            if node in topo.routers:
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
        run(["ip", "-batch", "-"], input="\n".join(batch) + "\n")
        for node in topo.nodes:
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
