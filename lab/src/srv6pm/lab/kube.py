"""A real Kubernetes API server (etcd + kube-apiserver) for tests that need the server's own
validation: ``kubectl apply --server-side``, ``helm install`` of the chart.

``make servers`` (scripts/install-kube.sh) builds etcd, kube-apiserver, kubectl and helm from
their Go module sources into ``${SRV6PM_CACHE:-~/.cache/srv6pm}/kube-<version>/bin``; this module
runs them::

    with KubeApiServer() as kube:
        kube.kubectl("create", "namespace", "srv6pm")
        kube.helm("install", "srv6pm", "deploy/helm/srv6pm", "--namespace", "srv6pm")

Each server lives in a temporary directory of its own (etcd's data, certificates, kubeconfig,
logs), removed on exit. It is an API server only, with no controller manager, scheduler or
kubelet: objects are validated and stored, pods never run, and nothing creates a namespace's
``default`` ServiceAccount. A namespace must exist for real before a server-side dry run into it.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from srv6pm.lab import pki
from srv6pm.lab.servers import LOG_TAIL_LINES, Server, ServerError, cache_dir, free_ports

KUBE_VERSION_DEFAULT = "1.34.4"  # scripts/install-kube.sh, same KUBE_VERSION override
BINARIES = ("etcd", "kube-apiserver", "kubectl", "helm")
ADMIN_USER = "srv6pm-admin"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
COMMAND_TIMEOUT_S = 120.0
_SERVING_NAME = "kube-apiserver"  # the serving certificate's name in the lab PKI


class KubeCommandError(ServerError):
    """kubectl or helm exited non-zero; ``result`` holds its output."""

    def __init__(self, result: subprocess.CompletedProcess[str]) -> None:
        self.result = result
        command = " ".join(str(a) for a in result.args)
        detail = (result.stderr or result.stdout).strip()
        super().__init__(f"`{command}` exited with code {result.returncode}: {detail}")


def kube_version() -> str:
    """The Kubernetes version to run (KUBE_VERSION, as scripts/install-kube.sh reads it)."""
    return os.environ.get("KUBE_VERSION") or KUBE_VERSION_DEFAULT


def kube_binaries(version: str | None = None) -> Path:
    """The directory holding etcd, kube-apiserver, kubectl and helm; ServerError if the install
    script has not completed there."""
    version = version or kube_version()
    bindir = cache_dir() / f"kube-{version}" / "bin"
    missing = [b for b in BINARIES if not os.access(bindir / b, os.X_OK)]
    # The script writes .complete last: binaries without it are a build that was interrupted.
    if missing or not (bindir / ".complete").is_file():
        what = ", ".join(missing) if missing else "its .complete marker"
        raise ServerError(
            f"Kubernetes {version} is not installed in {bindir} (no {what}): "
            "run `bash scripts/install-kube.sh` (or `make servers`)"
        )
    return bindir


def _http_ok(conn: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> bool:
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class _Etcd(Server):
    """One etcd member on 127.0.0.1, no fsync: a test store need not survive a power cut."""

    name = "etcd"

    def __init__(
        self,
        workdir: Path,
        binary: Path,
        client_port: int,
        peer_port: int,
        *,
        start_timeout: float,
        stop_timeout: float,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        self.binary = binary
        self.client_port = client_port
        self.peer_port = peer_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def _prepare(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [
            str(self.binary),
            "--name=srv6pm",
            f"--data-dir={self.workdir / 'data'}",
            f"--listen-client-urls={self.url}",
            f"--advertise-client-urls={self.url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=srv6pm={peer}",
            f"--initial-cluster-token=srv6pm-{secrets.token_hex(4)}",
            "--unsafe-no-fsync",
        ]

    def _serving(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.client_port, timeout=1)
        return _http_ok(conn, "/health", {})


class _ApiServer(Server):
    """kube-apiserver over TLS on 127.0.0.1, a static admin token, RBAC."""

    name = "kube-apiserver"

    def __init__(
        self,
        workdir: Path,
        binary: Path,
        port: int,
        etcd: _Etcd,
        token: str,
        *,
        start_timeout: float,
        stop_timeout: float,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        self.binary = binary
        self.port = port
        self.etcd = etcd
        self.token = token
        self.pki = pki.Pki(self.workdir / "pki")
        self.service_account_key = self.workdir / "service-account.key"
        self.service_account_pub = self.workdir / "service-account.pub"
        self.token_file = self.workdir / "tokens.csv"

    def _logs(self) -> list[Path]:
        # A store that died explains a server that never gets ready.
        return [self.output_path, self.etcd.output_path]

    def _prepare(self) -> list[str]:
        pki.create(self.pki.directory, [_SERVING_NAME], ca_name="srv6pm kube-apiserver CA")
        # The signing key (PKCS#8) and, apart, its public key: the verifying side reads public
        # keys only.
        key = ec.generate_private_key(ec.SECP256R1())
        _write_private(
            self.service_account_key,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        self.service_account_pub.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        _write_private(
            self.token_file, f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
        )
        return [
            str(self.binary),
            f"--etcd-servers={self.etcd.url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'certs'}",  # unused with the files below, never /var/run
            f"--tls-cert-file={self.pki.server_cert(_SERVING_NAME)}",
            f"--tls-private-key-file={self.pki.server_key(_SERVING_NAME)}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.service_account_pub}",
            f"--service-account-signing-key-file={self.service_account_key}",
            f"--token-auth-file={self.token_file}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # A host-network or privileged pod spec is refused otherwise, and the node manager's
            # DaemonSet runs on the host's network.
            "--allow-privileged=true",
            # No kubelet or node ever serves the "kubernetes" Service's endpoints.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        ]

    def _serving(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=1, context=context)
        # /readyz, not /livez: ready means etcd reached and the post-start hooks (RBAC's
        # bootstrap roles, the system namespaces' priority classes...) done.
        return _http_ok(conn, "/readyz", {"Authorization": f"Bearer {self.token}"})


def _write_private(path: Path, data: str | bytes) -> None:
    """Created 0600, never readable by others even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


