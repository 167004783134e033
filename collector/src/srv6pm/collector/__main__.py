"""`python -m srv6pm.collector`: run one collector (Kafka -> InfluxDB)."""

from __future__ import annotations

import sys

from srv6pm.common.process import configure_logging, serve
from srv6pm.common.settings import parse

from .config import Settings
from .server import CollectorServer


def main(argv: list[str] | None = None) -> int:
    settings = parse(Settings, argv, "srv6pm-collector", __doc__)
    configure_logging(settings.log_level)
    return serve(CollectorServer(settings))


if __name__ == "__main__":
    sys.exit(main())
