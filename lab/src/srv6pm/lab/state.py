"""A lab's state file: every persistent fact (namespaces made, node manager PIDs, TLS on or
off), so that a ``Lab`` built in another process (e.g. ``srv6pm lab down``) can tear down what
``up`` made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import LabError

RUN_ROOT = Path("/run/srv6pm/lab")


class LabState:
    """``/run/srv6pm/lab/<prefix>/state.json`` and the directory holding it."""

    def __init__(self, prefix: str) -> None:
        self.directory = RUN_ROOT / prefix

    @property
    def file(self) -> Path:
        """The JSON state file."""
        return self.directory / "state.json"

    def read(self) -> dict[str, Any]:
        """The recorded state; {} if the lab is not up."""
        try:
            data = json.loads(self.file.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise LabError(f"unreadable state file {self.file}: {e}") from e
        return data if isinstance(data, dict) else {}

    def write(self, state: dict[str, Any]) -> None:
        """Replace the state file atomically."""
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.file)
