"""The lab's node managers, one per router: their command line, ports and addresses, and their
supervision (start detached, wait until SERVING, stop, kill, restart), recorded in the lab's
state file so another process can stop them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import LabError
from .network import NETNS_DIR, Network, child_env, require_root
from .state import LabState
from .topology import Topology

if TYPE_CHECKING:
    import grpc

    from .pki import Pki
    from .vpp import VppSockets

BPF_ROOT = Path("/sys/fs/bpf/srv6pm")
HEALTH_TIMEOUT_S = 15.0
MAX_SEND_MESSAGE = 64 << 20  # a desired state of 10,000+ flows


class NodeManagers:
    """The node managers of one lab.

    ``argv`` gives a router's command line (:meth:`Lab.node_manager_argv`, which a subclass
    may change); with ``tls`` they serve mutual TLS with the lab's PKI; with ``capabilities``
    they run as a container runtime would run them (see :class:`Lab`). ``vpp_sockets`` gives
    a VPP router's VPP sockets, which its node manager drives instead of a namespace.
    """

    def __init__(
        self,
        topology: Topology,
        network: Network,
        state: LabState,
        *,
        base_port: int | None,
        settings: dict[str, str],
        capabilities: tuple[str, ...] | None,
        tls: bool,
        argv: Callable[[str], list[str]] | None = None,
        vpp_sockets: Callable[[str], VppSockets] | None = None,
    ) -> None:
        self.topology = topology
        self.network = network
        self.state = state
        self.base_port = base_port
        self.settings = settings
        self.capabilities = capabilities
        self._tls = tls
        self._argv = argv or self.argv
        self._vpp_sockets = vpp_sockets
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # --- names, ports, addresses ---------------------------------------------------------

    def grpc_port(self, router: str) -> int:
        """The node manager port of ``router`` (``--base-port`` renumbering applied)."""
        self.network.check_router(router)
        if self.base_port is None:
            return self.topology.routers[router].grpc_port
        return self.base_port + list(self.topology.routers).index(router)

    def metrics_port(self, router: str) -> int:
        """The node manager's Prometheus port: the gRPC ports' block, then as many again."""
        return self.grpc_port(router) + len(self.topology.routers)

    def grpc_address(self, router: str) -> str:
        """``127.0.0.1:<port>`` (or ``unix:<path>`` with ``capabilities``) of ``router``'s node
        manager (as recorded, once started)."""
        info = self.state.read().get("node_managers", {}).get(router)
        return str(info["grpc"]) if info else self.listen(router)

    def listen(self, router: str) -> str:
        """Where ``router``'s node manager is told to serve gRPC."""
        if self.capabilities is not None:
            return f"unix:{self.state.directory / router}.sock"
        return f"127.0.0.1:{self.grpc_port(router)}"

    def bpf_dir(self, router: str) -> Path:
        """BPF pin directory of ``router``'s node manager."""
        return BPF_ROOT / self.network.netns(router)

    def log_path(self, router: str) -> Path:
        """Log file of ``router``'s node manager."""
        return self.state.directory / f"{router}.log"

    # --- mutual TLS ----------------------------------------------------------------------

    @property
    def tls(self) -> bool:
        """True if the node managers serve mutual TLS: as recorded by ``up`` once the lab is
        up (whatever this ``Lab`` was built with), else the ``tls`` it was built with."""
        state = self.state.read()
        return bool(state.get("tls", False)) if state else self._tls

    @property
    def pki(self) -> Pki:
        """Paths of the lab's PKI (``ca``, ``client_cert``, ``client_key``, server files),
        in ``<state_dir>/pki``; :class:`LabError` if the lab runs without TLS."""
        if not self.tls:
            raise LabError(f"lab {self.network.prefix!r} runs without TLS: it has no PKI")
        from .pki import Pki  # noqa: PLC0415 (cryptography only for TLS labs)

        return Pki(self.state.directory / "pki")

    def channel(self, router: str) -> grpc.Channel:
        """A gRPC channel to ``router``'s node manager: mutual TLS with the lab's client
        certificate (the server must prove it is ``router``) if :attr:`tls`, else plaintext.
        The caller closes it (``with lab.channel(r) as channel: ...``) or lets it go."""
        import grpc  # noqa: PLC0415 (keeps `import srv6pm.lab` light for the traffic helper)

        address = self.grpc_address(router)
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", MAX_SEND_MESSAGE),
            ("grpc.enable_http_proxy", 0),
        ]
        if not self.tls:
            return grpc.insecure_channel(address, options=options)
        pki = self.pki
        credentials = grpc.ssl_channel_credentials(
            root_certificates=pki.ca.read_bytes(),
            private_key=pki.client_key.read_bytes(),
            certificate_chain=pki.client_cert.read_bytes(),
        )
        # the certificate must name this router: another router's manager is refused
        options.append(("grpc.ssl_target_name_override", router))
        return grpc.secure_channel(address, credentials, options=options)

    # --- command line --------------------------------------------------------------------

    def argv(self, router: str) -> list[str]:
        """Command line of ``router``'s node manager."""
        tls = []
        if self.tls:
            pki = self.pki
            tls = [
                "--tls-ca",
                str(pki.ca),
                "--tls-cert",
                str(pki.server_cert(router)),
                "--tls-key",
                str(pki.server_key(router)),
            ]
        if self.capabilities is None:
            where = ["--netns", self.network.netns(router)]
            metrics = ["--metrics-listen", f"127.0.0.1:{self.metrics_port(router)}"]
            runner: list[str] = []
        else:
            where, metrics = [], []
            runner = self._runner(router)
        if self.topology.is_vpp(router):  # it drives its VPP, not the namespace's kernel
            where = self._vpp_driver(router)
        return [
            *runner,
            sys.executable,
            "-m",
            "srv6pm.node_manager",
            "--node-id",
            router,
            *where,
            "--listen",
            self.listen(router),
            "--bpf-dir",
            str(self.bpf_dir(router)),
            "--state-dir",
            str(self.state.directory / router),
            "--period-s",
            f"{self.topology.period_s:g}",
            # every namespace reads the one kernel clock: synchronised by construction
            "--clock-sync",
            "yes",
            *metrics,
            *tls,
            *(
                arg
                for name, value in self.settings.items()
                for arg in (f"--{name.replace('_', '-')}", value)
            ),
        ]

    def _runner(self, router: str) -> list[str]:
        """What puts a node manager in its router's namespace with only :attr:`capabilities`."""
        # bounding and inheritable sets: what root keeps across exec, like a container's
        caps = ",".join(f"+{c.lower()}" for c in self.capabilities or ())
        return [
            "nsenter",
            f"--net={NETNS_DIR / self.network.netns(router)}",
            "setpriv",
            f"--bounding-set=-all{',' if caps else ''}{caps}",
            "--inh-caps=-all",
            "--",
        ]

    def _vpp_driver(self, router: str) -> list[str]:
        """The flags that point a VPP router's node manager at its VPP."""
        if self._vpp_sockets is None:
            raise LabError(f"{router} is a VPP router but this lab has no VPP sockets for it")
        sockets = self._vpp_sockets(router)
        return [
            "--driver",
            "vpp",
            "--vpp-api-socket",
            str(sockets.api),
            "--vpp-stats-socket",
            str(sockets.stats),
        ]

    # --- supervision ---------------------------------------------------------------------

    def pid(self, router: str) -> int | None:
        """PID of ``router``'s node manager if it is running."""
        self.network.check_router(router)
        info = self.state.read().get("node_managers", {}).get(router)
        pid = info.get("pid") if info else None
        return pid if pid is not None and self._is_ours(pid, router) else None

    def start(self, router: str, wait: bool = True) -> int:
        """Start ``router``'s node manager (detached, logging to :meth:`log_path`); its PID.

        With ``wait`` it also waits until the gRPC health check answers SERVING.
        """
        require_root()
        state = self.state.read()
        if not state:
            raise LabError(f"lab {self.network.prefix!r} is not up")
        if self.pid(router) is not None:
            raise LabError(f"node manager {router} is already running (pid {self.pid(router)})")
        (self.state.directory / router).mkdir(exist_ok=True)
        with open(self.log_path(router), "ab") as log:
            log.write(f"--- {time.strftime('%F %T')} starting\n".encode())
            log.flush()
            proc = subprocess.Popen(
                self._argv(router),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(),
                start_new_session=True,
            )
        self._procs[router] = proc
        state["node_managers"][router] = {
            "pid": proc.pid,
            "grpc": self.listen(router),
            "log": str(self.log_path(router)),
            "bpf_dir": str(self.bpf_dir(router)),
            "state_dir": str(self.state.directory / router),
            "argv": self._argv(router),
        }
        self.state.write(state)
        if wait:
            self.wait_serving(router)
        return proc.pid

    def stop(self, router: str, kill: bool = False, timeout: float = 5.0) -> None:
        """Stop ``router``'s node manager: SIGKILL if ``kill``, else SIGTERM then SIGKILL."""
        pid = self.pid(router)
        if pid is not None:
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
            if not self._wait_exit(router, pid, timeout) and not kill:
                os.kill(pid, signal.SIGKILL)
            if not self._wait_exit(router, pid, timeout):
                raise LabError(f"node manager {router} (pid {pid}) does not die")
        self._procs.pop(router, None)
        state = self.state.read()
        if router in state.get("node_managers", {}):
            state["node_managers"][router]["pid"] = None
            self.state.write(state)

    def wait_serving(self, router: str, timeout: float = HEALTH_TIMEOUT_S) -> None:
        """Wait until ``router``'s node manager answers the gRPC health check with SERVING."""
        address = self.grpc_address(router)
        deadline = time.monotonic() + timeout
        while not self.serving(router, 1.0):
            if self.pid(router) is None:
                raise LabError(
                    f"node manager {router} exited; end of {self.log_path(router)}:\n"
                    f"{self._log_tail(router)}"
                )
            if time.monotonic() > deadline:
                raise LabError(
                    f"node manager {router} not SERVING on {address} after "
                    f"{timeout:g} s; end of {self.log_path(router)}:\n"
                    f"{self._log_tail(router)}"
                )
            time.sleep(0.2)

    def serving(self, router: str, timeout: float) -> bool:
        """True if ``router``'s node manager answers the health check with SERVING (over
        mutual TLS in a TLS lab)."""
        import grpc  # noqa: PLC0415 (keeps `import srv6pm.lab` light for the traffic helper)
        from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: PLC0415

        with self.channel(router) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=timeout
                )
            except grpc.RpcError:
                return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def check_ports(self) -> None:
        """:class:`LabError` if a router's gRPC port is taken (binds nothing for long)."""
        for router in self.topology.routers:
            port = self.grpc_port(router)
            with socket.socket() as s:
                # as gRPC binds: a port in TIME_WAIT after a node manager stopped is free
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    raise LabError(
                        f"port 127.0.0.1:{port} for {router} is in use; use --base-port"
                    ) from None

    def stop_all(self, recorded: dict[str, Any]) -> list[str]:
        """Stop every recorded node manager and remove their BPF pins; the problems met."""
        problems: list[str] = []
        for router in recorded:
            try:
                self.stop(router)
            except (LabError, OSError) as e:
                problems.append(f"stop node manager {router}: {e}")
        return problems

    def remove_pins(self, recorded: dict[str, Any]) -> list[str]:
        """Remove the BPF pin directories (the topology's and the recorded ones)."""
        problems: list[str] = []
        bpf_dirs = {str(self.bpf_dir(r)) for r in self.topology.routers}
        bpf_dirs |= {i["bpf_dir"] for i in recorded.values()}
        for path in sorted(bpf_dirs):
            try:
                _remove_tree(Path(path))
            except OSError as e:
                problems.append(f"remove {path}: {e}")
        self._procs.clear()
        return problems

    def status(self, recorded: dict[str, Any]) -> dict[str, Any]:
        """Per recorded node manager: pid, alive, grpc, serving, log."""
        managers = {}
        for router, info in recorded.items():
            pid = self.pid(router)
            managers[router] = {
                "pid": pid,
                "alive": pid is not None,
                "grpc": info["grpc"],
                "serving": pid is not None and self.serving(router, 1.0),
                "log": info["log"],
            }
        return managers

    def _is_ours(self, pid: int, router: str) -> bool:
        """True if ``pid`` is alive (not a zombie) and is ``router``'s node manager of this lab.

        Checking the command line guards against killing a reused PID.
        """
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        if _exited(pid):
            return False
        # its state dir names lab and router, whether it enters the namespace or is put there
        mine = str(self.state.directory / router).encode()
        return b"srv6pm.node_manager" in cmdline and mine in cmdline

    def _wait_exit(self, router: str, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        proc = self._procs.get(router)
        while time.monotonic() < deadline:
            if proc is not None and proc.pid == pid:
                proc.poll()  # reap our own child so it does not linger as a zombie
            # not _is_ours(): an exiting process has an empty cmdline before it is a zombie
            if _exited(pid):
                return True
            time.sleep(0.05)
        return False

    def _log_tail(self, router: str, lines: int = 30) -> str:
        try:
            text = self.log_path(router).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def _remove_tree(path: Path) -> None:
    """Remove a BPF pin directory (pinned objects go away by unlink)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _exited(pid: int) -> bool:
    """True if ``pid`` is gone or a zombie (dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
