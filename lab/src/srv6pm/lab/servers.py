"""Real Kafka and InfluxDB servers for tests, the demo and benchmarks.

``make servers`` (scripts/install-kafka.sh, scripts/install-influxdb.sh) installs them into
``${SRV6PM_CACHE:-~/.cache/srv6pm}``; this module runs them from there, each in a directory the
caller owns::

    with KafkaServer(tmp / "kafka") as kafka, InfluxServer(tmp / "influxdb") as influx:
        kafka.create_topic("records", partitions=3, retention_ms=3_600_000)
        influx.create_database("srv6pm", "autogen", "7d")

``stop()`` (graceful) or ``kill()`` (SIGKILL, for fault tests) and ``start()`` again resume on the
same data: topics, committed offsets and points survive.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed

KAFKA_VERSION_DEFAULT = "4.4.0"  # scripts/install-kafka.sh, same KAFKA_VERSION override
INFLUXDB_VERSION = "1.8.10"  # scripts/install-influxdb.sh
LOG_TAIL_LINES = 30


class ServerError(RuntimeError):
    """A server is not installed, did not start, or refused a request."""


def cache_dir() -> Path:
    """Where the install scripts put the servers (read at each call: tests may override it)."""
    return Path(os.environ.get("SRV6PM_CACHE") or Path.home() / ".cache" / "srv6pm")


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now (not reserved: bind it soon)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_ports(n: int) -> list[int]:
    """n distinct free ports (the kernel may hand out a just-closed port again)."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


