"""The node's background thread: once per block, a snapshot of the counters at the middle of the
block (RFC 9341's usual safe read point), the in-kernel reflector's counts of the closed block as
soon as they are stable, and the clock's synchronisation state."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..domain.blocks import BlockClock
from .block_reads import BlockReads
from .kernel_reflection import KernelReflectorFeed

log = logging.getLogger(__name__)
RETRY_S = 0.1  # the pause after a failed pass


class ClockSync:
    """Is the clock synchronised? Asked again once per block (a time daemon may gain or lose
    its source while we run); the followers (the S bit of the senders' and both reflectors'
    Error Estimates) are told of a change under `lock`, which an apply holds too."""

    def __init__(self, ask: Callable[[], bool], lock: threading.Lock) -> None:
        self._ask = ask
        self._lock = lock
        self.synced = ask()
        self._followers: list[Callable[[bool], None]] = []

    def follow(self, follower: Callable[[bool], None]) -> None:
        self._followers.append(follower)

    def refresh(self) -> None:
        synced = self._ask()
        if synced == self.synced:
            return
        log.warning("clock %s", "synchronised" if synced else "no longer synchronised")
        with self._lock:
            self.synced = synced
            for follower in self._followers:
                follower(synced)


class Periodic:
    def __init__(
        self,
        reads: BlockReads,
        feed: KernelReflectorFeed,
        clock_sync: ClockSync,
        blocks: BlockClock,
        guard_ns: int,
        clock: Callable[[], int],
        counter_epoch: Callable[[], int] = lambda: 0,
    ) -> None:
        self._reads = reads
        self._feed = feed
        self._clock_sync = clock_sync
        self._blocks = blocks
        self._guard_ns = guard_ns
        self._clock = clock
        self._reflector_block = -1  # the last closed block handed to the in-kernel reflector
        self._counter_epoch = counter_epoch
        self._epoch = 0  # the data plane's counter epoch at the last tick (0: not read yet)
        self._restart_followers: list[Callable[[], bool]] = []
        self._restart_pending: list[Callable[[], bool]] = []  # to call again: they failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="block-snapshots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            done = self.tick()
            wake = min(self._reads.next_read(), self._next_closed_block())
            # a data plane that does not answer (VPP restarting) is asked again soon, not at once
            pause = max(0.0, (wake - self._clock()) / 1e9)
            self._stop.wait(pause if done else max(pause, RETRY_S))

    def on_data_plane_restart(self, follower: Callable[[], bool]) -> None:
        """Call `follower` when the data plane restarted under us (its counter epoch changed:
        VPP restarted and lost what it was given), and at every pass after that until it
        returns True (a VPP may come back before its interfaces do)."""
        self._restart_followers.append(follower)

    def tick(self) -> bool:
        """One pass: whatever is due now. False if it failed (logged)."""
        try:
            self._reads.snapshot()
            self.closed_block()
            self._follow_restarts()
        except Exception:
            log.exception("block snapshot failed")
            return False
        return True

    def _follow_restarts(self) -> None:
        epoch = self._counter_epoch()
        if self._epoch and epoch != self._epoch:
            log.warning("the data plane restarted (counter epoch %x, was %x)", epoch, self._epoch)
            self._restart_pending = list(self._restart_followers)
        self._epoch = epoch
        self._restart_pending = [f for f in self._restart_pending if not f()]

    def closed_block(self) -> None:
        """Once per block, when the last closed block's counts are stable (the guard), before
        the senders' loss probes (mid-block) arrive: follow the clock's synchronisation, give
        the in-kernel reflector that block's counts."""
        now = self._clock()
        block = self._blocks.block(now) - 1
        if block <= self._reflector_block or now < self._blocks.readable_from(
            block, self._guard_ns
        ):
            return
        self._reflector_block = block
        self._clock_sync.refresh()
        self._feed.publish_block(block, self._reads.block_packets)

    def _next_closed_block(self) -> int:
        current = self._blocks.block(self._clock())
        if self._reflector_block < current - 1:
            return self._blocks.readable_from(current - 1, self._guard_ns)
        return self._blocks.readable_from(current, self._guard_ns)
