"""`python -m srv6pm.collector`: run one collector (Kafka -> InfluxDB)."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from srv6pm.common.settings import parse

from .config import Settings
from .server import CollectorServer


def main(argv: list[str] | None = None) -> int:
    settings = parse(Settings, argv, "srv6pm-collector", __doc__)
    logging.basicConfig(
        level=settings.log_level,
        format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)s",
    )
    server = CollectorServer(settings)
    server.start()
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
