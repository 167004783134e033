"""`python -m srv6pm.node_manager`: run one node manager."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from srv6pm.common.settings import parse

from .config import Settings
from .domain.errors import NodeManagerError
from .server import NodeManagerServer


def main(argv: list[str] | None = None) -> int:
    settings = parse(Settings, argv, "srv6pm-node-manager", __doc__)
    logging.basicConfig(
        level=settings.log_level,
        format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)s",
    )
    try:
        server = NodeManagerServer(settings)
    except NodeManagerError as e:
        logging.getLogger("srv6pm.node_manager").error("cannot start: %s", e)
        return 2
    server.start()
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
