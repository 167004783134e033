"""Measurement results of a Session-Sender: loss per block (alternate marking counters carried
in the Direct Measurement TLV, RFC 8972 section 4.5; RFC 9341), delay per probe (RFC 8762),
per block and per computation interval (the probes sent in it, aggregated, with an optional
histogram; windows.py), the changes of the probed path's liveness (liveness.py) and delay
threshold crossings (thresholds.py)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .liveness import LivenessChange
from .maths import histogram, ipdv_mean_abs, percentiles
from .thresholds import ThresholdEvent


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


@dataclass(frozen=True)
class DelayStats:
    """One delay's distribution over a block's replies (ns; nearest-rank percentiles), with
    the replies per bin when the session has histogram edges (maths.histogram)."""

    samples: int
    min_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    max_ns: int
    mean_ns: int
    jitter_ns: int  # RFC 3393 mean |IPDV| of consecutive replies
    histogram: tuple[int, ...] = ()  # len(edges) + 1 counts; () without edges

    @classmethod
    def of(
        cls, delays: Sequence[int], previous: int | None, edges_ns: Sequence[int] = ()
    ) -> DelayStats | None:
        """`delays` in sequence order; `previous`: the session's reply before the first;
        `edges_ns`: the histogram's bin edges, ascending (none: no histogram)."""
        if not delays:
            return None
        p = percentiles(delays, (50, 90, 99))
        return cls(
            len(delays),
            min(delays),
            p[50],
            p[90],
            p[99],
            max(delays),
            round(sum(delays) / len(delays)),
            ipdv_mean_abs(delays, previous),
            histogram(delays, edges_ns),
        )


@dataclass(frozen=True)
class DelayBlock:
    """Delay of the probes a session sent in one block, or in one computation interval of
    it (`interval_ns` set: the probes sent in [interval_start_ns, + interval_ns))."""

    session: str
    block: int
    probes_sent: int
    probes_lost: int
    two_way: DelayStats | None  # None: no reply
    forward: DelayStats | None  # None: clocks not both synchronised (one_way_reason says)
    reverse: DelayStats | None
    one_way_reason: str = ""
    histogram_edges_ns: tuple[int, ...] = ()  # the bins of every DelayStats' histogram
    interval_start_ns: int = 0
    interval_ns: int = 0  # 0: the block's aggregate


class ResultSink(Protocol):
    """Where a Session-Sender's results go (memory here; a node's journal in the node manager)."""

    def add_loss(self, result: LossResult) -> None: ...
    def add_delay(self, result: DelayResult) -> None: ...
    def add_delay_block(self, result: DelayBlock) -> None: ...
    def add_liveness(self, change: LivenessChange) -> None: ...
    def add_delay_interval(self, result: DelayBlock) -> None: ...
    def add_threshold(self, event: ThresholdEvent) -> None: ...


class ResultStore:
    """The last `capacity` results of each kind (bounded memory per session); `evicted` counts
    the older ones pushed out unread."""

    def __init__(self, capacity: int = 1024) -> None:
        self.loss: deque[LossResult] = deque(maxlen=capacity)
        self.delay: deque[DelayResult] = deque(maxlen=capacity)
        self.delay_blocks: deque[DelayBlock] = deque(maxlen=capacity)
        self.liveness: deque[LivenessChange] = deque(maxlen=capacity)
        self.delay_intervals: deque[DelayBlock] = deque(maxlen=capacity)
        self.thresholds: deque[ThresholdEvent] = deque(maxlen=capacity)
        self.evicted = 0

    def add_loss(self, result: LossResult) -> None:
        self.evicted += len(self.loss) == self.loss.maxlen
        self.loss.append(result)

    def add_delay(self, result: DelayResult) -> None:
        self.evicted += len(self.delay) == self.delay.maxlen
        self.delay.append(result)

    def add_delay_block(self, result: DelayBlock) -> None:
        self.evicted += len(self.delay_blocks) == self.delay_blocks.maxlen
        self.delay_blocks.append(result)

    def add_liveness(self, change: LivenessChange) -> None:
        self.evicted += len(self.liveness) == self.liveness.maxlen
        self.liveness.append(change)

    def add_delay_interval(self, result: DelayBlock) -> None:
        self.evicted += len(self.delay_intervals) == self.delay_intervals.maxlen
        self.delay_intervals.append(result)

    def add_threshold(self, event: ThresholdEvent) -> None:
        self.evicted += len(self.thresholds) == self.thresholds.maxlen
        self.thresholds.append(event)
