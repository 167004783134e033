"""How every srv6pm service runs: structured logs, then serve until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Protocol


class Server(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level, format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)s"
    )


def serve(server: Server) -> int:
    """Start `server`, wait for SIGTERM/SIGINT, stop it; the exit code."""
    server.start()
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    server.stop()
    return 0
