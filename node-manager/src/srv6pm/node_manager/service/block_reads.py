"""Counters and blocks: a snapshot of every flow's stable colour once per block, the packets of a
block from the snapshots around it or from the record journaled when it became readable, and
those records (journaled once per block, "not running" for blocks a restart missed)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from srv6pm.twamp.sender import MAX_GAP_BLOCKS

from ..domain.blocks import BlockClock, FlowBlock, colour, counter_delta
from ..domain.errors import FailedPrecondition, NodeManagerError, NotFound
from ..domain.model import MonitoredFlow
from ..drivers.base import DataPlaneDriver, FlowCounters, counter_epoch
from .results import ResultsService
from .snapshots import Count, SnapshotStore

log = logging.getLogger(__name__)
NO_BASELINE = (
    "no baseline: the flow was added in this block, or the node manager was not running in the "
    "block before"
)
NOT_RUNNING = "not measured: the node manager was not running"
DATA_PLANE_RESTARTED = (
    "not measured: the data plane restarted in or next to this block (VPP restarted), and its "
    "counters began again from zero"
)
Publication = tuple[list[FlowBlock], dict[str, MonitoredFlow]]


@dataclass(frozen=True)
class BlockReading:
    block: int
    colour: int
    counts: dict[str, Count]


class BlockReads:
    """Reads of counters and blocks; `lock` serialises them with changes to the flows."""

    def __init__(
        self,
        driver: DataPlaneDriver,
        results: ResultsService,
        snapshots: SnapshotStore,
        blocks: BlockClock,
        guard_ns: int,
        clock: Callable[[], int],
    ) -> None:
        self._driver = driver
        self._results = results
        self._snapshots = snapshots
        self._blocks = blocks
        self._guard_ns = guard_ns
        self._clock = clock
        self.lock = threading.Lock()
        self._flow_resume: dict[str, int] | None = None  # next block to journal, per flow

    # ---- flows changing (under `lock`) -------------------------------------------------------

    def removed(self, names: Iterable[str]) -> None:
        """Removed flows: one added again later under the same name starts afresh, no gap."""
        gone = list(names)
        self._snapshots.forget(gone)
        if self._flow_resume is not None:
            for name in gone:
                self._flow_resume.pop(name, None)

    def added(self, names: Iterable[str]) -> None:
        """New flows count from zero: that is their baseline in the current block."""
        block = self._blocks.block(self._clock())
        self._snapshots.baseline(block, list(names), counter_epoch(self._driver))

    # ---- reads -------------------------------------------------------------------------------

    def _names(self, requested: Iterable[str]) -> list[str]:
        wanted = list(requested)
        if not wanted:
            return [f.name for f in self._driver.flows()]
        known = self._driver.flow_names()  # a set: STAMP asks for one flow per probe
        unknown = sorted(n for n in wanted if n not in known)
        if unknown:
            raise NotFound(f"no monitored flow named {', '.join(unknown)} on this node")
        return wanted

    def read_counters(self, requested: Iterable[str]) -> tuple[int, dict[str, FlowCounters]]:
        with self.lock:
            names = self._names(requested)
            now = self._clock()
            return now, dict(self._driver.read_counters(names))

    def read_block(self, requested: Iterable[str], block: int) -> BlockReading:
        self.snapshot()
        with self.lock:
            names = self._names(requested)
            now = self._clock()
            current = self._blocks.block(now)
            readable = self._blocks.readable_from(block, self._guard_ns)
            if block >= current or now < readable:
                raise FailedPrecondition(
                    f"block {block} is not readable yet: its counters are stable from "
                    f"{_iso(readable)} (now {_iso(now)}, block {current})"
                )
            return BlockReading(block, colour(block), self._counts(names, block))

    def block_packets(self, flow: str, block: int) -> int | None:
        """Counters for STAMP's Direct Measurement TLV: None when not readable."""
        try:
            return self.read_block([flow], block).counts[flow][0]
        except NodeManagerError as e:
            log.info("no count of %s for block %d: %s", flow, block, e)
            return None

    def _counts(self, names: list[str], block: int) -> dict[str, Count]:
        """Each flow's count of `block`: from the snapshots around it when both are here, else
        from the record journaled when it became readable. Only the last few snapshots survive
        a restart: an end snapshot may outlive its start, and the journal has the block then."""
        end = self._snapshots.get(block + 1)
        counts: dict[str, Count] = {}
        missing = []
        for name in names:
            reading = self._from_snapshots(name, block) if end and end.complete else None
            if reading and reading.valid:
                counts[name] = (reading.packets, reading.bytes)
                continue
            record = self._results.flow_block(name, block)
            if record is not None and record.valid:
                counts[name] = (record.packets, record.bytes)
            elif reading is not None and reading.reason == NO_BASELINE:
                missing.append(name)
            elif reading is not None:
                raise FailedPrecondition(f"block {block} of flow {name!r}: {reading.reason}")
            elif record is None:
                raise FailedPrecondition(
                    f"block {block} of flow {name!r} was not read inside its safe window "
                    f"(block {block + 1}) and is not in the journal: the node manager was not "
                    "running then, or the journal's retention removed it"
                )
            else:
                raise FailedPrecondition(f"block {block} of flow {name!r}: {record.reason}")
        if missing:
            raise FailedPrecondition(
                f"no baseline for block {block} of flow(s) {', '.join(missing)}: they "
                f"were not monitored (or the node manager was down) in block {block - 1}"
            )
        return counts

    def _from_snapshots(self, name: str, block: int) -> FlowBlock:
        """Block `block` of one flow from snapshots block-1 and block+1 (present)."""
        start = self._snapshots.get(block - 1)
        end = self._snapshots.get(block + 1)
        if start is None or end is None or name not in start.counts or name not in end.counts:
            return FlowBlock(name, block, valid=False, reason=NO_BASELINE)
        if start.epoch != end.epoch:
            return FlowBlock(name, block, valid=False, reason=DATA_PLANE_RESTARTED)
        width = self._driver.capabilities().counter_width_bits
        (p1, b1), (p0, b0) = end.counts[name], start.counts[name]
        return FlowBlock(name, block, counter_delta(p1, p0, width), counter_delta(b1, b0, width))

    # ---- once per block ----------------------------------------------------------------------

    def snapshot(self) -> None:
        """This block's snapshot, if due and not taken yet; then journal the flows' counts of
        the block that became readable (outside the lock: building thousands of records must
        not hold up reads)."""
        with self.lock:
            due = self._snapshot_if_due(self._clock())
        if due:
            self._results.flow_blocks(*due)

    def _snapshot_if_due(self, now: int) -> Publication | None:
        """Read every flow's stable colour once per block, inside the safe window; the flow
        counts of the block that became readable, to publish."""
        current = self._blocks.block(now)
        snap = self._snapshots.get(current)
        if (snap and snap.complete) or now < self._blocks.start(current) + self._guard_ns:
            return None
        stable = colour(current - 1)
        names = [f.name for f in self._driver.flows()]
        epoch = counter_epoch(self._driver)
        read = self._driver.read_counters(names)
        if self._blocks.block(self._clock()) != current:
            log.warning("block %d: counter read ran into the next block; not recorded", current)
            return None
        if counter_epoch(self._driver) != epoch:
            log.warning("block %d: the data plane restarted during the counter read", current)
            return None
        counts = {n: (c[stable].packets, c[stable].bytes) for n, c in read.items()}
        self._snapshots.record(current, counts, epoch)
        return self._block_records(current - 1)

    def _block_records(self, block: int) -> Publication:
        """Every flow's count of `block` (just readable), and "not running" records for the
        blocks a restart missed since the flow's last record."""
        flows = {f.name: f for f in self._driver.flows()}
        if self._flow_resume is None:
            self._flow_resume = {
                name: last + 1 for name, last in self._results.last_flow_blocks().items()
            }
        out = []
        for name in flows:
            resume = self._flow_resume.get(name, block)
            out += [
                FlowBlock(name, b, valid=False, reason=NOT_RUNNING)
                for b in range(max(resume, block - MAX_GAP_BLOCKS), block)
            ]
            out.append(self._from_snapshots(name, block))
            self._flow_resume[name] = block + 1
        return out, flows

    def next_read(self) -> int:
        """This block's read point while its snapshot is still to take (a thread that woke
        late, or waited for the lock, must not skip a block), else the next block's: the
        middle of the block (RFC 9341's usual safe read point), the guard at the earliest."""
        now = self._clock()
        current = self._blocks.block(now)
        offset = max(self._blocks.period_ns // 2, self._guard_ns)
        snap = self._snapshots.get(current)
        if snap is None or not snap.complete:
            return max(now, self._blocks.start(current) + offset)
        return self._blocks.start(current + 1) + offset


def _iso(unix_ns: int) -> str:
    ms = (unix_ns // 1_000_000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_ns / 1e9)) + f".{ms:03d}Z"
