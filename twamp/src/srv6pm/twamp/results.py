"""Measurement results of a Session-Sender: loss per block (alternate marking counters carried
in the Direct Measurement TLV, RFC 8972 section 4.5; RFC 9341) and delay per probe (RFC 8762)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class DirectionLoss:
    tx: int
    rx: int

    @property
    def lost(self) -> int:
        """Negative when more arrived than left: a miscount, shown, never hidden."""
        return self.tx - self.rx

    @property
    def ratio(self) -> float | None:
        return self.lost / self.tx if self.tx else None


@dataclass(frozen=True)
class LossResult:
    session: str
    block: int
    forward: DirectionLoss | None
    reverse: DirectionLoss | None
    valid: bool
    reason: str = ""  # why not valid


@dataclass(frozen=True)
class DelayResult:
    session: str
    seq: int
    sent_ns: int  # T1
    two_way_ns: int
    forward_ns: int | None  # one-way, only when both clocks say they are synchronised
    reverse_ns: int | None


class ResultStore:
    """The last `capacity` results of each kind (bounded memory per session); `evicted` counts
    the older ones pushed out unread."""

    def __init__(self, capacity: int = 1024) -> None:
        self.loss: deque[LossResult] = deque(maxlen=capacity)
        self.delay: deque[DelayResult] = deque(maxlen=capacity)
        self.evicted = 0

    def add_loss(self, result: LossResult) -> None:
        self.evicted += len(self.loss) == self.loss.maxlen
        self.loss.append(result)

    def add_delay(self, result: DelayResult) -> None:
        self.evicted += len(self.delay) == self.delay.maxlen
        self.delay.append(result)
