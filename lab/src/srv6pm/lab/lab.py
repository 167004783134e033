"""A running lab: a thin facade over its parts, each in a module of its own.

- :mod:`.network`: namespaces, links, addresses, routes; running commands in a node;
- :mod:`.processes`: the node managers, their ports and their supervision;
- :mod:`.vpp_routers`: the VPP processes of the routers whose driver is ``vpp``;
- :mod:`.traffic` and :mod:`.tcp`: UDP and TCP senders and receivers;
- :mod:`.impairments`: drops, delay and offloads on a link;
- :mod:`.state`: the state file that lets another process tear the lab down.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import tcp, traffic
from .errors import LabError
from .impairments import Impairments
from .network import NETNS_DIR, Network, namespace_exists, require_root
from .processes import BPF_ROOT, HEALTH_TIMEOUT_S, MAX_SEND_MESSAGE, NodeManagers
from .state import RUN_ROOT, LabState
from .topology import Topology
from .traffic import UdpReceiver
from .vpp_routers import VppRouters

if TYPE_CHECKING:
    from .pki import Pki

__all__ = [
    "BPF_ROOT",
    "HEALTH_TIMEOUT_S",
    "MAX_SEND_MESSAGE",
    "NETNS_DIR",
    "RUN_ROOT",
    "Lab",
    "UdpReceiver",
]


class Lab:
    """One instance of a topology, identified by its namespace prefix.

    All persistent facts (namespaces made, node manager PIDs, TLS on or off) live in the
    state file, so a ``Lab`` built in another process (e.g. ``srv6pm lab down``) can tear
    down what ``up`` made.

    With ``tls`` the node managers serve mutual TLS only, with a throwaway PKI
    (:mod:`srv6pm.lab.pki`) made by ``up``; :meth:`channel` connects with its client
    certificate.

    Its parts are :attr:`network`, :attr:`vpp_routers`, :attr:`node_managers`,
    :attr:`impairments`; their
    operations are also the lab's own (``lab.exec``, ``lab.start_node_manager``,
    ``lab.drop``, ...), as callers have always used them.
    """

    def __init__(
        self,
        topology: Topology,
        prefix: str | None = None,
        base_port: int | None = None,
        node_manager_settings: dict[str, str] | None = None,
        tls: bool = False,
        capabilities: tuple[str, ...] | None = None,
    ) -> None:
        self.topology = topology
        # Run node managers as a container runtime would: inside their router's namespace (not
        # entering it themselves), as root with only these capabilities, serving gRPC on a unix
        # socket (a namespace's loopback is out of the host's reach). None: the usual way.
        self.capabilities = capabilities
        # more settings for every node manager (e.g. kafka_bootstrap), as command-line flags
        self.node_manager_settings = dict(node_manager_settings or {})
        self.prefix = prefix or topology.name
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", self.prefix):
            raise LabError(
                f"invalid prefix {self.prefix!r}: use [a-z0-9][a-z0-9_-]*, at most 32 chars"
            )
        self.base_port = base_port
        if base_port is not None and not 1 <= base_port <= 65536 - len(topology.routers):
            raise LabError(f"invalid base port {base_port}")
        self._tls = tls
        self._state = LabState(self.prefix)
        self.network = Network(topology, self.prefix)
        self.vpp_routers = VppRouters(topology, self.network, self._state)
        self.node_managers = NodeManagers(
            topology,
            self.network,
            self._state,
            base_port=base_port,
            settings=self.node_manager_settings,
            capabilities=capabilities,
            tls=tls,
            argv=self.node_manager_argv,  # a subclass may change the command line
            vpp_sockets=self.vpp_routers.sockets,
        )
        self.impairments = Impairments(self.network)

        # names, and commands in a node's namespace
        self.netns = self.network.netns
        self.interface = self.network.interface
        self.kernel_interface = self.network.kernel_interface
        self.exec = self.network.exec
        self.popen = self.network.popen
        self.ping = self.network.ping
        # VPP routers: lab.vpp("r2").cli("show interface"), its sockets, its pid
        self.vpp = self.vpp_routers.process
        self.vpp_pid = self.vpp_routers.pid
        self.restart_vpp = self.vpp_routers.restart
        # node managers
        self.grpc_port = self.node_managers.grpc_port
        self.metrics_port = self.node_managers.metrics_port
        self.grpc_address = self.node_managers.grpc_address
        self.channel = self.node_managers.channel
        self.bpf_dir = self.node_managers.bpf_dir
        self.log_path = self.node_managers.log_path
        self.pid = self.node_managers.pid
        self.start_node_manager = self.node_managers.start
        self.stop_node_manager = self.node_managers.stop
        self.wait_serving = self.node_managers.wait_serving
        # impairments
        self.drop = self.impairments.drop
        self.drop_counters = self.impairments.drop_counters
        self.clear_drops = self.impairments.clear_drops
        self.delay = self.impairments.delay
        self.offloads = self.impairments.offloads

    # --- traffic (see srv6pm.lab.traffic and srv6pm.lab.tcp) -----------------------------

    def send_udp(
        self,
        node: str,
        dst: str,
        count: int,
        *,
        port: int = traffic.DEFAULT_PORT,
        size: int = 64,
        at: float | None = None,
        interval: float = 0.001,
        timeout: float | None = None,
        tclass: int = 0,
    ) -> traffic.SendResult:
        """Send exactly ``count`` UDP datagrams from ``node`` (see :mod:`srv6pm.lab.traffic`)."""
        return traffic.send_udp(
            self.network,
            node,
            dst,
            count,
            port=port,
            size=size,
            at=at,
            interval=interval,
            timeout=timeout,
            tclass=tclass,
        )

    def receive_udp(
        self,
        node: str,
        *,
        port: int = traffic.DEFAULT_PORT,
        idle: float = 1.0,
        timeout: float = 60.0,
    ) -> contextlib.AbstractContextManager[UdpReceiver]:
        """Context manager: a UDP receiver listening in ``node``; call ``.result()`` in it."""
        return traffic.receive_udp(self.network, node, port=port, idle=idle, timeout=timeout)

    def tcp_transfer(
        self, src: str, dst: str, dst_address: str, nbytes: int, port: int = tcp.DEFAULT_PORT
    ) -> tuple[tcp.TcpResult, tcp.TcpResult]:
        """Send ``nbytes`` over one TCP connection from host ``src`` to host ``dst`` (at
        ``dst_address``); what the sender and the receiver report (see :mod:`srv6pm.lab.tcp`)."""
        return tcp.transfer(self.network, src, dst, dst_address, nbytes, port)

    # --- node managers -------------------------------------------------------------------

    def node_manager_argv(self, router: str) -> list[str]:
        """Command line of ``router``'s node manager."""
        return self.node_managers.argv(router)

    @property
    def tls(self) -> bool:
        """True if the node managers serve mutual TLS: as recorded by ``up`` once the lab is
        up (whatever this ``Lab`` was built with), else the ``tls`` it was built with."""
        return self.node_managers.tls

    @property
    def pki(self) -> Pki:
        """Paths of the lab's PKI (``ca``, ``client_cert``, ``client_key``, server files),
        in ``<state_dir>/pki``; :class:`LabError` if the lab runs without TLS."""
        return self.node_managers.pki

    # --- state ---------------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """``/run/srv6pm/lab/<prefix>``: state file and node manager logs/state."""
        return self._state.directory

    @property
    def state_file(self) -> Path:
        """The JSON state file."""
        return self._state.file

    def is_up(self) -> bool:
        """True if this prefix has a state file (``up`` ran and ``down`` did not)."""
        return self.state_file.exists()

    # --- up / down / status --------------------------------------------------------------

    def up(self, start_node_managers: bool = True, keep_on_error: bool = False) -> None:
        """Create the namespaces, links, addresses and routes, start the VPP routers' VPPs,
        then start the node managers.

        On failure everything made so far is torn down (unless ``keep_on_error``) and
        :class:`LabError` is raised.
        """
        require_root()
        self._preflight(start_node_managers)
        try:
            self.state_dir.mkdir(parents=True)
        except FileExistsError:
            raise LabError(
                f"lab {self.prefix!r} is already up (state in {self.state_dir}); "
                f"run `srv6pm lab down` first"
            ) from None
        state: dict[str, Any] = {
            "prefix": self.prefix,
            "created": time.time(),
            "topology": str(self.topology.source or ""),
            "tls": self._tls,
            "complete": False,
            "namespaces": [],
            "vpp": {},
            "node_managers": {},
        }
        self._state.write(state)

        def record(ns: str) -> None:  # recorded first, so down() removes half-made ones
            state["namespaces"].append(ns)
            self._state.write(state)

        try:
            if self._tls:
                from . import pki  # noqa: PLC0415 (cryptography only for TLS labs)

                pki.create(self.state_dir / "pki", self.topology.routers)
            self.network.build(record)
            self.vpp_routers.start_all()
            if start_node_managers:
                for router in self.topology.routers:
                    self.start_node_manager(router, wait=False)
                for router in self.topology.routers:
                    self.wait_serving(router)
            state = self._state.read()
            state["complete"] = True
            self._state.write(state)
        except BaseException:
            if not keep_on_error:
                with contextlib.suppress(Exception):
                    self.down()
            raise

    def down(self) -> list[str]:
        """Tear down what ``up`` made (best effort, idempotent); returns the problems met."""
        require_root()
        state = self._state.read()
        recorded = state.get("node_managers", {})
        problems = self.node_managers.stop_all(recorded)
        problems += self.vpp_routers.stop_all(state.get("vpp", {}))  # before their namespaces
        problems += self.network.delete(state.get("namespaces", []))
        problems += self.node_managers.remove_pins(recorded)
        shutil.rmtree(self.state_dir, ignore_errors=True)
        return problems

    def status(self) -> dict[str, Any]:
        """What is up: namespaces (exist?), node managers (pid, alive, serving, address, log)."""
        state = self._state.read()
        return {
            "prefix": self.prefix,
            "up": bool(state),
            "complete": state.get("complete", False),
            "topology": state.get("topology"),
            "tls": bool(state.get("tls", False)),
            "state_dir": str(self.state_dir),
            "namespaces": {ns: namespace_exists(ns) for ns in state.get("namespaces", [])},
            "vpp": self.vpp_routers.status(state.get("vpp", {})),
            "node_managers": self.node_managers.status(state.get("node_managers", {})),
        }

    def _preflight(self, start_node_managers: bool) -> None:
        """Refuse to start over anything that exists already (nothing is created here)."""
        if self.state_dir.exists():
            raise LabError(
                f"lab {self.prefix!r} is already up (state in {self.state_dir}); "
                f"run `srv6pm lab down` first"
            )
        self.network.preflight()
        self.vpp_routers.preflight(start_node_managers)
        if start_node_managers:
            self.node_managers.check_ports()
