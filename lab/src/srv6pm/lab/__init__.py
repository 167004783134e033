"""srv6pm lab: real SRv6 routers in network namespaces, one node manager each.

The public names are imported lazily so that ``python -m srv6pm.lab.traffic`` (run inside
namespaces) starts fast and does not import itself twice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .drops import DropRule
    from .errors import LabError
    from .lab import Lab
    from .topology import Topology, TopologyError
    from .traffic import ReceiveResult, SendResult, UdpReceiver

_EXPORTS = {
    "DropRule": "drops",
    "Lab": "lab",
    "UdpReceiver": "traffic",
    "LabError": "errors",
    "Topology": "topology",
    "TopologyError": "topology",
    "ReceiveResult": "traffic",
    "SendResult": "traffic",
}
__all__ = [
    "DropRule",
    "Lab",
    "LabError",
    "ReceiveResult",
    "SendResult",
    "Topology",
    "TopologyError",
    "UdpReceiver",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
