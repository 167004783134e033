"""A running lab: network namespaces, veth links, addresses, routes and node managers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import srv6pm

from . import drops
from .drops import DropRule
from .tcp import DEFAULT_PORT as TCP_PORT
from .tcp import TcpResult
from .topology import LabError, Topology, interface_name, parse_ipv6_dst
from .traffic import DEFAULT_PORT, ReceiveResult, SendResult

if TYPE_CHECKING:
    import grpc

    from .pki import Pki

RUN_ROOT = Path("/run/srv6pm/lab")
BPF_ROOT = Path("/sys/fs/bpf/srv6pm")
NETNS_DIR = Path("/run/netns")
HEALTH_TIMEOUT_S = 15.0
MAX_SEND_MESSAGE = 64 << 20  # a desired state of 10,000+ flows


class Lab:
    """One instance of a topology, identified by its namespace prefix.

    All persistent facts (namespaces made, node manager PIDs, TLS on or off) live in the
    state file, so a ``Lab`` built in another process (e.g. ``srv6pm lab down``) can tear
    down what ``up`` made.

    With ``tls`` the node managers serve mutual TLS only, with a throwaway PKI
    (:mod:`srv6pm.lab.pki`) made by ``up``; :meth:`channel` connects with its client
    certificate.
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
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # --- names and paths -----------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """``/run/srv6pm/lab/<prefix>``: state file and node manager logs/state."""
        return RUN_ROOT / self.prefix

    @property
    def state_file(self) -> Path:
        """The JSON state file."""
        return self.state_dir / "state.json"

    def netns(self, node: str) -> str:
        """Namespace name of ``node``: ``<prefix>-<node>``."""
        self._check_node(node)
        return f"{self.prefix}-{node}"

    def interface(self, node: str, peer: str) -> str:
        """Name of ``node``'s interface toward ``peer`` (inside ``node``'s namespace)."""
        self._check_node(node)
        self._check_node(peer)
        self.topology.address(node, peer)  # raises if there is no such link
        return interface_name(node, peer)

    def grpc_port(self, router: str) -> int:
        """The node manager port of ``router`` (``--base-port`` renumbering applied)."""
        self._check_router(router)
        if self.base_port is None:
            return self.topology.routers[router].grpc_port
        return self.base_port + list(self.topology.routers).index(router)

    def metrics_port(self, router: str) -> int:
        """The node manager's Prometheus port: the gRPC ports' block, then as many again."""
        return self.grpc_port(router) + len(self.topology.routers)

    def grpc_address(self, router: str) -> str:
        """``127.0.0.1:<port>`` (or ``unix:<path>`` with ``capabilities``) of ``router``'s node
        manager (as recorded, once started)."""
        info = self._read_state().get("node_managers", {}).get(router)
        return str(info["grpc"]) if info else self._listen(router)

    def _listen(self, router: str) -> str:
        if self.capabilities is not None:
            return f"unix:{self.state_dir / router}.sock"
        return f"127.0.0.1:{self.grpc_port(router)}"

    @property
    def tls(self) -> bool:
        """True if the node managers serve mutual TLS: as recorded by ``up`` once the lab is
        up (whatever this ``Lab`` was built with), else the ``tls`` it was built with."""
        state = self._read_state()
        return bool(state.get("tls", False)) if state else self._tls

    @property
    def pki(self) -> Pki:
        """Paths of the lab's PKI (``ca``, ``client_cert``, ``client_key``, server files),
        in ``<state_dir>/pki``; :class:`LabError` if the lab runs without TLS."""
        if not self.tls:
            raise LabError(f"lab {self.prefix!r} runs without TLS: it has no PKI")
        from .pki import Pki  # noqa: PLC0415 (cryptography only for TLS labs)

        return Pki(self.state_dir / "pki")

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

    def bpf_dir(self, router: str) -> Path:
        """BPF pin directory of ``router``'s node manager."""
        return BPF_ROOT / self.netns(router)

    def log_path(self, router: str) -> Path:
        """Log file of ``router``'s node manager."""
        return self.state_dir / f"{router}.log"

    def pid(self, router: str) -> int | None:
        """PID of ``router``'s node manager if it is running."""
        self._check_router(router)
        info = self._read_state().get("node_managers", {}).get(router)
        pid = info.get("pid") if info else None
        return pid if pid is not None and self._is_ours(pid, router) else None

    # --- up / down / status --------------------------------------------------------------

    def up(self, start_node_managers: bool = True, keep_on_error: bool = False) -> None:
        """Create the namespaces, links, addresses and routes, then start the node managers.

        On failure everything made so far is torn down (unless ``keep_on_error``) and
        :class:`LabError` is raised.
        """
        _require_root()
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
            "node_managers": {},
        }
        self._write_state(state)
        try:
            if self._tls:
                from . import pki  # noqa: PLC0415 (cryptography only for TLS labs)

                pki.create(self.state_dir / "pki", self.topology.routers)
            self._build_network(state)
            if start_node_managers:
                for router in self.topology.routers:
                    self.start_node_manager(router, wait=False)
                for router in self.topology.routers:
                    self.wait_serving(router)
            state = self._read_state()
            state["complete"] = True
            self._write_state(state)
        except BaseException:
            if not keep_on_error:
                with contextlib.suppress(Exception):
                    self.down()
            raise

    def down(self) -> list[str]:
        """Tear down what ``up`` made (best effort, idempotent); returns the problems met."""
        _require_root()
        state = self._read_state()
        problems: list[str] = []
        for router in state.get("node_managers", {}):
            try:
                self.stop_node_manager(router)
            except (LabError, OSError) as e:
                problems.append(f"stop node manager {router}: {e}")
        for ns in reversed(state.get("namespaces", [])):
            if (NETNS_DIR / ns).exists():
                r = _run(["ip", "netns", "delete", ns], check=False)
                if r.returncode != 0:
                    problems.append(f"delete namespace {ns}: {r.stderr.strip()}")
        bpf_dirs = {str(self.bpf_dir(r)) for r in self.topology.routers}
        bpf_dirs |= {i["bpf_dir"] for i in state.get("node_managers", {}).values()}
        for path in sorted(bpf_dirs):
            try:
                _remove_tree(Path(path))
            except OSError as e:
                problems.append(f"remove {path}: {e}")
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self._procs.clear()
        return problems

    def is_up(self) -> bool:
        """True if this prefix has a state file (``up`` ran and ``down`` did not)."""
        return self.state_file.exists()

    def status(self) -> dict[str, Any]:
        """What is up: namespaces (exist?), node managers (pid, alive, serving, address, log)."""
        state = self._read_state()
        managers = {}
        for router, info in state.get("node_managers", {}).items():
            pid = self.pid(router)
            managers[router] = {
                "pid": pid,
                "alive": pid is not None,
                "grpc": info["grpc"],
                "serving": pid is not None and self._health_serving(router, 1.0),
                "log": info["log"],
            }
        return {
            "prefix": self.prefix,
            "up": bool(state),
            "complete": state.get("complete", False),
            "topology": state.get("topology"),
            "tls": bool(state.get("tls", False)),
            "state_dir": str(self.state_dir),
            "namespaces": {ns: (NETNS_DIR / ns).exists() for ns in state.get("namespaces", [])},
            "node_managers": managers,
        }

    # --- node managers -------------------------------------------------------------------

    def node_manager_argv(self, router: str) -> list[str]:
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
            where = ["--netns", self.netns(router)]
            metrics = ["--metrics-listen", f"127.0.0.1:{self.metrics_port(router)}"]
            runner: list[str] = []
        else:
            where, metrics = [], []
            # bounding and inheritable sets: what root keeps across exec, like a container's
            caps = ",".join(f"+{c.lower()}" for c in self.capabilities)
            runner = [
                "nsenter",
                f"--net={NETNS_DIR / self.netns(router)}",
                "setpriv",
                f"--bounding-set=-all{',' if caps else ''}{caps}",
                "--inh-caps=-all",
                "--",
            ]
        return [
            *runner,
            sys.executable,
            "-m",
            "srv6pm.node_manager",
            "--node-id",
            router,
            *where,
            "--listen",
            self._listen(router),
            "--bpf-dir",
            str(self.bpf_dir(router)),
            "--state-dir",
            str(self.state_dir / router),
            "--period-s",
            f"{self.topology.period_s:g}",
            # every namespace reads the one kernel clock: synchronised by construction
            "--clock-sync",
            "yes",
            *metrics,
            *tls,
            *(
                arg
                for name, value in self.node_manager_settings.items()
                for arg in (f"--{name.replace('_', '-')}", value)
            ),
        ]

    def start_node_manager(self, router: str, wait: bool = True) -> int:
        """Start ``router``'s node manager (detached, logging to :meth:`log_path`); its PID.

        With ``wait`` it also waits until the gRPC health check answers SERVING.
        """
        _require_root()
        state = self._read_state()
        if not state:
            raise LabError(f"lab {self.prefix!r} is not up")
        if self.pid(router) is not None:
            raise LabError(f"node manager {router} is already running (pid {self.pid(router)})")
        (self.state_dir / router).mkdir(exist_ok=True)
        with open(self.log_path(router), "ab") as log:
            log.write(f"--- {time.strftime('%F %T')} starting\n".encode())
            log.flush()
            proc = subprocess.Popen(
                self.node_manager_argv(router),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_child_env(),
                start_new_session=True,
            )
        self._procs[router] = proc
        state["node_managers"][router] = {
            "pid": proc.pid,
            "grpc": self._listen(router),
            "log": str(self.log_path(router)),
            "bpf_dir": str(self.bpf_dir(router)),
            "state_dir": str(self.state_dir / router),
            "argv": self.node_manager_argv(router),
        }
        self._write_state(state)
        if wait:
            self.wait_serving(router)
        return proc.pid

    def stop_node_manager(self, router: str, kill: bool = False, timeout: float = 5.0) -> None:
        """Stop ``router``'s node manager: SIGKILL if ``kill``, else SIGTERM then SIGKILL."""
        pid = self.pid(router)
        if pid is not None:
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
            if not self._wait_exit(router, pid, timeout) and not kill:
                os.kill(pid, signal.SIGKILL)
            if not self._wait_exit(router, pid, timeout):
                raise LabError(f"node manager {router} (pid {pid}) does not die")
        self._procs.pop(router, None)
        state = self._read_state()
        if router in state.get("node_managers", {}):
            state["node_managers"][router]["pid"] = None
            self._write_state(state)

    def wait_serving(self, router: str, timeout: float = HEALTH_TIMEOUT_S) -> None:
        """Wait until ``router``'s node manager answers the gRPC health check with SERVING."""
        address = self.grpc_address(router)
        deadline = time.monotonic() + timeout
        while not self._health_serving(router, 1.0):
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

    # --- running things in namespaces ----------------------------------------------------

    def exec(
        self, node: str, argv: Sequence[str], *, check: bool = False, **kwargs: Any
    ) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run(["ip", "netns", "exec", <ns>, *argv], check=check, **kwargs)``.

        Without ``env`` the child gets a PYTHONPATH that finds this package.
        """
        kwargs.setdefault("env", _child_env())
        return subprocess.run(
            ["ip", "netns", "exec", self.netns(node), *argv], check=check, **kwargs
        )

    def popen(self, node: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Like :meth:`exec` but returns the running ``Popen``."""
        kwargs.setdefault("env", _child_env())
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

    def send_udp(
        self,
        node: str,
        dst: str,
        count: int,
        *,
        port: int = DEFAULT_PORT,
        size: int = 64,
        at: float | None = None,
        interval: float = 0.001,
        timeout: float | None = None,
        tclass: int = 0,
    ) -> SendResult:
        """Send exactly ``count`` UDP datagrams from ``node`` (see :mod:`srv6pm.lab.traffic`)."""
        argv = [
            sys.executable,
            "-m",
            "srv6pm.lab.traffic",
            "--dst",
            dst,
            "--count",
            str(count),
            "--port",
            str(port),
            "--size",
            str(size),
            "--interval",
            str(interval),
            "--tclass",
            str(tclass),
        ]
        if at is not None:
            argv += ["--at", repr(at)]
        r = self.exec(node, argv, capture_output=True, text=True, timeout=timeout, check=False)
        if r.returncode != 0:
            raise LabError(f"traffic sender in {node} failed: {r.stderr.strip()}")
        return _result(SendResult, r.stdout.strip().splitlines()[-1])

    @contextlib.contextmanager
    def receive_udp(
        self, node: str, *, port: int = DEFAULT_PORT, idle: float = 1.0, timeout: float = 60.0
    ) -> Iterator[UdpReceiver]:
        """Context manager: a UDP receiver listening in ``node``; call ``.result()`` in it."""
        argv = [
            sys.executable,
            "-m",
            "srv6pm.lab.traffic",
            "--listen",
            "--port",
            str(port),
            "--idle",
            str(idle),
            "--timeout",
            str(timeout),
        ]
        proc = self.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        receiver = UdpReceiver(proc)
        try:
            receiver.wait_ready()
            yield receiver
        finally:
            receiver.close()

    def tcp_transfer(
        self, src: str, dst: str, dst_address: str, nbytes: int, port: int = TCP_PORT
    ) -> tuple[TcpResult, TcpResult]:
        """Send ``nbytes`` over one TCP connection from host ``src`` to host ``dst`` (at
        ``dst_address``); what the sender and the receiver report (see :mod:`srv6pm.lab.tcp`)."""
        module = [sys.executable, "-m", "srv6pm.lab.tcp", "--port", str(port)]
        receiver = self.popen(
            dst, [*module, "--listen"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            if '"ready"' not in _readline(receiver, 10.0):
                raise LabError(f"TCP receiver in {dst} did not start")
            sent = self.exec(
                src,
                [*module, "--connect", dst_address, "--bytes", str(nbytes)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if sent.returncode != 0:
                raise LabError(f"TCP sender in {src} failed: {sent.stderr.strip()}")
            out, err = receiver.communicate(timeout=30)
            if receiver.returncode != 0:
                raise LabError(f"TCP receiver in {dst} failed: {err.strip()}")
        finally:
            if receiver.poll() is None:
                receiver.kill()
                receiver.communicate()
        return _result(TcpResult, sent.stdout.splitlines()[-1]), _result(
            TcpResult, out.splitlines()[-1]
        )

    @contextlib.contextmanager
    def offloads(self, node: str, peer: str, **features: bool) -> Iterator[None]:
        """Context manager: ethtool features (``tso``, ``gso``, ``gro``, ...) of ``node``'s
        interface toward ``peer`` set for its duration, then set back as they were."""
        interface = self.interface(node, peer)
        shown = self.exec(node, ["ethtool", "-k", interface], capture_output=True, text=True)
        names = {
            "tso": "tcp-segmentation-offload",
            "gso": "generic-segmentation-offload",
            "gro": "generic-receive-offload",
        }
        before = {f: f"{names.get(f, f)}: on" in shown.stdout for f in features}
        self._ethtool(node, interface, features)
        try:
            yield
        finally:
            self._ethtool(node, interface, before)

    def _ethtool(self, node: str, interface: str, features: dict[str, bool]) -> None:
        args = [a for f, on in features.items() for a in (f, "on" if on else "off")]
        r = self.exec(node, ["ethtool", "-K", interface, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise LabError(f"ethtool in {node} failed: {r.stderr.strip()}")

    # --- loss injection ------------------------------------------------------------------

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
        (its ``handle`` identifies it in :meth:`drop_counters`).
        """
        if not 1 <= count <= drops.MAX_COUNT:
            raise LabError(f"count must be in 1..{drops.MAX_COUNT}, got {count}")
        interface = self.interface(node, to_peer)
        parsed = parse_ipv6_dst(dst) if dst is not None else None
        script = drops.add_rule_script(interface, count, parsed, min_length, every)
        r = self.exec(
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
        r = self.exec(
            node,
            ["nft", "-j", "list", "table", "ip6", drops.TABLE],
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
        self.exec(
            node, ["nft", "delete", "table", "ip6", drops.TABLE], capture_output=True, check=False
        )

    @contextlib.contextmanager
    def delay(self, node: str, to_peer: str, delay_ms: float, queue: int = 7) -> Iterator[None]:
        """Context manager: every packet ``node`` forwards toward ``to_peer`` is held
        ``delay_ms`` (see :mod:`srv6pm.lab.delay`; there is no netem in this kernel)."""
        rule = [
            "-t",
            "mangle",
            "FORWARD",
            "-o",
            self.interface(node, to_peer),
            "-j",
            "NFQUEUE",
            "--queue-num",
            str(queue),
            "--queue-bypass",
        ]
        argv = [
            sys.executable,
            "-m",
            "srv6pm.lab.delay",
            "--queue",
            str(queue),
            "--delay-ms",
            str(delay_ms),
        ]
        proc = self.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if _readline(proc, 10.0).strip() != "ready":
                raise LabError(
                    f"delayer in {node} did not start: {proc.stderr.read() if proc.stderr else ''}"
                )
            r = self.exec(
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
                self.exec(node, ["ip6tables", rule[0], rule[1], "-D", *rule[2:]], check=False)
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    # --- internals -----------------------------------------------------------------------

    def _check_node(self, node: str) -> None:
        if node not in self.topology.nodes:
            raise LabError(f"unknown node {node!r} (nodes: {', '.join(self.topology.nodes)})")

    def _check_router(self, router: str) -> None:
        if router not in self.topology.routers:
            raise LabError(
                f"unknown router {router!r} (routers: {', '.join(self.topology.routers)})"
            )

    def _read_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise LabError(f"unreadable state file {self.state_file}: {e}") from e
        return data if isinstance(data, dict) else {}

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_file)

    def _preflight(self, start_node_managers: bool) -> None:
        """Refuse to start over anything that exists already (nothing is created here)."""
        if self.state_dir.exists():
            raise LabError(
                f"lab {self.prefix!r} is already up (state in {self.state_dir}); "
                f"run `srv6pm lab down` first"
            )
        taken = [self.netns(n) for n in self.topology.nodes if (NETNS_DIR / self.netns(n)).exists()]
        if taken:
            raise LabError(f"namespaces already exist: {', '.join(taken)}")
        for tool in ("ip", "sysctl", "nft"):
            if shutil.which(tool) is None:
                raise LabError(f"{tool!r} not found (install iproute2, procps and nftables)")
        if start_node_managers:
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

    def _build_network(self, state: dict[str, Any]) -> None:
        topo = self.topology
        for node in topo.nodes:
            ns = self.netns(node)
            state["namespaces"].append(ns)  # recorded first, so down() removes half-made ones
            self._write_state(state)
            _run(["ip", "netns", "add", ns])
            # defaults first: interfaces created afterwards inherit them
            settings = {"net.ipv6.conf.all.accept_dad": 0, "net.ipv6.conf.default.accept_dad": 0}
            if node in topo.routers:
                settings |= {
                    "net.ipv6.conf.all.forwarding": 1,
                    "net.ipv6.conf.all.seg6_enabled": 1,
                    "net.ipv6.conf.default.seg6_enabled": 1,
                    "net.ipv6.conf.lo.seg6_enabled": 1,
                }
            self._sysctl(node, settings)
        batch = []
        for link in topo.links:
            (a, _), (b, _) = link.ends.items()
            mtu = f" mtu {link.mtu}" if link.mtu else ""
            batch.append(
                f"link add name {interface_name(a, b)} netns {self.netns(a)}{mtu} type veth "
                f"peer name {interface_name(b, a)} netns {self.netns(b)}{mtu}"
            )
        _run(["ip", "-batch", "-"], input="\n".join(batch) + "\n")
        for node in topo.nodes:
            ifaces = [(interface_name(node, p), topo.address(node, p)) for p in topo.peers(node)]
            settings = {f"net.ipv6.conf.{ifname}.accept_dad": 0 for ifname, _ in ifaces}
            if node in topo.routers:
                settings |= {f"net.ipv6.conf.{ifname}.seg6_enabled": 1 for ifname, _ in ifaces}
            if settings:
                self._sysctl(node, settings)
            cmds = ["link set lo up"]
            cmds += [f"link set {ifname} up" for ifname, _ in ifaces]
            cmds += [f"address add {addr} dev {ifname} nodad" for ifname, addr in ifaces]
            cmds += [f"route add {r.dst} via {r.via}" for r in topo.routes(node)]
            _run(["ip", "-6", "-n", self.netns(node), "-batch", "-"], input="\n".join(cmds) + "\n")

    def _sysctl(self, node: str, settings: dict[str, int]) -> None:
        argv = ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items())]
        r = self.exec(node, argv, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise LabError(f"sysctl in {node} failed: {r.stderr.strip()}")

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
        mine = str(self.state_dir / router).encode()
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

    def _health_serving(self, router: str, timeout: float) -> bool:
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

    def _log_tail(self, router: str, lines: int = 30) -> str:
        try:
            text = self.log_path(router).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


class UdpReceiver:
    """A ``srv6pm.lab.traffic --listen`` process; see :meth:`Lab.receive_udp`."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the receiver has bound its socket."""
        assert self.proc.stdout is not None
        line = _readline(self.proc, timeout)
        if '"ready"' not in line:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise LabError(f"UDP receiver did not start: {err.strip() or line}")

    def result(self, timeout: float = 60.0) -> ReceiveResult:
        """Wait for the receiver to finish (idle/timeout) and return what it counted."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            out, err = self.proc.communicate()
        if self.proc.returncode != 0 or not out.strip():
            raise LabError(f"UDP receiver failed: {err.strip()}")
        return _result(ReceiveResult, out.strip().splitlines()[-1])

    def close(self) -> None:
        """Stop the receiver if still running."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return proc.stdout.readline()


_R = TypeVar("_R", SendResult, ReceiveResult, TcpResult)


def _result(cls: type[_R], line: str) -> _R:
    data = json.loads(line)
    return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def _run(
    argv: list[str], input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, input=input, capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise LabError(
            f"`{' '.join(argv)}` failed: {r.stderr.strip()}"
            + (f"\ninput:\n{input}" if input else "")
        )
    return r


def _child_env() -> dict[str, str]:
    """The environment with a PYTHONPATH that finds every ``srv6pm`` package we can import."""
    roots = [str(Path(p).parent) for p in srv6pm.__path__]
    old = os.environ.get("PYTHONPATH", "")
    paths = [*roots, *(p for p in old.split(os.pathsep) if p and p not in roots)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


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


def _require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, nftables, BPF)")
