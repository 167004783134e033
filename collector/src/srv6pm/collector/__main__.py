"""`python -m srv6pm.collector`: run one collector (Kafka -> InfluxDB)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from pydantic import ValidationError

from .config import Settings
from .server import CollectorServer


def _parse(argv: list[str] | None) -> Settings:
    parser = argparse.ArgumentParser(prog="srv6pm-collector", description=__doc__)
    parser.add_argument("--config", type=Path, help="YAML file with settings")
    for name, field in Settings.model_fields.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, help=field.description
        )
    args = vars(parser.parse_args(argv))
    config = args.pop("config")
    overrides = {k: v for k, v in args.items() if v is not None}
    try:
        return Settings.from_file(config, **overrides) if config else Settings(**overrides)
    except ValidationError as e:
        parser.error(str(e))
        raise


def main(argv: list[str] | None = None) -> int:
    settings = _parse(argv)
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
