"""Real Kafka, InfluxDB and PostgreSQL servers for tests, the demo and benchmarks.

``make servers`` (scripts/install-kafka.sh, scripts/install-influxdb.sh) installs Kafka and InfluxDB
into ``${SRV6PM_CACHE:-~/.cache/srv6pm}``; PostgreSQL is Debian's (scripts/install-deps.sh). This
module runs each in a directory the caller owns::

    with KafkaServer(tmp / "kafka") as kafka, InfluxServer(tmp / "influxdb") as influx:
        kafka.create_topic("records", partitions=3, retention_ms=3_600_000)
        influx.create_database("srv6pm", "autogen", "7d")

``stop()`` (graceful) or ``kill()`` (SIGKILL, for fault tests) and ``start()`` again resume on the
same data: topics, committed offsets, points and tables survive. The directory stays the
caller's to remove.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import grp
import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.parse
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import psycopg
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed
from psycopg import sql

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
    stop_signal = signal.SIGTERM  # what stop() sends first

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

    def _popen_options(self) -> dict[str, Any]:
        """More subprocess.Popen arguments for the server process (user, env, ...)."""
        return {}

    def _kill_process(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the server and reap it."""
        proc.kill()
        proc.wait()

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
                **self._popen_options(),
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
        """stop_signal (SIGTERM), then SIGKILL after stop_timeout; a no-op when not running."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(self.stop_signal)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._kill_process(proc)
        self._proc = None

    def kill(self) -> None:
        """SIGKILL, no shutdown at all: what a crash leaves on disk."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self._kill_process(proc)
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


POSTGRES_USER = "postgres"  # Debian's system user, and the superuser role initdb creates
UNIX_SOCKET_PATH_MAX = 107  # sun_path (108 bytes) less its terminating NUL


def postgres_bindir() -> Path:
    """The PostgreSQL server binaries: ``pg_config --bindir`` when it holds them (libpq-dev's
    pg_config may belong to a client without a server), else the newest
    /usr/lib/postgresql/<major>/bin (Debian's layout)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False, timeout=10
        )
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(
        (d for d in debian if d.parent.name.isdigit()),
        key=lambda d: int(d.parent.name),
        reverse=True,
    )
    for bindir in candidates:
        if all(os.access(bindir / b, os.X_OK) for b in ("postgres", "initdb")):
            return bindir
    raise ServerError(
        "no PostgreSQL server (postgres and initdb) in "
        f"{[str(c) for c in candidates] or 'pg_config --bindir or /usr/lib/postgresql/*/bin'}: "
        "run `make deps` (scripts/install-deps.sh installs Debian's postgresql)"
    )


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a process, None once it is gone."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = line[line.rindex(")") + 2 :].split()  # the command, in parentheses, may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def _children(ppid: int) -> list[tuple[int, int]]:
    """(pid, start time) of each child process of ppid."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _proc_stat(int(entry.name))) is not None:
            _, parent, started = info
            if parent == ppid:
                children.append((int(entry.name), started))
    return children


def _running(pid: int, started: int) -> bool:
    """That process (not a later one with its PID) still runs: exited and zombie count as gone."""
    info = _proc_stat(pid)
    return info is not None and info[0] != "Z" and info[2] == started


