"""What every test run shares: the `root` and `servers` marks, given where a test needs them.

`make test-unit` (`-m "not root and not servers"`) runs with no root and no server installed;
`make test` runs everything. A test marked `root` fails, never skips, when not run as root: a
skipped lab test would hide the feature it checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Fixtures that start a real server (Kafka, InfluxDB, PostgreSQL, the collector, the controller).
SERVER_FIXTURES = frozenset({"influx", "influx_server", "kafka", "pipeline", "postgres"})
CROSS_PROCESS_TESTS = Path(__file__).parent / "tests"


def _needs_servers(item: pytest.Item) -> bool:
    if CROSS_PROCESS_TESTS in Path(item.fspath).parents:
        return True  # labs, servers, images, charts: everything `make servers` builds
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("database_url") == "postgresql"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _needs_servers(item):
            item.add_marker(pytest.mark.servers)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is not None and os.geteuid() != 0:
        pytest.fail(
            "this test needs root (network namespaces, eBPF): run it as root, or leave it out "
            "with -m 'not root' (make test-unit)",
            pytrace=False,
        )
