"""Liveness of a probed path from a Session-Sender's own probes (draft-ietf-spring-stamp-srpm:
STAMP probes sent along one segment list tell whether that segment list is up).

A probe is missed when no reply arrived within the liveness timeout after it was sent. The path
is DOWN after `down_after` probes in a row were missed and UP after `up_after` probes in a row
were answered; it starts in no state, and its first decision gives UP or DOWN. As with BFD's
detect multiplier (RFC 5880 section 6.8.4), a failure is detected about `down_after` probe
intervals after it began.

Outcomes are taken in the order the probes were sent, so "in a row" means consecutive probes
even when a later probe's reply comes before an earlier probe's timeout. Pure: the caller says
when probes are sent and answered and what time it is.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

DEFAULT_DOWN_AFTER = 3
DEFAULT_UP_AFTER = 1


class State(enum.Enum):
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class LivenessConfig:
    down_after: int = DEFAULT_DOWN_AFTER
    up_after: int = DEFAULT_UP_AFTER
    timeout_ns: int = 0  # 0: the session's probe interval

    def __post_init__(self) -> None:
        if self.down_after < 1 or self.up_after < 1:
            raise ValueError(
                f"down_after and up_after must be >= 1, not {self.down_after}, {self.up_after}"
            )
        if self.timeout_ns < 0:
            raise ValueError(f"liveness timeout must be >= 0 ns, not {self.timeout_ns}")


@dataclass(frozen=True)
class LivenessChange:
    """The path went UP or DOWN; the probe with sequence number `seq`, sent at `at_ns` (its
    T1), decided it after `consecutive` replies (UP) or misses (DOWN) in a row."""

    session: str
    state: State
    previous: State | None  # None: the session's first state
    at_ns: int
    seq: int
    consecutive: int


@dataclass
class _Probe:
    seq: int
    sent_ns: int
    replied: bool = False


class LivenessMonitor:
    """One session's liveness state machine."""

    def __init__(self, session: str, config: LivenessConfig, timeout_ns: int) -> None:
        if timeout_ns <= 0:
            raise ValueError(f"liveness timeout must be > 0 ns, not {timeout_ns}")
        self.session = session
        self.config = config
        self.timeout_ns = timeout_ns
        self.state: State | None = None
        self.changes = 0  # state changes so far, the first decision included
        self._undecided: deque[_Probe] = deque()  # send order
        self._by_seq: dict[int, _Probe] = {}
        self._missed = 0
        self._answered = 0

    def sent(self, seq: int, sent_ns: int) -> None:
        probe = _Probe(seq, sent_ns)
        self._undecided.append(probe)
        self._by_seq[seq] = probe

    def replied(self, seq: int, received_ns: int) -> list[LivenessChange]:
        """A reply to probe `seq` arrived at `received_ns`; a late one counts as missed."""
        probe = self._by_seq.get(seq)
        if probe is not None and received_ns - probe.sent_ns < self.timeout_ns:
            probe.replied = True
        return self.decide(received_ns)

    def decide(self, now: int) -> list[LivenessChange]:
        """Take every probe whose outcome is known at `now`, oldest first; the changes made."""
        changes: list[LivenessChange] = []
        while self._undecided:
            probe = self._undecided[0]
            if not probe.replied and now - probe.sent_ns < self.timeout_ns:
                break  # its reply may still come: later probes wait for it
            self._undecided.popleft()
            del self._by_seq[probe.seq]
            change = self._outcome(probe)
            if change is not None:
                changes.append(change)
        return changes

    def deadline(self) -> int | None:
        """When the oldest undecided probe is missed unless answered (None: nothing pending)."""
        if not self._undecided:
            return None
        return self._undecided[0].sent_ns + self.timeout_ns

    def _outcome(self, probe: _Probe) -> LivenessChange | None:
        if probe.replied:
            self._answered, self._missed = self._answered + 1, 0
            if self.state is not State.UP and self._answered >= self.config.up_after:
                return self._change(State.UP, probe, self._answered)
        else:
            self._missed, self._answered = self._missed + 1, 0
            if self.state is not State.DOWN and self._missed >= self.config.down_after:
                return self._change(State.DOWN, probe, self._missed)
        return None

    def _change(self, state: State, probe: _Probe, consecutive: int) -> LivenessChange:
        previous, self.state = self.state, state
        self.changes += 1
        return LivenessChange(self.session, state, previous, probe.sent_ns, probe.seq, consecutive)
