"""Monitored flows and the counter slots a driver gives them: what every driver that counts in
slots (the eBPF maps' indexes, the VPP plugin's counters) keeps in its state file, so that a
restarted node manager finds each flow's counters where they were."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TypeVar

from srv6pm.common.srv6 import Role

from ..domain.errors import FailedPrecondition
from ..domain.model import MonitoredFlow

F = TypeVar("F", bound="InstalledFlow")


@dataclass(frozen=True)
class InstalledFlow:
    """A monitored flow and the counter slot it holds."""

    name: str
    segments: tuple[str, ...]
    role: Role
    interfaces: tuple[str, ...]
    slot: int
    flowmon_id: int = 0

    def spec(self) -> MonitoredFlow:
        return MonitoredFlow(self.name, self.segments, self.role, self.interfaces, self.flowmon_id)


def install(
    add: Sequence[MonitoredFlow], used: AbstractSet[int], limit: int, kind: type[F]
) -> list[F]:
    """`add` in the lowest slots below `limit` that are not `used`; :class:`FailedPrecondition`
    if the node has too few."""
    if len(used) + len(add) > limit:
        raise FailedPrecondition(
            f"{len(used) + len(add)} monitored flows exceed this node's {limit}"
        )
    free = (s for s in range(limit) if s not in used)
    return [kind(f.name, f.segments, f.role, f.interfaces, next(free), f.flowmon_id) for f in add]