class PostgresServer(_Server):
    """PostgreSQL (Debian 12's 15) on 127.0.0.1 only, trust authentication for the ``postgres``
    superuser, UTF8 with the C locale; the cluster in ``workdir/data``, its unix socket in
    ``workdir/run``::

        with PostgresServer(workdir) as pg:
            pg.create_database("controller")
            engine = sqlalchemy.create_engine(pg.url("controller"))

    PostgreSQL refuses to run as root: as root, initdb and the server run as the ``postgres``
    system user and the workdir becomes its, so every directory above the workdir must let
    that user through (pytest's tmp_path, under /tmp/pytest-of-root of mode 0700, does not; the
    directory ``tempfile.mkdtemp()`` makes does). stop() is PostgreSQL's fast shutdown (SIGINT:
    sessions are ended, then a checkpoint); kill() SIGKILLs the postmaster and every process it
    forked. Measured here: ~1-2 s to the first start (initdb included), ~0.1-0.3 s to a restart.
    """

    name = "postgres"
    # SIGTERM (smart shutdown) would wait for every client, a forgotten connection pool included.
    stop_signal = signal.SIGINT

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        self.port = port or free_port()
        self.data_dir = self.workdir / "data"
        self.socket_dir = self.workdir / "run"

    def url(self, database: str = POSTGRES_USER) -> str:
        """The SQLAlchemy URL of a database (driver: psycopg 3)."""
        name = urllib.parse.quote(database, safe="")
        return f"postgresql+psycopg://{POSTGRES_USER}@127.0.0.1:{self.port}/{name}"

    def connect(self, database: str = POSTGRES_USER, timeout: int = 5) -> psycopg.Connection[Any]:
        """A psycopg connection to a database, in autocommit mode (timeout: s, at least 2)."""
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=POSTGRES_USER,
            dbname=database,
            sslmode="disable",
            connect_timeout=timeout,
            autocommit=True,
        )

    def create_database(self, name: str) -> None:
        """CREATE DATABASE (UTF8, C locale, owned by postgres); one that exists is left as it is."""
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        try:
            with self.connect() as conn:
                conn.execute(statement)
        except psycopg.errors.DuplicateDatabase:
            pass
        except psycopg.Error as e:
            raise ServerError(f"CREATE DATABASE {name!r}: {e}") from e

    def _account(self) -> tuple[int, int, list[int]] | None:
        """(uid, gid, groups) of the postgres user when we are root, else None: run as we are."""
        if os.geteuid() != 0:
            return None
        try:
            user = pwd.getpwnam(POSTGRES_USER)
        except KeyError:
            raise ServerError(
                f"no {POSTGRES_USER!r} user to run PostgreSQL as (it refuses root): "
                "run `make deps` (Debian's postgresql package creates it)"
            ) from None
        return user.pw_uid, user.pw_gid, os.getgrouplist(POSTGRES_USER, user.pw_gid)

    def _popen_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "env": {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
        }
        account = self._account()
        if account is not None:
            uid, gid, groups = account
            options |= {"user": uid, "group": gid, "extra_groups": groups}
        return options

    def _check_reachable(self, uid: int, gid: int, groups: list[int]) -> None:
        """The postgres user can enter the workdir; else name the directory that stops it."""

        def enters(directory: Path) -> bool:
            probe = subprocess.run(
                ["test", "-x", str(directory)],
                check=False,
                user=uid,
                group=gid,
                extra_groups=groups,
            )
            return probe.returncode == 0

        if not enters(self.workdir):
            # The first directory from / that keeps the postgres user out.
            directories = [*reversed(self.workdir.parents), self.workdir]
            directory = next((d for d in directories if not enters(d)), self.workdir)
            st = directory.stat()
            owner = f"{st.st_uid}:{st.st_gid}"
            with contextlib.suppress(KeyError):
                owner = f"{pwd.getpwuid(st.st_uid).pw_name}:{grp.getgrgid(st.st_gid).gr_name}"
            raise ServerError(
                f"the {POSTGRES_USER} user cannot reach {self.workdir}: {directory} is "
                f"{stat.filemode(st.st_mode)} {owner}. Give PostgresServer a workdir that user "
                "can reach, e.g. the directory tempfile.mkdtemp() makes (it becomes postgres's)"
            )

    def _prepare(self) -> list[str]:
        bindir = postgres_bindir()
        socket_path = self.socket_dir / f".s.PGSQL.{self.port}"
        if len(os.fsencode(socket_path)) > UNIX_SOCKET_PATH_MAX:
            raise ServerError(
                f"the unix socket path {socket_path} is longer than {UNIX_SOCKET_PATH_MAX} "
                "bytes: give PostgresServer a shorter workdir"
            )
        self.socket_dir.mkdir(exist_ok=True)
        account = self._account()
        if account is not None:
            uid, gid, groups = account
            for directory in (self.workdir, self.socket_dir):
                os.chown(directory, uid, gid)
                directory.chmod(0o700)
            self._check_reachable(uid, gid, groups)
        # Initialised once: a restart must find its databases again.
        if not (self.data_dir / "PG_VERSION").exists():
            initdb = [
                str(bindir / "initdb"),
                f"--pgdata={self.data_dir}",
                f"--username={POSTGRES_USER}",
                "--auth=trust",  # loopback only: listen_addresses and pg_hba.conf's host lines
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",  # a test cluster need not survive the machine crashing
                "--no-instructions",
            ]
            done = subprocess.run(
                initdb,
                cwd=self.workdir,
                capture_output=True,
                text=True,
                check=False,
                timeout=self.start_timeout,
                **self._popen_options(),
            )
            if done.returncode != 0:
                raise ServerError(
                    f"initdb into {self.data_dir} failed (exit {done.returncode}):\n"
                    f"{done.stdout}{done.stderr}"
                )
        return [
            str(bindir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f'unix_socket_directories="{self.socket_dir}"',  # quoted: the path may hold commas
        ]

    def _serving(self) -> bool:
        try:
            # 2 s, libpq's least: a listener that never answers would hold start() up.
            with self.connect(timeout=2) as conn:
                row = conn.execute("SHOW data_directory").fetchone()
        except psycopg.Error:
            return False
        # Our cluster: another server that took the port would otherwise pass for this one.
        return row is not None and row[0] == str(self.data_dir)

    def _kill_process(self, proc: subprocess.Popen[bytes]) -> None:
        # Each backend calls setsid() (InitPostmasterChild), so no process group holds them all:
        # freeze the postmaster (it forks no more), kill the children it has, then it. Children
        # left alive would hold the shared memory and keep a restart from starting.
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGSTOP)
        children = _children(proc.pid)
        for pid, _ in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + self.stop_timeout
        while any(_running(pid, started) for pid, started in children):
            if time.monotonic() > deadline:
                raise ServerError(f"{self.name}'s children {children} outlived SIGKILL")
            time.sleep(0.01)


