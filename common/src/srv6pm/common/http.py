"""Prometheus /metrics and a /healthz endpoint for probes (container health checks, Kubernetes
liveness and readiness), on one small HTTP server every service can run."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Health = Callable[[], tuple[bool, dict[str, object]]]


class HealthServer:
    """GET /metrics: Prometheus; GET /healthz: 200 while `healthy()` says so, else 503, with
    the details as JSON either way."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        health: Health,
    ) -> None:
        host, _, port = address.rpartition(":")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._reply(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif self.path == "/healthz":
                    ok, details = health()
                    self._reply(
                        200 if ok else 503, "application/json", json.dumps(details).encode()
                    )
                else:
                    self._reply(404, "text/plain", b"not found: /metrics, /healthz\n")

            def _reply(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:  # scrapes are not worth a log line
                pass

        self._server = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Handler)  # noqa: S104
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