class KubeApiServer:
    """etcd and kube-apiserver on free 127.0.0.1 ports, an admin (system:masters) kubeconfig,
    and kubectl and helm pointed at them::

        with KubeApiServer() as kube:
            kube.kubectl("apply", "--server-side", "-f", "-", input=manifest)

    Measured here: ~3-4 s to ready, ~1.2 s to stop, ~40 MB of RSS for etcd and ~270 MB for the
    apiserver.
    """

    def __init__(
        self,
        *,
        version: str | None = None,
        tmp_root: Path | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
    ) -> None:
        """``version``: the installed Kubernetes version to run (default: KUBE_VERSION or
        1.34.4); ``tmp_root``: where the temporary directory goes (default: the system's);
        ``start_timeout``: seconds for /readyz to pass; ``stop_timeout``: seconds each process
        gets after SIGTERM before SIGKILL."""
        self.version = version or kube_version()
        self.binaries = kube_binaries(self.version)
        self.tmp_root = tmp_root
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.token = secrets.token_urlsafe(32)
        self.etcd_client_port, self.etcd_peer_port, self.port = free_ports(3)
        self._workdir: Path | None = None
        self._etcd: _Etcd | None = None
        self._apiserver: _ApiServer | None = None

    @property
    def url(self) -> str:
        """The API server's URL (HTTPS, certificate signed by the CA in the kubeconfig)."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def workdir(self) -> Path:
        """The temporary directory of the running server."""
        if self._workdir is None:
            raise ServerError("the Kubernetes API server is not running: start it first")
        return self._workdir

    @property
    def kubeconfig(self) -> Path:
        """A kubeconfig file (user ``srv6pm-admin`` in system:masters) for this server."""
        return self.workdir / "kubeconfig"

    @property
    def etcd_pid(self) -> int | None:
        return self._etcd.pid if self._etcd is not None else None

    @property
    def apiserver_pid(self) -> int | None:
        return self._apiserver.pid if self._apiserver is not None else None

    @property
    def running(self) -> bool:
        return self._apiserver is not None and self._apiserver.running

    @property
    def env(self) -> dict[str, str]:
        """The environment kubectl and helm run with: this server's kubeconfig, and their
        caches and configuration in the temporary directory rather than the user's home."""
        home = self.workdir
        return os.environ | {
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(home / "kube-cache"),
            "HELM_CACHE_HOME": str(home / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(home / "helm" / "config"),
            "HELM_DATA_HOME": str(home / "helm" / "data"),
        }

    def start(self) -> None:
        """Start etcd, then kube-apiserver, and return once /readyz passes; ServerError with
        the tail of their logs otherwise (nothing is left running then)."""
        if self._workdir is not None:
            raise ServerError(f"the Kubernetes API server is already running in {self._workdir}")
        workdir = Path(tempfile.mkdtemp(prefix="srv6pm-kube-", dir=self.tmp_root)).resolve()
        self._workdir = workdir
        try:
            self._etcd = _Etcd(
                workdir / "etcd",
                self.binaries / "etcd",
                self.etcd_client_port,
                self.etcd_peer_port,
                start_timeout=self.start_timeout,
                stop_timeout=self.stop_timeout,
            )
            self._etcd.start()
            self._apiserver = _ApiServer(
                workdir / "apiserver",
                self.binaries / "kube-apiserver",
                self.port,
                self._etcd,
                self.token,
                start_timeout=self.start_timeout,
                stop_timeout=self.stop_timeout,
            )
            self._apiserver.start()
            _write_private(self.kubeconfig, json.dumps(self._kubeconfig(), indent=2))
        except BaseException:
            self.stop()
            raise

    def _kubeconfig(self) -> dict[str, object]:
        if self._apiserver is None:
            raise ServerError("the Kubernetes API server is not running: start it first")
        name = "srv6pm-test"
        cluster = {"server": self.url, "certificate-authority": str(self._apiserver.pki.ca)}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": ADMIN_USER, "user": {"token": self.token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": ADMIN_USER}}],
            "current-context": name,
        }

    def stop(self) -> None:
        """SIGTERM the apiserver, then etcd (SIGKILL after stop_timeout), only the processes
        this object started; then remove the temporary directory. A no-op when stopped."""
        try:
            for server in (self._apiserver, self._etcd):
                if server is not None:
                    server.stop()
        finally:
            self._apiserver = self._etcd = None
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of each process's log (while running: stop() removes them)."""
        servers = [s for s in (self._apiserver, self._etcd) if s is not None]
        return "\n".join(s.log_tail(lines) for s in servers)

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = COMMAND_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        """Run the installed kubectl against this server; KubeCommandError on a non-zero exit
        when ``check``."""
        return self._run("kubectl", args, input, check, timeout)

    def helm(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = COMMAND_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        """Run the installed helm against this server; KubeCommandError on a non-zero exit
        when ``check``."""
        return self._run("helm", args, input, check, timeout)

    def _run(
        self, binary: str, args: tuple[str, ...], input: str | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        if not self.running:
            raise ServerError("the Kubernetes API server is not running: start it first")
        result = subprocess.run(
            [str(self.binaries / binary), *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise KubeCommandError(result)
        return result

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
