"""A real single-node Kafka (KRaft) for tests, the demo and benchmarks: ``make servers``
(scripts/install-kafka.sh) installs it into ``${SRV6PM_CACHE:-~/.cache/srv6pm}``."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed

from .runner import Server, ServerError, cache_dir, free_ports

KAFKA_VERSION_DEFAULT = "4.4.0"  # scripts/install-kafka.sh, same KAFKA_VERSION override


class KafkaServer(Server):
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
