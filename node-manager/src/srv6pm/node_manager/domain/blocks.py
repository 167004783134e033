"""Alternate-marking blocks (RFC 9341 section 3): wall-clock aligned, two colours.

block = floor(unix_time / T), colour = block % 2. The packets of block k are the counter of
colour k % 2 read in block k+1 minus the same counter read in block k-1, modulo the counter
width. A block's counters are stable, hence readable, from `guard` after it ends (every packet
of it has left the network: max path delay + clock skew) until block k+2 starts reusing the
colour.
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class BlockClock:
    """Block arithmetic for one marking period."""

    period_ns: int

    def __post_init__(self) -> None:
        if self.period_ns <= 0:
            raise ValueError(f"marking period must be positive, got {self.period_ns} ns")

    def block(self, unix_ns: int) -> int:
        return unix_ns // self.period_ns

    def start(self, block: int) -> int:
        return block * self.period_ns

    def readable_from(self, block: int, guard_ns: int) -> int:
        """First instant the counters of `block` are stable."""
        return self.start(block + 1) + guard_ns

    def readable_until(self, block: int) -> int:
        """Instant the colour of `block` starts counting again (block + 2)."""
        return self.start(block + 2)


def colour(block: int) -> int:
    return block % 2


def counter_delta(new: int, old: int, width_bits: int) -> int:
    """new - old for a counter that wraps at 2**width_bits (counts at most one wrap)."""
    return (new - old) % (1 << width_bits)


@dataclass(frozen=True)
class FlowBlock:
    """What this node counted of one monitored flow in one block (`valid` False: not readable,
    `reason` says why)."""

    flow: str
    block: int
    packets: int = 0
    bytes: int = 0
    valid: bool = True
    reason: str = ""
