"""An srv6pm controller process (``python -m srv6pm.controller``) for tests, the demo and
benchmarks."""

from __future__ import annotations

import functools
import secrets

from .collector import CollectorProcess


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
