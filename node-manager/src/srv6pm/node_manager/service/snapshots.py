"""Per-block snapshots of the stable colour's counters (RFC 9341 section 3.1).

Snapshot b holds, per flow, the counter of colour (b - 1) % 2 read inside block b, after the
guard: that colour is stable then. Block k = snapshot k+1 - snapshot k-1 of colour k % 2. The
last few snapshots are kept on disk so a restarted node manager can still difference across the
restart.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

Count = tuple[int, int]  # packets, bytes
ON_DISK = 3


@dataclass
class Snapshot:
    block: int
    complete: bool = False  # every flow was read; otherwise only zero baselines of new flows
    counts: dict[str, Count] = field(default_factory=dict)
    epoch: int = 0  # the data plane's counter epoch they were read in (drivers/base.py)


class SnapshotStore:
    def __init__(self, path: Path, history: int) -> None:
        self._path = path
        self._history = history
        self._snapshots: dict[int, Snapshot] = {}
        if path.exists():
            for s in json.loads(path.read_text()):
                counts = {k: (v[0], v[1]) for k, v in s["counts"].items()}
                snap = Snapshot(s["block"], s["complete"], counts, s.get("epoch", 0))
                self._snapshots[s["block"]] = snap

    def get(self, block: int) -> Snapshot | None:
        return self._snapshots.get(block)

    def record(self, block: int, counts: dict[str, Count], epoch: int = 0) -> None:
        """A full read of every flow in block `block`, in counter epoch `epoch`."""
        snap = self._snapshots.setdefault(block, Snapshot(block))
        if snap.epoch != epoch:  # baselines of another epoch are no baselines
            snap.counts.clear()
        snap.counts.update(counts)
        snap.complete = True
        snap.epoch = epoch
        self._trim_and_save()

    def baseline(self, block: int, names: list[str], epoch: int = 0) -> None:
        """New flows start from zero: their baseline for `block` is known without a read."""
        snap = self._snapshots.setdefault(block, Snapshot(block, epoch=epoch))
        for n in names:
            snap.counts[n] = (0, 0)
        self._trim_and_save()

    def forget(self, names: list[str]) -> None:
        """Removed flows: a flow added again later under the same name starts from zero."""
        for snap in self._snapshots.values():
            for n in names:
                snap.counts.pop(n, None)
        self._trim_and_save()

    def _trim_and_save(self) -> None:
        for b in sorted(self._snapshots)[: -self._history]:
            del self._snapshots[b]
        recent = [self._snapshots[b] for b in sorted(self._snapshots)[-ON_DISK:]]
        data = [
            {"block": s.block, "complete": s.complete, "counts": s.counts, "epoch": s.epoch}
            for s in recent
        ]
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self._path)
