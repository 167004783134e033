"""Per-hop loss localisation (RFC 9341 section 3.1): every node on a flow's path counts the
flow's packets of a block, so the loss of each segment is count(A) - count(B) of its ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class HopCount:
    node: str
    packets: int | None  # None: not measured (the reason says why)
    reason: str = ""


@dataclass(frozen=True)
class SegmentLoss:
    src: str
    dst: str
    lost: int | None  # None when either end has no count


def segments(path: Sequence[str], counts: Mapping[str, HopCount]) -> list[SegmentLoss]:
    """The loss between each pair of consecutive counting nodes, in path order."""
    out = []
    for a, b in pairwise(path):
        packets = [counts[n].packets if n in counts else None for n in (a, b)]
        lost = None if None in packets else packets[0] - packets[1]  # type: ignore[operator]
        out.append(SegmentLoss(a, b, lost))
    return out
