"""What the engines need from a data plane: the packets of a flow in one block."""

from __future__ import annotations

from typing import Protocol


class BlockCounters(Protocol):
    def block_packets(self, flow: str, block: int) -> int | None:
        """Packets of `flow` counted on this node in `block`; None when not available (flow
        unknown, block outside its safe read window, node not monitoring then)."""
        ...