class CollectorProcess(_Server):
    """An srv6pm collector (``python -m srv6pm.collector``) with the given settings, serving
    /healthz and /metrics on 127.0.0.1:``http_port``."""

    name = "collector"
    module = "srv6pm.collector"
    listen_setting = "http_listen"  # the setting that takes 127.0.0.1:http_port

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

    def _defaults(self) -> dict[str, str]:
        """Settings given unless ``settings`` has its own."""
        return {}

    def _prepare(self) -> list[str]:
        settings = {
            **self._defaults(),
            **self.settings,
            self.listen_setting: f"127.0.0.1:{self.http_port}",
        }
        flags = [a for k, v in settings.items() for a in (f"--{k.replace('_', '-')}", v)]
        return [sys.executable, "-m", self.module, *flags]

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


class ControllerProcess(CollectorProcess):
    """An srv6pm controller (``python -m srv6pm.controller``) with the given settings, its REST
    API on 127.0.0.1:``http_port``, its desired state in a SQLite file of its working directory
    unless ``database_url`` is given, and an admin token (``token``) installed at start."""

    name = "controller"
    module = "srv6pm.controller"
    listen_setting = "listen"

    @functools.cached_property
    def token(self) -> str:
        return self.settings.get("bootstrap_token") or "s6pm_" + secrets.token_urlsafe(32)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def _defaults(self) -> dict[str, str]:
        return {
            "database_url": f"sqlite:///{self.workdir / 'controller.db'}",
            "bootstrap_token": self.token,
        }
