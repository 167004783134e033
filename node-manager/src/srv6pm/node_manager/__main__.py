"""`python -m srv6pm.node_manager`: run one node manager."""

from __future__ import annotations

import logging
import sys

from srv6pm.common.process import configure_logging, serve
from srv6pm.common.settings import parse

from .config import Settings
from .domain.errors import NodeManagerError
from .server import NodeManagerServer


def main(argv: list[str] | None = None) -> int:
    settings = parse(Settings, argv, "srv6pm-node-manager", __doc__)
    configure_logging(settings.log_level)
    try:
        server = NodeManagerServer(settings)
    except NodeManagerError as e:
        logging.getLogger("srv6pm.node_manager").error("cannot start: %s", e)
        return 2
    return serve(server)


if __name__ == "__main__":
    sys.exit(main())
