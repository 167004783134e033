"""What the data plane's own STAMP reflector answers, when the driver offers one
(drivers.base.KernelReflector): unauthenticated probes, with the sessions' Direct Measurement
counts of each closed block. Without one the userspace reflector answers everything."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from srv6pm.common.srv6 import Behaviour
from srv6pm.twamp.error_estimate import clock_error_estimate

from ..domain.model import KernelReflection, NodeState
from ..drivers.base import KernelReflector

MAIN_TABLE = 254


def kernel_reflection(
    state: NodeState, clock_synchronised: bool, period_ns: int, reply_mark_base: int = 0
) -> KernelReflection | None:
    """What the data plane's reflector takes over from the userspace one, after decapsulation by
    an End.DT6 SID that delivers into table main, where the reflector address is local (the
    Linux one leaves authenticated probes to userspace)."""
    reflector = state.reflector
    if not reflector.enabled:
        return None
    decap = tuple(
        s.sid
        for s in state.local_sids
        if s.behaviour == Behaviour.END_DT6 and s.lookup_table in (0, MAIN_TABLE)
    )
    return KernelReflection(
        reflector.address,
        reflector.port,
        reflector.stateful,
        clock_error_estimate(clock_synchronised),
        decap,
        period_ns,
        tuple(
            (s.ssid, s.forward_flow, s.reverse_flow) for s in reflector.sessions if s.forward_flow
        ),
        tuple(
            (r.sender_address, s.ssid, r.segments)
            for s in reflector.sessions
            for r in s.return_paths
        ),
        reflector.allowed_dscp,
        reply_mark_base,
        reflector.hmac_key,
    )


class KernelReflectorFeed:
    """Keeps the driver's in-kernel reflector (if any) in step with the state, the clock's
    synchronisation and the closed blocks' counts. Callers serialise `apply` and
    `set_clock_synchronised` (the node's apply lock)."""

    def __init__(
        self, reflector: KernelReflector | None, period_ns: int, reply_mark_base: int = 0
    ) -> None:
        self._reflector = reflector
        self._period_ns = period_ns
        self._reply_mark_base = reply_mark_base
        self._reflection: KernelReflection | None = None
        self._applied = False  # the first apply sets it, whatever it held before a restart

    def apply(self, state: NodeState, clock_synchronised: bool) -> None:
        reflection = kernel_reflection(
            state, clock_synchronised, self._period_ns, self._reply_mark_base
        )
        if self._reflector and (reflection != self._reflection or not self._applied):
            self._reflector.apply(reflection)
        self._reflection, self._applied = reflection, True

    def set_clock_synchronised(self, synced: bool) -> None:
        """The S bit of its Error Estimates follows the clock."""
        if self._reflection is None:
            return
        self._reflection = replace(self._reflection, error_estimate=clock_error_estimate(synced))
        if self._reflector:
            self._reflector.apply(self._reflection)

    def publish_block(self, block: int, block_packets: Callable[[str, int], int | None]) -> None:
        """Once per closed block, when its counts are stable: refresh the reflector and give it
        the sessions' counts (a session whose counts are not readable is left to userspace,
        which answers when the kernel cannot)."""
        reflection = self._reflection
        if self._reflector is None or reflection is None:
            return
        self._reflector.refresh()
        counts = {}
        for ssid, forward, reverse in reflection.sessions:
            rx, tx = block_packets(forward, block), block_packets(reverse, block)
            if rx is not None and tx is not None:
                counts[ssid] = (rx, tx)
        if counts:
            self._reflector.publish_block(block, counts)

    def next_sequence(self) -> Callable[[str, int], int | None] | None:
        """The in-kernel reflector's stateful sequence numbers, for the userspace reflector."""
        return self._reflector.next_sequence if self._reflector else None

    @property
    def answers_all(self) -> bool:
        """The data plane answers every probe: no userspace reflector is needed."""
        return self._reflector is not None and self._reflector.answers_all

    def stats(self) -> Mapping[str, int]:
        return self._reflector.stats() if self._reflector else {}
