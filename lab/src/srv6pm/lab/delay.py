"""Delay injection for the lab: this kernel has no netem, so packets are queued to userspace
(ip6tables NFQUEUE, netfilter's xt target through nft compat) and released after a fixed delay.

`python -m srv6pm.lab.delay --queue N --delay-ms D` runs inside a router's namespace; the lab
adds the NFQUEUE rule for the link to delay. Every packet is held, in arrival order, until its
arrival time + D, then accepted: the delay is exact up to the timer's precision (tens of
microseconds), independent of the rate, because verdicts are issued from one timer loop rather
than by sleeping in the packet callback.
"""

from __future__ import annotations

import argparse
import collections
import os
import select
import signal
import sys
import time
from types import FrameType

from netfilterqueue import NetfilterQueue, Packet


def _run_realtime() -> None:
    """Verdicts must leave on time even when the machine is busy (CI runs labs beside builds):
    a real-time thread pre-empts them and has no timer slack. Without the privilege the delay is
    still right on an idle machine, so this is best effort."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    except OSError as err:
        print(
            f"delayer: no real-time scheduling ({err}); delays may be late under load",
            file=sys.stderr,
        )


def run(queue: int, delay_ns: int) -> int:
    _run_realtime()
    held: collections.deque[tuple[int, Packet]] = collections.deque()
    nfq = NetfilterQueue()
    nfq.bind(queue, lambda pkt: held.append((time.monotonic_ns() + delay_ns, pkt)), max_len=65536)
    stopping = False

    def stop(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    fd = nfq.get_fd()
    print("ready", flush=True)
    try:
        while not stopping:
            now = time.monotonic_ns()
            while held and held[0][0] <= now:
                held.popleft()[1].accept()
            timeout = (held[0][0] - now) / 1e9 if held else 0.1
            readable, _, _ = select.select([fd], [], [], max(0.0, timeout))
            if readable:
                nfq.run(block=False)
    finally:
        for _, pkt in held:  # nothing is lost when the delayer stops
            pkt.accept()
        nfq.unbind()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="srv6pm-lab-delay", description=__doc__)
    parser.add_argument("--queue", type=int, required=True, help="NFQUEUE number")
    parser.add_argument("--delay-ms", type=float, required=True, help="added one-way delay")
    args = parser.parse_args(argv)
    return run(args.queue, round(args.delay_ms * 1e6))


if __name__ == "__main__":
    sys.exit(main())
