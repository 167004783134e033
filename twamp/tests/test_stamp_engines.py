"""Sender and reflector engines over real UDP sockets on the loopback, with counters from a
table (the data plane is tested in the lab: tests/test_lab_stamp.py)."""

from __future__ import annotations

import asyncio
import contextlib

from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig
from srv6pm.twamp.sender import SenderConfig, SenderSession
from srv6pm.twamp.transport import Endpoint, open_socket

PERIOD = 200_000_000  # 0.2 s blocks keep the test short


class TableCounters:
    """Packets per (flow, block): forward 100 sent / 97 received, reverse 50 / 50."""

    def __init__(self, side: str) -> None:
        self.side = side

    def block_packets(self, flow: str, block: int) -> int | None:
        table = {"sender": {"fwd": 100, "rev": 50}, "reflector": {"fwd": 97, "rev": 50}}
        return table[self.side].get(flow)


async def run_pair(sender_key: bytes | None, reflector_key: bytes | None, seconds: float):
    reflector_sock = open_socket("::1", 0)
    port = reflector_sock.getsockname()[1]
    reflector_endpoint = Endpoint(reflector_sock)
    reflector = Reflector(
        ReflectorConfig(
            stateful=True,
            key=reflector_key,
            error_estimate=0x8001,
            period_ns=PERIOD,
            sessions={7: ReflectedFlows("fwd", "rev")},
        ),
        TableCounters("reflector"),
        reflector_endpoint.send,
    )
    reflector_endpoint.serve(reflector.handle)
    sender_endpoint = Endpoint(open_socket("::1", 0))
    session = SenderSession(
        SenderConfig(
            name="s",
            ssid=7,
            reflector=("::1", port),
            forward_flow="fwd",
            reverse_flow="rev",
            period_ns=PERIOD,
            delay_interval_ns=50_000_000,
            key=sender_key,
            timeout_ns=150_000_000,
            clock_synchronised=True,
        ),
        TableCounters("sender"),
        sender_endpoint.send,
    )
    sender_endpoint.serve(session.handle)
    task = asyncio.create_task(session.run())
    await asyncio.sleep(seconds)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # the last probe's reply may still be on its way: let it arrive before closing the socket
    for _ in range(50):
        if session.stats.received + reflector.stats.auth_failures >= reflector.stats.received:
            break
        await asyncio.sleep(0.01)
    sender_endpoint.close()
    reflector_endpoint.close()
    return session, reflector


def test_loss_per_block_comes_from_both_ends_counters():
    session, reflector = asyncio.run(run_pair(None, None, 1.2))
    valid = [r for r in session.results.loss if r.valid]
    assert len(valid) >= 3
    for r in valid:
        assert (r.forward.tx, r.forward.rx, r.forward.lost) == (100, 97, 3)
        assert (r.reverse.tx, r.reverse.rx, r.reverse.lost) == (50, 50, 0)
    assert session.stats.lost == 0 and reflector.stats.reflected == session.stats.received
    assert all(d.two_way_ns >= 0 and d.forward_ns is not None for d in session.results.delay)


def test_authenticated_sessions_work_with_the_same_key():
    session, reflector = asyncio.run(run_pair(b"k" * 32, b"k" * 32, 0.6))
    assert session.stats.received > 0 and reflector.stats.auth_failures == 0


def test_a_wrong_key_is_counted_and_every_probe_is_lost():
    session, reflector = asyncio.run(run_pair(b"k" * 32, b"x" * 32, 0.8))
    # the last probe may still be in flight when the test stops
    assert session.stats.sent - 1 <= reflector.stats.auth_failures <= session.stats.sent
    assert reflector.stats.auth_failures > 0
    assert reflector.stats.reflected == 0 and session.stats.received == 0
    assert session.results.loss and all(r.reason == "probe lost" for r in session.results.loss)
