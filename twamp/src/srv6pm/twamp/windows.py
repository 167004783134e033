"""Delay of the probes a Session-Sender sent in consecutive windows of wall-clock time: the
marking blocks (RFC 9341 section 3.1) and, when the session has one, its computation intervals
(shorter windows aligned on the same clock, a whole number of them per block).

A window is reported once it is over and each of its probes is answered or lost, in window
order. Jitter (RFC 3393 IPDV) pairs each window's first reply with the previous window's last,
so one sample per window still has a variation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .results import DelayBlock, DelayResult, DelayStats


@dataclass
class _Window:
    sent: int = 0
    lost: int = 0
    pending: int = 0
    replies: list[DelayResult] = field(default_factory=list)


class DelayWindows:
    """One session's windows of `length_ns` (the block period, or a computation interval
    that divides it)."""

    def __init__(
        self,
        session: str,
        length_ns: int,
        period_ns: int,
        edges_ns: tuple[int, ...] = (),
    ) -> None:
        if length_ns <= 0 or period_ns % length_ns:
            raise ValueError(f"a window of {length_ns} ns does not divide the {period_ns} ns block")
        self.session = session
        self.length_ns = length_ns
        self.period_ns = period_ns
        self.edges_ns = edges_ns
        self._open: dict[int, _Window] = {}  # window order: probes are sent in time order
        self._last_reply: DelayResult | None = None

    @property
    def is_block(self) -> bool:
        return self.length_ns == self.period_ns

    def end_of(self, index: int) -> int:
        return (index + 1) * self.length_ns

    def sent(self, t1: int) -> None:
        window = self._open.setdefault(t1 // self.length_ns, _Window())
        window.sent += 1
        window.pending += 1

    def answered(self, result: DelayResult) -> None:
        window = self._open[result.sent_ns // self.length_ns]
        window.pending -= 1
        window.replies.append(result)

    def lost(self, t1: int) -> None:
        window = self._open[t1 // self.length_ns]
        window.pending -= 1
        window.lost += 1

    def close(self, now: int) -> list[DelayBlock]:
        """The windows over at `now` whose probes are all answered or lost, in order."""
        current = now // self.length_ns
        closed = []
        for index, window in list(self._open.items()):
            if index >= current or window.pending:
                break
            del self._open[index]
            closed.append(self._result(index, window))
        return closed

    def _result(self, index: int, window: _Window) -> DelayBlock:
        replies = sorted(window.replies, key=lambda r: r.sent_ns)
        last, edges = self._last_reply, self.edges_ns
        one_way = bool(replies) and all(r.forward_ns is not None for r in replies)
        two_way = DelayStats.of(
            [r.two_way_ns for r in replies], last.two_way_ns if last else None, edges
        )
        forward = reverse = None
        if one_way:
            forward = DelayStats.of(
                [r.forward_ns or 0 for r in replies], last.forward_ns if last else None, edges
            )
            reverse = DelayStats.of(
                [r.reverse_ns or 0 for r in replies], last.reverse_ns if last else None, edges
            )
        if replies:
            self._last_reply = replies[-1]
        reason = ""
        if not replies:
            reason = "no reply"
        elif not one_way:
            reason = "clocks not synchronised (Error Estimate S bit clear at one end)"
        start = index * self.length_ns
        return DelayBlock(
            self.session,
            start // self.period_ns,
            window.sent,
            window.lost,
            two_way,
            forward,
            reverse,
            reason,
            edges,
            interval_start_ns=0 if self.is_block else start,
            interval_ns=0 if self.is_block else self.length_ns,
        )