class _Server(ABC):
    """One server process started from a working directory, stopped by its PID only."""

    name: str

    def __init__(self, workdir: Path, start_timeout: float, stop_timeout: float) -> None:
        self.workdir = Path(workdir).resolve()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.output_path = self.workdir / f"{self.name}.out"  # the process's stdout and stderr
        self.last_start_s: float | None = None  # how long the last start() took until serving
        self._proc: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def _prepare(self) -> list[str]:
        """Write the configuration (and initialise storage once); the command to run."""

    @abstractmethod
    def _serving(self) -> bool:
        """One quick readiness probe."""

    def _logs(self) -> list[Path]:
        """Files whose tails explain a failure."""
        return [self.output_path]

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(f"--- {p} ---\n{_tail(p, lines)}" for p in self._logs())

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server and return once it serves; ServerError (with its log) otherwise."""
        if self.running:
            raise ServerError(f"{self.name} is already running (pid {self.pid})")
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = self._prepare()
        with self.output_path.open("ab") as out:
            # Own session: a terminal's Ctrl-C reaches the test runner, which stops the server
            # in order, not the server itself.
            self._proc = subprocess.Popen(
                command,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_serving(self._proc, began + self.start_timeout)
        except BaseException:
            self.kill()  # never leave a half-started server behind, even on Ctrl-C
            raise
        self.last_start_s = time.monotonic() - began

    def _wait_serving(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        while not self._serving():
            code = proc.poll()
            if code is not None:
                raise ServerError(f"{self.name} exited with code {code}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ServerError(
                    f"{self.name} did not serve within {self.start_timeout:.0f} s\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after stop_timeout; a no-op when not running."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL, no shutdown at all: what a crash leaves on disk."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._proc = None

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class KafkaServer(_Server):
    """A single-node Kafka (KRaft, combined broker and controller) on 127.0.0.1.

    Internal topics have one replica, consumer groups start rebalancing at once, and topics are
    never created implicitly: the code under test must create what it uses.

    Measured here: ~3.5-5.5 s to the first start (storage format included), ~2.5-3 s to restart
    after stop(), ~12.5 s after kill(): the controller fences the dead incarnation only when its
    session (broker.session.timeout.ms, 9 s) expires, as a real broker does.
    """

    name = "kafka"

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        controller_port: int | None = None,
        *,
        heap: str = "256m",
        start_timeout: float = 90.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        ports = free_ports(2)
        self.port = port or ports[0]
        self.controller_port = controller_port or next(p for p in ports if p != self.port)
        self.heap = heap
        self.version = os.environ.get("KAFKA_VERSION") or KAFKA_VERSION_DEFAULT
        self.server_log = self.workdir / "logs" / "server.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _libs(self) -> Path:
        libs = cache_dir() / f"kafka-{self.version}" / "libs"
        if not (libs / ".complete").is_file():
            raise ServerError(
                f"Kafka {self.version} is not installed in {libs}: run `make servers`"
            )
        return libs

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise ServerError("java is not on PATH: run `make servers`")
        return java

    def _logs(self) -> list[Path]:
        return [self.output_path, self.server_log]

    def _prepare(self) -> list[str]:
        libs, java = self._libs(), self._java()
        data = self.workdir / "data"
        properties = self.workdir / "server.properties"
        properties.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "auto.create.topics.enable=false",
                    "group.initial.rebalance.delay.ms=0",
                    # One broker: one replica of each internal topic, and a few partitions
                    # rather than 50, which only slow the first group join.
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=4",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=4",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "share.coordinator.state.topic.num.partitions=4",
                    "",
                ]
            )
        )
        log4j2 = self.workdir / "log4j2.properties"
        log4j2.write_text(
            "\n".join(
                [
                    "status = warn",
                    "appender.file.type = File",
                    "appender.file.name = file",
                    f"appender.file.fileName = {self.server_log}",
                    "appender.file.layout.type = PatternLayout",
                    "appender.file.layout.pattern = [%d] %p %m (%c)%n",
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.file.ref = file",
                    "",
                ]
            )
        )
        jvm = [
            java,
            f"-Xmx{self.heap}",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j2}",
            "-cp",
            f"{libs}/*",
        ]
        # Formatted once: a restart must find its topics and offsets again.
        if not (data / "meta.properties").exists():
            storage = ["format", "--standalone", "-t", self._cluster_id(), "-c", str(properties)]
            fmt = subprocess.run(
                [*jvm, "kafka.tools.StorageTool", *storage],
                cwd=self.workdir,
                capture_output=True,
                text=True,
                check=False,
            )
            if fmt.returncode != 0:
                raise ServerError(
                    f"formatting Kafka storage in {data} failed:\n{fmt.stdout}{fmt.stderr}"
                )
        return [*jvm, "kafka.Kafka", str(properties)]

    @staticmethod
    def _cluster_id() -> str:
        """A random cluster id as Kafka writes them (Uuid.randomUuid: url-safe base64, no
        padding, never starting with '-', which would read as a command-line option)."""
        while True:
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            if not cid.startswith("-"):
                return cid

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log.connection.close": False})

    def _storage_cluster_id(self) -> str | None:
        """The cluster id the storage was formatted with."""
        with contextlib.suppress(FileNotFoundError):
            for line in (self.workdir / "data" / "meta.properties").read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.removeprefix("cluster.id=")
        return None

    def _serving(self) -> bool:
        # A TCP probe first: librdkafka logs every refused connection to stderr.
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        try:
            metadata = self.admin().list_topics(timeout=2)
        except KafkaException:
            return False
        # Our cluster id: another broker that took the port would otherwise pass for this one.
        return len(metadata.brokers) > 0 and metadata.cluster_id == self._storage_cluster_id()

    def create_topic(
        self, name: str, partitions: int = 1, retention_ms: int | None = None, timeout: float = 30
    ) -> None:
        """Create a topic (one replica) and wait until each partition has a leader; a topic that
        already exists is left as it is."""
        config = {} if retention_ms is None else {"retention.ms": str(retention_ms)}
        admin = self.admin()
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
        future = admin.create_topics([topic], operation_timeout=timeout)[name]
        try:
            future.result(timeout)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ServerError(f"creating topic {name!r}: {e}") from e
        # Producers and consumers started right after see every partition led.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = admin.list_topics(name, timeout=timeout).topics.get(name)
            if (
                found is not None
                and found.error is None
                and found.partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            ):
                return
            time.sleep(0.1)
        raise ServerError(f"topic {name!r} has no leader for every partition after {timeout} s")


_INFLUX_DURATION = re.compile(r"INF|(\d+(ns|us|u|µ|ms|s|m|h|d|w))+")


def _influx_ident(name: str) -> str:
    """A double-quoted InfluxQL identifier."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class InfluxServer(_Server):
    """InfluxDB 1.8 on 127.0.0.1: InfluxQL on /query, the v2 compatibility API (/api/v2/write,
    usable by influxdb-client), no authentication, no Flux, no usage reporting."""

    name = "influxdb"

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        rpc_port: int | None = None,
        *,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        ports = free_ports(2)
        self.port = port or ports[0]
        self.rpc_port = rpc_port or next(p for p in ports if p != self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _binary(self) -> Path:
        binary = cache_dir() / f"influxdb-{INFLUXDB_VERSION}" / "bin" / "influxd"
        if not os.access(binary, os.X_OK):
            raise ServerError(
                f"influxd {INFLUXDB_VERSION} is not installed at {binary}: run `make servers`"
            )
        return binary

    def _prepare(self) -> list[str]:
        binary = self._binary()
        config = self.workdir / "influxdb.conf"
        d = self.workdir
        # influxd 1.8 logs to stderr only: start() sends it to influxdb.out in the directory.
        config.write_text(
            "\n".join(
                [
                    "reporting-disabled = true",
                    f"bind-address = {_toml_str(f'127.0.0.1:{self.rpc_port}')}",
                    "[meta]",
                    f"  dir = {_toml_str(str(d / 'meta'))}",
                    "[data]",
                    f"  dir = {_toml_str(str(d / 'data'))}",
                    f"  wal-dir = {_toml_str(str(d / 'wal'))}",
                    "  query-log-enabled = false",
                    "[monitor]",
                    "  store-enabled = false",  # no _internal database writes beside the test's
                    "[http]",
                    "  enabled = true",
                    f"  bind-address = {_toml_str(f'127.0.0.1:{self.port}')}",
                    "  auth-enabled = false",
                    "  flux-enabled = false",
                    f"  access-log-path = {_toml_str(str(d / 'access.log'))}",
                    "[logging]",
                    '  format = "logfmt"',
                    '  level = "info"',
                    "",
                ]
            )
        )
        return [str(binary), "run", "-config", str(config)]

    def _http(
        self, method: str, path: str, form: dict[str, str] | None = None, timeout: float = 30
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if form is None:
                conn.request(method, path)
            else:
                body = urllib.parse.urlencode(form)
                headers = {"Content-Type": "application/x-www-form-urlencoded"}
                conn.request(method, path, body, headers)
            reply = conn.getresponse()
            return reply.status, reply.read()
        finally:
            conn.close()

    def _serving(self) -> bool:
        try:
            status, _ = self._http("GET", "/ping", timeout=1)
        except OSError:
            return False
        return status == 204

    def _query(self, q: str, db: str | None = None, epoch: str | None = None) -> list[Any]:
        form = {"q": q} | ({"db": db} if db else {}) | ({"epoch": epoch} if epoch else {})
        status, body = self._http("POST", "/query", form)  # POST runs every statement
        if status != 200:
            # InfluxDB explains a refused statement in a JSON body: {"error": "..."}
            detail = body.decode(errors="replace").strip()
            raise ServerError(f"InfluxQL {q!r}: HTTP {status} {detail}")
        results: list[Any] = json.loads(body).get("results", [])
        for result in results:
            if "error" in result:
                raise ServerError(f"InfluxQL {q!r}: {result['error']}")
        return results

    def create_database(
        self, name: str, retention_policy: str = "autogen", duration: str = "INF"
    ) -> None:
        """CREATE DATABASE with its default retention policy (duration: InfluxQL, e.g. 7d)."""
        if not _INFLUX_DURATION.fullmatch(duration):
            raise ValueError(f"not an InfluxQL duration: {duration!r}")
        self._query(
            f"CREATE DATABASE {_influx_ident(name)} WITH DURATION {duration} "
            f"NAME {_influx_ident(retention_policy)}"
        )

    def query(self, influxql: str, db: str, epoch: str | None = None) -> list[dict[str, Any]]:
        """The series of every statement's result ({"name", "columns", "values", "tags"?}),
        times in RFC 3339 or, with epoch ("ns", "u", "ms", "s", ...), integers."""
        return [s for r in self._query(influxql, db, epoch) for s in r.get("series", [])]


class CollectorProcess(_Server):
    """An srv6pm collector (``python -m srv6pm.collector``) with the given settings, serving
    /healthz and /metrics on 127.0.0.1:``http_port``."""

    name = "collector"

    def __init__(
        self,
        workdir: Path,
        settings: dict[str, str],
        http_port: int | None = None,
        *,
        start_timeout: float = 30.0,
        stop_timeout: float = 15.0,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        self.http_port = http_port or free_port()
        self.settings = settings

    def _prepare(self) -> list[str]:
        settings = {**self.settings, "http_listen": f"127.0.0.1:{self.http_port}"}
        flags = [a for k, v in settings.items() for a in (f"--{k.replace('_', '-')}", v)]
        return [sys.executable, "-m", "srv6pm.collector", *flags]

    def get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=2)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _serving(self) -> bool:
        try:
            return self.get("/healthz")[0] == 200
        except OSError:
            return False
