"""Wires settings, driver, service and the gRPC server (with health checking and reflection)."""

from __future__ import annotations

import logging
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry
from srv6pm.common.http import HealthServer
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

from .adapters import metrics
from .adapters.clock import kernel_clock_synchronised
from .adapters.journal import Journal
from .adapters.kafka import KafkaPublisher
from .api.servicer import NodeManagerServicer
from .config import Settings
from .domain.errors import NodeManagerError
from .drivers import registry
from .service.node import NodeService
from .service.results import ResultsService

log = logging.getLogger(__name__)
MAX_MESSAGE = 64 * 1024 * 1024  # 10,000+ flows in one desired state


class StartupError(NodeManagerError):
    """The node manager cannot start with these settings (e.g. unreadable TLS files)."""


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """Mutual TLS credentials from tls_ca/tls_cert/tls_key: clients must present a
    certificate signed by tls_ca. None without TLS (the settings allow that on loopback only).

    Raises :class:`StartupError` naming the setting and file that cannot be read.
    """
    if settings.tls_ca is None or settings.tls_cert is None or settings.tls_key is None:
        return None
    ca = _read_pem("tls_ca", settings.tls_ca)
    cert = _read_pem("tls_cert", settings.tls_cert)
    key = _read_pem("tls_key", settings.tls_key)
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=True
    )


def _read_pem(setting: str, path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StartupError(f"cannot read {setting} {path}: {e.strerror or e}") from e
    if b"-----BEGIN " not in data:
        raise StartupError(f"{setting} {path} is not PEM (no -----BEGIN line)")
    return data


def _bind(server: grpc.Server, listen: str, credentials: grpc.ServerCredentials | None) -> int:
    port: int
    try:
        if credentials is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        reason = "the address is not one of this host's, or it is in use"
        if credentials is not None:
            # gRPC says "Failed to bind" for a bad certificate or key too (reason in its log)
            reason += ", or tls_cert/tls_key is not a certificate and its matching key"
        raise StartupError(f"cannot listen on {listen}: {reason}")
    return port


class NodeManagerServer:
    def __init__(self, settings: Settings) -> None:
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
        ]
        self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
        # before anything touches the router: bad TLS files or a taken port stop the start
        self.port = _bind(self.grpc, settings.listen, server_credentials(settings))
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        self.driver = registry.open_driver(settings.driver, settings)
        synced = {"yes": True, "no": False}.get(settings.clock_sync)
        self.journal = Journal(
            settings.state_dir / "journal.db",
            settings.journal_retention_h * 3600,
            settings.journal_max_mb * 1024 * 1024,
        )
        self.publisher = (
            KafkaPublisher(
                self.journal,
                settings.node_id,
                settings.kafka_bootstrap,
                settings.kafka_topic,
                settings.kafka_config,
            )
            if settings.kafka_bootstrap
            else None
        )
        results = ResultsService(
            self.journal, settings.node_id, settings.period_ns, settings.publish_probes
        )
        self.service = NodeService(
            self.driver,
            results,
            settings.state_dir,
            settings.period_ns,
            settings.guard_ns,
            settings.history_blocks,
            clock_synchronised=kernel_clock_synchronised if synced is None else lambda: synced,
            steering_mark_base=settings.steering_mark_base,
        )
        self.registry = CollectorRegistry()
        self.registry.register(
            metrics.NodeCollector(
                self.journal,
                self.publisher,
                self.service.stamp.sender_stats,
                self.service.stamp.reflector_stats,
                self.service.kernel_reflector_stats,
                self.service.stamp.liveness,
                self.service.stamp.thresholds,
            )
        )
        self.servicer = NodeManagerServicer(
            settings.node_id,
            self.service,
            settings.state_dir / "desired.pb",
            metrics.apply_histogram(self.registry),
        )
        pb_grpc.add_NodeManagerServicer_to_server(self.servicer, self.grpc)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        names = (
            pb.DESCRIPTOR.services_by_name["NodeManager"].full_name,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        )
        reflection.enable_server_reflection(names, self.grpc)
        self._settings = settings
        self._serving = False
        self.http = (
            HealthServer(settings.metrics_listen, self.registry, self._health)
            if settings.metrics_listen
            else None
        )

    def _health(self) -> tuple[bool, dict[str, object]]:
        # /healthz for probes that cannot speak mutual TLS (container and kubelet checks)
        details: dict[str, object] = {
            "node": self._settings.node_id,
            "grpc": "serving" if self._serving else "not serving",
            "journal_depth": self.journal.depth(),
        }
        return self._serving, details

    def start(self) -> None:
        self.servicer.restore()
        # a restarted data plane (VPP) lost its policies and SIDs: they are given again
        self.service.periodic.on_data_plane_restart(self.servicer.restore)
        self.service.start()
        if self.publisher:
            self.publisher.start()
        if self.http:
            self.http.start()
        self.grpc.start()
        self._serving = True
        for name in ("", "srv6pm.v1.NodeManager"):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        tls = self._settings.tls
        log.info(
            "node manager %s serving on %s mode=%s (driver=%s, netns=%s, T=%ss)",
            self._settings.node_id,
            self._settings.listen,
            f"mutual-tls client_ca={self._settings.tls_ca}" if tls else "plaintext-loopback",
            self._settings.driver,
            self._settings.netns or "-",
            self._settings.period_s,
        )

    def stop(self, grace: float = 2.0) -> None:
        self._serving = False
        self.health.enter_graceful_shutdown()
        self.grpc.stop(grace).wait()
        self.service.stop()
        if self.publisher:
            self.publisher.stop()
        if self.http:
            self.http.stop()
        self.journal.close()
        self.driver.close()
