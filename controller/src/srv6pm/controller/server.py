"""Wires settings, store, services, the reconciler and the REST server (uvicorn)."""

from __future__ import annotations

import logging
import threading

import uvicorn
from prometheus_client import CollectorRegistry

from .adapters.influx import InfluxResults
from .adapters.nodes import NodeClients, Tls
from .adapters.sql.store import Store
from .api.app import create_app
from .api.deps import Services
from .api.metrics import ControllerCollector
from .config import Settings
from .service.auth import AuthService
from .service.delay_intervals import DelayIntervalService
from .service.fleet import FleetService
from .service.liveness import LivenessService
from .service.reconciler import Reconciler
from .service.results import ResultsService
from .service.threshold_events import ThresholdEventService
from .service.thresholds import ThresholdService

log = logging.getLogger(__name__)


def build(settings: Settings, reconcile: bool = True) -> tuple[Services, Store, InfluxResults]:
    """The services over a migrated store (`reconcile=False`: no node is ever contacted)."""
    db = Store(settings.database_url)
    tls = (
        Tls(settings.tls_ca, settings.tls_cert, settings.tls_key)
        if settings.tls_ca and settings.tls_cert and settings.tls_key
        else None
    )
    reconciler = (
        Reconciler(
            db,
            NodeClients(tls, settings.info_timeout_s, settings.tls_server_name),
            settings.marking_mode,
            settings.resync_s,
            settings.apply_timeout_s,
        )
        if reconcile
        else None
    )
    influx = InfluxResults(
        settings.influx_url, settings.influx_database, settings.influx_token, timeout_s=10
    )
    services = Services(
        fleet=FleetService(db, settings.marking_mode, reconciler.wake if reconciler else _nothing),
        auth=AuthService(db),
        results=ResultsService(influx),
        liveness=LivenessService(influx),
        thresholds=ThresholdService(db, influx),
        threshold_events=ThresholdEventService(influx),
        delay_intervals=DelayIntervalService(influx),
        reconciler=reconciler,
        default_stamp_key=settings.stamp_key(),
    )
    return services, db, influx


def _nothing() -> None:
    pass


class ControllerServer:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.services, self._store, self._influx = build(settings, settings.reconcile)
        if settings.bootstrap_token:
            self.services.auth.ensure("bootstrap", "admin", settings.bootstrap_token)
        self.registry = CollectorRegistry()
        self.registry.register(ControllerCollector(self.services))
        host, _, port = settings.listen.rpartition(":")
        config = uvicorn.Config(
            create_app(self.services, self.registry),
            host=host.strip("[]"),
            port=int(port),
            log_config=None,
            access_log=False,
        )
        self._http = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.services.reconciler:
            self.services.reconciler.start()
        self.services.thresholds.start(self._settings.thresholds_every_s)
        self._thread = threading.Thread(target=self._http.run, name="http", daemon=True)
        self._thread.start()
        log.info(
            "controller serving on %s (database %s)",
            self._settings.listen,
            self._store.engine.url.render_as_string(hide_password=True),
        )

    def stop(self) -> None:
        self._http.should_exit = True
        if self._thread:
            self._thread.join(timeout=10)
        self.services.thresholds.stop()
        if self.services.reconciler:
            self.services.reconciler.stop()
        self._influx.close()
        self._store.close()
