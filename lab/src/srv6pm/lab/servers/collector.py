"""An srv6pm collector process (``python -m srv6pm.collector``) for tests and benchmarks."""

from __future__ import annotations

import http.client
import sys
from pathlib import Path

from .runner import Server, free_port


class CollectorProcess(Server):
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
