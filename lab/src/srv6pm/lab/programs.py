"""The lab's helper programs (:mod:`.traffic`, :mod:`.tcp`, :mod:`.delay`) run inside
namespaces with ``python -m``; the host reads what they report, one JSON object a line.

Standard library only: the programs import this too, and must start fast.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from dataclasses import fields
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_R = TypeVar("_R", bound="DataclassInstance")


def module_argv(module: str, *args: str) -> list[str]:
    """``python -m srv6pm.lab.<module> ARGS...`` with this interpreter."""
    return [sys.executable, "-m", f"srv6pm.lab.{module}", *args]


def readline(proc: subprocess.Popen[str], timeout: float) -> str:
    """The next line ``proc`` prints, or "" if none comes within ``timeout`` seconds."""
    if proc.stdout is None:
        raise ValueError("the program's stdout is not a pipe")
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return proc.stdout.readline()


def report(cls: type[_R], line: str) -> _R:
    """The dataclass ``cls`` from a program's JSON report (keys it does not know ignored)."""
    data = json.loads(line)
    return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
