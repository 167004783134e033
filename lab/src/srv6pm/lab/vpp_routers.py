"""The lab's VPP routers: one VPP process (:mod:`.vpp`) per router whose topology says
``driver: vpp``, started by ``up`` once the network is built (the kernel's part of such a
router is in :mod:`.network`) and before the node managers, stopped by ``down`` before the
namespaces go. Their PIDs and sockets are in the lab's state file, so another process can stop
them.

Each VPP gets what a Linux router gets from the kernel: every veth as an af_packet interface
``host-<veth>`` with the link's address and MTU, the topology's static routes (the locator
routes included), the SRv6 encapsulation source (its address on its first link), and its own
locator, held by a loopback interface. Local SIDs and SR policies come from the node manager.
"""

from __future__ import annotations

import json
import subprocess
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any

from .errors import LabError
from .network import Network, run
from .state import LabState
from .topology import Topology
from .vpp import (
    VppProcess,
    VppSockets,
    check_installed,
    is_vpp,
    srv6pm_plugin_built,
    srv6pm_plugin_dir,
)
from .vpp import stop as stop_vpp

DEFAULT_MTU = 1500  # a veth's MTU when the topology gives none
SHM_DIR = Path("/dev/shm")  # noqa: S108 (where VPP's binary API segments are, not a temp file)


