"""Fixtures: a fresh controller API per test, and `srv6pm` driven against it (cli_harness)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import Controller, Run, runner_for, running_controller


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path / "controller") as c:
        yield c


@pytest.fixture
def cli(controller: Controller) -> Run:
    return runner_for(controller)
