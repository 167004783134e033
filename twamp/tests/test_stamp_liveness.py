"""Liveness of a session's path: DOWN after `down_after` probes in a row unanswered within the
timeout, UP after `up_after` answered, decided in send order and at each miss's deadline. The
state machine alone, the sender on a clock of ours, and the sender and a reflector over real
UDP sockets on the loopback (counts asserted, never wall-clock times)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from srv6pm.twamp import codec
from srv6pm.twamp.liveness import LivenessConfig, LivenessMonitor, State
from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig
from srv6pm.twamp.results import ResultStore
from srv6pm.twamp.sender import SenderConfig, SenderSession
from srv6pm.twamp.transport import Datagram, Endpoint, open_socket
from test_stamp_delay_blocks import BLOCK, MS, PERIOD, Clock, _Counters, reply

TIMEOUT = 100 * MS


def monitor(down_after: int = 3, up_after: int = 2) -> LivenessMonitor:
    return LivenessMonitor("s", LivenessConfig(down_after, up_after), TIMEOUT)


def run(m: LivenessMonitor, outcomes: str, start: int = 0) -> list:
    """Probes every 10 ms from seq `start`: 'r' answered 1 ms later, 'm' never; then every
    deadline passed. The changes, in order."""
    changes = []
    for i, outcome in enumerate(outcomes):
        seq, t1 = start + i, (start + i) * 10 * MS
        changes += m.decide(t1)
        m.sent(seq, t1)
        if outcome == "r":
            changes += m.replied(seq, t1 + MS)
    return changes + m.decide(10**15)


def test_a_session_starts_unknown_and_its_first_decision_gives_up_or_down():
    m = monitor()
    assert m.state is None and run(m, "r") == [] and m.state is None
    (up,) = run(m, "r", 1)
    assert (up.state, up.previous, up.seq, up.consecutive) == (State.UP, None, 1, 2)
    m = monitor()
    (down,) = run(m, "mmm")
    assert (down.state, down.previous, down.seq, down.consecutive) == (State.DOWN, None, 2, 3)


def test_down_after_exactly_n_misses_in_a_row_and_up_after_m_replies():
    m = monitor(down_after=3, up_after=2)
    changes = run(m, "rr" + "mm" + "r" + "mmm" + "mm" + "r" + "m" + "rr" + "rrr")
    # seq:         0 1     2 3     4     5 6 7     8 9     10    11    12 13
    assert [(c.state, c.seq, c.consecutive) for c in changes] == [
        (State.UP, 1, 2),
        (State.DOWN, 7, 3),  # 2, 3 then a reply: not 3 in a row; 5, 6, 7 are
        (State.UP, 13, 2),  # 10 alone was not 2 in a row
    ]
    assert [c.previous for c in changes] == [None, State.UP, State.DOWN]
    assert changes[1].at_ns == 7 * 10 * MS  # T1 of the probe that decided it
    assert m.changes == 3


def test_outcomes_are_taken_in_send_order():
    m = monitor(down_after=2, up_after=1)
    m.sent(0, 0)
    m.sent(1, 10 * MS)
    # probe 1 answered while probe 0 may still be: nothing decided yet
    assert m.replied(1, 11 * MS) == [] and m.state is None
    assert m.deadline() == TIMEOUT
    (up,) = m.decide(TIMEOUT)  # 0 missed (one miss is not down), then 1 answered: up
    assert (up.state, up.seq, up.consecutive) == (State.UP, 1, 1)
    assert m.deadline() is None


def test_a_reply_after_the_timeout_is_a_miss():
    m = monitor(down_after=1, up_after=1)
    m.sent(0, 0)
    (down,) = m.replied(0, TIMEOUT)
    assert down.state is State.DOWN


def test_settings_below_one_are_refused():
    with pytest.raises(ValueError, match="must be >= 1"):
        LivenessConfig(down_after=0)
    with pytest.raises(ValueError, match="> 0 ns"):
        LivenessMonitor("s", LivenessConfig(), 0)


def sender(clock: Clock, liveness: LivenessConfig, interval: int = 100 * MS):
    sent: list[bytes] = []
    config = SenderConfig(
        name="s",
        ssid=7,
        reflector=("2001:db8::2", 862),
        forward_flow="",
        reverse_flow="",
        period_ns=PERIOD,
        delay_interval_ns=interval,
        timeout_ns=300 * MS,
        liveness=liveness,
    )
    store = ResultStore()
    s = SenderSession(config, _Counters(), lambda d, _to: sent.append(d) or True, clock, store)
    return s, sent, store


def test_the_timeout_defaults_to_the_probe_interval_and_stays_within_the_probe_timeout():
    clock = Clock(BLOCK * PERIOD)
    assert sender(clock, LivenessConfig())[0].liveness.timeout_ns == 100 * MS
    assert sender(clock, LivenessConfig(), interval=0)[0].liveness.timeout_ns == 300 * MS
    assert sender(clock, LivenessConfig(timeout_ns=50 * MS))[0].liveness.timeout_ns == 50 * MS


def test_misses_are_decided_at_their_deadline_without_waiting_for_a_reply():
    clock = Clock(BLOCK * PERIOD)
    s, sent, store = sender(clock, LivenessConfig(down_after=2, up_after=1))
    s._probe(None)
    reply(s, sent[-1], clock.now, 1 * MS)
    assert [c.state for c in store.liveness] == [State.UP]
    for _ in range(2):  # two probes, never answered, each checked when the next one goes
        clock.now += 100 * MS
        s.expire(clock.now)
        s._probe(None)
    assert [c.state for c in store.liveness] == [State.UP]
    clock.now += 100 * MS  # the second miss's deadline: the send tick decides it
    s.expire(clock.now)
    assert [c.state for c in store.liveness] == [State.UP, State.DOWN]
    assert store.liveness[-1].at_ns == clock.now - 100 * MS
    assert s.liveness.state is State.DOWN


def test_a_session_without_liveness_has_no_state():
    s, _, store = sender(Clock(BLOCK * PERIOD), None)
    s._probe(None)
    s.expire(s.clock() + PERIOD)
    assert s.liveness is None and not store.liveness


# ---- over real sockets --------------------------------------------------------------------------

INTERVAL = 20 * MS
DOWN_AFTER, UP_AFTER = 4, 3


class Switch:
    """A reflector's handler that drops every probe while off, remembering the first sequence
    number it dropped and the first it answered after being switched back on."""

    def __init__(self, reflector: Reflector) -> None:
        self.reflector = reflector
        self.on = True
        self.first_dropped: int | None = None
        self.first_answered: int | None = None

    def handle(self, datagram: Datagram) -> None:
        seq = codec.decode_sender(datagram.data).seq
        if not self.on:
            self.first_dropped = seq if self.first_dropped is None else self.first_dropped
            return
        if self.first_dropped is not None and self.first_answered is None:
            self.first_answered = seq
        self.reflector.handle(datagram)


async def wait_for(condition, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def reflector_stops_then_answers_again():
    reflector_endpoint = Endpoint(open_socket("::1", 0))
    port = reflector_endpoint.sock.getsockname()[1]
    reflector = Reflector(
        ReflectorConfig(
            stateful=False,
            key=None,
            error_estimate=0x8001,
            period_ns=PERIOD,
            sessions={7: ReflectedFlows("", "")},
        ),
        _Counters(),
        reflector_endpoint.send,
    )
    switch = Switch(reflector)
    reflector_endpoint.serve(switch.handle)
    sender_endpoint = Endpoint(open_socket("::1", 0))
    store = ResultStore()
    session = SenderSession(
        SenderConfig(
            name="s",
            ssid=7,
            reflector=("::1", port),
            forward_flow="",
            reverse_flow="",
            period_ns=PERIOD,
            delay_interval_ns=INTERVAL,
            # several probes in flight: a loaded machine's late loop never turns a reply into
            # a miss, and outcomes still count in send order
            liveness=LivenessConfig(DOWN_AFTER, UP_AFTER, timeout_ns=5 * INTERVAL),
        ),
        _Counters(),
        sender_endpoint.send,
        results=store,
    )
    sender_endpoint.serve(session.handle)
    task = asyncio.create_task(session.run())
    try:
        await wait_for(lambda: len(store.liveness) == 1)
        switch.on = False
        await wait_for(lambda: len(store.liveness) == 2)
        switch.on = True
        await wait_for(lambda: len(store.liveness) == 3)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sender_endpoint.close()
        reflector_endpoint.close()
    return list(store.liveness), switch


def test_a_reflector_that_stops_answering_is_down_after_n_probes_and_up_after_m():
    (first, down, up), switch = asyncio.run(reflector_stops_then_answers_again())
    assert (first.state, first.previous, first.seq, first.consecutive) == (
        State.UP,
        None,
        UP_AFTER - 1,
        UP_AFTER,
    )
    assert (down.state, down.previous, down.consecutive) == (State.DOWN, State.UP, DOWN_AFTER)
    assert down.seq == switch.first_dropped + DOWN_AFTER - 1  # exactly N probes unanswered
    assert (up.state, up.previous, up.consecutive) == (State.UP, State.DOWN, UP_AFTER)
    assert up.seq == switch.first_answered + UP_AFTER - 1  # exactly M answered
    assert first.at_ns < down.at_ns < up.at_ns