class VppRouters:
    """The VPP processes of one lab's VPP routers."""

    def __init__(self, topology: Topology, network: Network, state: LabState) -> None:
        self.topology = topology
        self.network = network
        self.state = state
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # --- names ---------------------------------------------------------------------------

    def process(self, router: str) -> VppProcess:
        """``router``'s VPP (its sockets, configuration and CLI), running or not."""
        if not self.topology.is_vpp(router):
            self.network.check_router(router)
            raise LabError(f"{router} is not a VPP router (driver: linux)")
        return VppProcess(
            router,
            self.network.netns(router),
            self.state.directory,
            srv6pm_plugin=srv6pm_plugin_built(),
        )

    def sockets(self, router: str) -> VppSockets:
        """The API, CLI and stats sockets of ``router``'s VPP."""
        return self.process(router).sockets

    def cli(self, router: str, *commands: str) -> str:
        """Run VPP CLI commands on ``router``; their output (see :meth:`VppProcess.cli`)."""
        return self.process(router).cli(*commands)

    def pid(self, router: str) -> int | None:
        """PID of ``router``'s VPP if it is running."""
        info = self.state.read().get("vpp", {}).get(router)
        if not info or info.get("pid") is None:
            return None
        pid = int(info["pid"])
        return pid if is_vpp(pid, Path(info["config"])) else None

    # --- start and stop ------------------------------------------------------------------

    def preflight(self, start_node_managers: bool) -> None:
        """Refuse to start without VPP, or node managers of VPP routers without srv6pm's
        plugin (creates nothing)."""
        if not self.topology.vpp_routers:
            return
        check_installed()
        if start_node_managers and not srv6pm_plugin_built():
            raise LabError(
                f"the node managers of VPP routers ({', '.join(self.topology.vpp_routers)}) "
                f"need srv6pm's VPP plugin, not in {srv6pm_plugin_dir()}: run `make vpp-plugin`, "
                "or bring the lab up without node managers"
            )

    def start_all(self) -> None:
        """Start and configure every VPP router's VPP; each is recorded before it is waited
        for, so a teardown stops a half-started one too."""
        for router in self.topology.vpp_routers:
            self._launch(router)
        for router in self.topology.vpp_routers:
            self._configure(router)
        for router in self.topology.vpp_routers:  # once every VPP answers
            self.resolve_neighbours(router)

    def restart(self, router: str) -> None:
        """Stop ``router``'s VPP and start it again as ``up`` did: a new VPP that holds none of
        what its node manager gave the old one (flows, counters, policies, SIDs)."""
        recorded = self.state.read().get("vpp", {})
        if router not in recorded:
            raise LabError(f"{router}'s VPP was not started by this lab")
        problems = self.stop_all({router: recorded[router]})
        if problems:
            raise LabError("; ".join(problems))
        self._launch(router)
        self._configure(router)
        self.resolve_neighbours(router)

    def _launch(self, router: str) -> None:
        vpp = self.process(router)
        proc = vpp.launch()
        self._procs[router] = proc
        state = self.state.read()
        state.setdefault("vpp", {})[router] = {
            "pid": proc.pid,
            "netns": vpp.netns,
            "config": str(vpp.config_file),
            "api": str(vpp.sockets.api),
            "cli": str(vpp.sockets.cli),
            "stats": str(vpp.sockets.stats),
            "log": str(vpp.log_file),
            "api_prefix": vpp.api_prefix,
        }
        self.state.write(state)

    def _configure(self, router: str) -> None:
        vpp = self.process(router)
        vpp.wait_ready(self._procs[router])
        vpp.cli(*self.commands(router))

    def resolve_neighbours(self, router: str, tries: int = 50) -> None:
        """Ping every neighbour of ``router`` from its VPP until it answers. VPP drops the
        packet that makes it look a neighbour up (the kernel queues it), so a test's first
        packet through a VPP router would be lost without this; VPP's neighbour entries do not
        age out."""
        vpp = self.process(router)
        for peer in self.topology.peers(router):
            address = self.topology.address(peer, router).ip
            for _ in range(tries):
                if " 1 received" in vpp.cli(f"ping {address} repeat 1 interval 0.01"):
                    break
            else:
                raise LabError(f"VPP {router}: no answer from its neighbour {peer} ({address})")

    def commands(self, router: str) -> list[str]:
        """The CLI commands that give ``router``'s VPP its interfaces, routes, encapsulation
        source and locator."""
        topo, net = self.topology, self.network
        peers = topo.peers(router)
        cmds = []
        for peer in peers:
            vif = net.interface(router, peer)
            # VPP sends through the qdisc layer, so an nftables egress hook on the veth sees
            # what it sends (loss injection, :mod:`.drops`)
            veth = net.kernel_interface(router, peer)
            cmds += [
                # TPACKET_V2 (see .vpp), and the veth's own MAC, as a NIC keeps its own: a
                # restarted VPP is still the address its neighbours have in their caches
                f"create host-interface name {veth} v2 hw-addr {self._mac(router, veth)} "
                "qdisc-bypass-disable",
                f"set interface mtu packet {topo.mtu(router, peer) or DEFAULT_MTU} {vif}",
                f"set interface ip address {vif} {topo.address(router, peer)}",
                f"set interface state {vif} up",
                f"set interface rx-mode {vif} polling",
            ]
        for route in topo.routes(router):
            cmds.append(
                f"ip route add {route.dst} via {route.via}{self._via_interface(router, route.via)}"
            )
        if peers:
            cmds.append(f"set sr encaps source addr {topo.address(router, peers[0]).ip}")
        locator = topo.routers[router].locator
        if locator is not None:
            cmds += [
                "create loopback interface instance 0",
                "set interface state loop0 up",
                f"set interface ip address loop0 {locator}",
            ]
        return cmds

    def _mac(self, router: str, veth: str) -> str:
        """The Ethernet address of ``router``'s kernel veth ``veth``."""
        shown = run(["ip", "-j", "-n", self.network.netns(router), "link", "show", "dev", veth])
        return str(json.loads(shown.stdout)[0]["address"])

    def _via_interface(self, router: str, via: IPv6Address) -> str:
        """`` host-<veth>`` of the link whose subnet holds ``via`` ('' if none does: VPP then
        resolves it recursively)."""
        for peer in self.topology.peers(router):
            if via in self.topology.address(router, peer).network:
                return f" {self.network.interface(router, peer)}"
        return ""

    def stop_all(self, recorded: dict[str, Any]) -> list[str]:
        """Stop every recorded VPP and remove what it leaves behind (its sockets, and its
        shared memory if it was killed); the problems met."""
        problems = []
        for router, info in recorded.items():
            try:
                if info.get("pid") is not None:
                    stop_vpp(int(info["pid"]), Path(info["config"]))
            except (LabError, OSError) as e:
                problems.append(f"stop VPP {router}: {e}")
                continue
            proc = self._procs.pop(router, None)
            if proc is not None:
                proc.poll()  # reaped already: this only tells the Popen so
            prefix = info.get("api_prefix") or info.get("netns")
            leftovers = [Path(info[k]) for k in ("api", "cli", "stats") if k in info]
            if prefix:
                leftovers += [SHM_DIR / f"{prefix}-global_vm", SHM_DIR / f"{prefix}-vpe-api"]
            for path in leftovers:
                try:
                    path.unlink(missing_ok=True)
                except OSError as e:
                    problems.append(f"remove {path}: {e}")
        # VPPs this process started that another one stopped (`srv6pm lab down`): reap them
        for router, proc in list(self._procs.items()):
            if proc.poll() is not None:
                del self._procs[router]
        return problems

    def status(self, recorded: dict[str, Any]) -> dict[str, Any]:
        """Per recorded VPP: pid, alive, sockets, log."""
        out = {}
        for router, info in recorded.items():
            pid = self.pid(router)
            out[router] = {
                "pid": pid,
                "alive": pid is not None,
                "api": info.get("api"),
                "stats": info.get("stats"),
                "log": info.get("log"),
            }
        return out
