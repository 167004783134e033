"""Protection of multipath policies: a segment list whose liveness is down (a liveness session
of this node probing it) gets no new flows hashed onto it until it is up again. The last segment
lists up are never taken out, nor all of them: with every one down, the policy keeps them all."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from ..domain.model import SenderSession, SrPolicy
from ..drivers.base import DataPlaneDriver

log = logging.getLogger(__name__)


def routed(policy: SrPolicy, down: AbstractSet[str]) -> SrPolicy:
    """The policy as the data plane should hold it with these segment lists down."""
    if not policy.protection or not policy.segment_lists:
        return policy
    up = tuple(sl for sl in policy.segment_lists if sl.name not in down)
    if not up or len(up) == len(policy.segment_lists):
        return policy
    if len(up) == 1:  # the kernel holds a one-hop multipath route as a plain one
        return replace(policy, segments=up[0].segments, segment_lists=())
    return replace(policy, segment_lists=up)


class Protection:
    """Liveness changes in, policy routes out. Changes arrive on the STAMP loop thread, which
    an apply may be waiting on while it holds the apply lock: they are applied on a thread of
    their own."""

    def __init__(self, driver: DataPlaneDriver, apply_lock: threading.Lock) -> None:
        self._driver = driver
        self._lock = apply_lock
        self._down: dict[str, set[str]] = {}  # policy -> names of its segment lists down
        self._policies: dict[str, SrPolicy] = {}  # as last applied (desired)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="protection")

    def routed(
        self, policies: Iterable[SrPolicy], sessions: Iterable[SenderSession]
    ) -> tuple[SrPolicy, ...]:
        """`policies` as routed now; remembered as the desired ones (call with the lock held).
        A segment list no liveness session probes any more is not held down any more."""
        self._policies = {p.name: p for p in policies}
        probed = {(s.policy_label, s.segment_list) for s in sessions if s.liveness.enabled}
        for policy, names in self._down.items():
            names.intersection_update(n for n in list(names) if (policy, n) in probed)
        return tuple(routed(p, self._down.get(p.name, set())) for p in self._policies.values())

    def liveness_changed(self, session: SenderSession, up: bool) -> None:
        if session.segment_list:
            self._worker.submit(self._change, session.policy_label, session.segment_list, up)

    def _change(self, policy: str, segment_list: str, up: bool) -> None:
        with self._lock:
            down = self._down.setdefault(policy, set())
            (down.discard if up else down.add)(segment_list)
            held = self._policies.get(policy)
            if held is None or not held.protection or not held.segment_lists:
                return
            try:
                self._driver.add_policy(routed(held, down))
            except Exception:  # the next apply converges it; the event itself is journaled
                log.exception("protection of policy %s failed", policy)
                return
            log.warning(
                "policy %s: segment list %s is %s; routed over %s",
                policy,
                segment_list,
                "up" if up else "down",
                ", ".join(sl.name for sl in held.segment_lists if sl.name not in down)
                or "all (every one is down)",
            )

    def close(self) -> None:
        self._worker.shutdown(wait=True)
