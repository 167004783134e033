"""Results become records in the node's journal before anything else sees them; ReadResults,
ReadBlock and the Kafka publisher read them back from there. A liveness change is also told to
the node's listener (protection), right after it is journaled. Delay per computation interval and
threshold events are journaled under kinds of their own, so ReadResults' `delay` keeps meaning
per block; Kafka carries them all."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable

from srv6pm.proto.v1 import records_pb2 as pb
from srv6pm.twamp.liveness import LivenessChange, State
from srv6pm.twamp.results import DelayBlock, DelayResult, LossResult, ResultStore
from srv6pm.twamp.thresholds import ThresholdEvent

from ..adapters import records
from ..adapters.journal import Entry, Journal, Kind
from ..domain.blocks import FlowBlock
from ..domain.model import MonitoredFlow, SenderSession

log = logging.getLogger(__name__)
LivenessListener = Callable[[SenderSession, bool], None]  # (session, up)
PROBES_IN_MEMORY = 256  # per session: ReadResults' recent probes (journaled only when published)
DEFAULT_LIMIT = 10_000


class SessionResults:
    """One Session-Sender's results (twamp's ResultSink): loss and delay per block are journaled;
    single probes are kept in memory (and journaled when the node publishes them)."""

    def __init__(
        self,
        owner: ResultsService,
        spec: SenderSession,
        listener: LivenessListener | None = None,
    ) -> None:
        self._owner = owner
        self._spec = spec
        self._listener = listener
        self._labels = records.labels(spec)
        self._memory = ResultStore(PROBES_IN_MEMORY)  # its probes only: the rest is journaled

    @property
    def probes(self) -> deque[DelayResult]:
        return self._memory.delay

    @property
    def evicted(self) -> int:
        return self._memory.evicted

    def add_loss(self, result: LossResult) -> None:
        record = records.loss(result, self._labels, self._owner.period_ns)
        self._owner.journal_one(
            Kind.LOSS, result.session, result.block, pb.MeasurementRecord(loss=record)
        )

    def add_delay_block(self, result: DelayBlock) -> None:
        record = records.delay(result, self._labels, self._owner.period_ns)
        self._owner.journal_one(
            Kind.DELAY, result.session, result.block, pb.MeasurementRecord(delay=record)
        )

    def add_delay_interval(self, result: DelayBlock) -> None:
        record = records.delay(result, self._labels, self._owner.period_ns)
        self._owner.journal_one(
            Kind.INTERVAL, result.session, result.block, pb.MeasurementRecord(delay=record)
        )

    def add_threshold(self, event: ThresholdEvent) -> None:
        block = event.at_ns // self._owner.period_ns
        record = pb.MeasurementRecord(threshold=records.threshold(event, self._labels))
        self._owner.journal_one(Kind.THRESHOLD, event.session, block, record)

    def add_delay(self, result: DelayResult) -> None:
        self._memory.add_delay(result)
        if self._owner.publish_probes:
            block = result.sent_ns // self._owner.period_ns
            record = records.probe(result, self._labels)
            self._owner.journal_one(
                Kind.PROBE, result.session, block, pb.MeasurementRecord(probe=record)
            )

    def add_liveness(self, change: LivenessChange) -> None:
        """Journaled first (queued for the next group commit, like every record), then told to
        the listener: protection does not wait for the disk's fsync."""
        block = change.at_ns // self._owner.period_ns
        record = pb.MeasurementRecord(liveness=records.liveness(change, self._labels))
        self._owner.journal_one(Kind.LIVENESS, change.session, block, record)
        if self._listener is None:
            return
        try:
            self._listener(self._spec, change.state is State.UP)
        except Exception:
            # the listener's failure must not stop the session's probes
            log.exception("liveness listener failed for session %s", change.session)


class ResultsService:
    def __init__(
        self,
        journal: Journal,
        node_id: str,
        period_ns: int,
        publish_probes: bool = False,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.journal = journal
        self.node_id = node_id
        self.period_ns = period_ns
        self.publish_probes = publish_probes
        self._clock = clock

    def _entry(self, kind: Kind, key: str, block: int, record: pb.MeasurementRecord) -> Entry:
        record.node = self.node_id
        record.created_unix_ns = now = self._clock()
        return Entry(kind, key, block, now, record.SerializeToString())

    def journal_one(self, kind: Kind, key: str, block: int, record: pb.MeasurementRecord) -> None:
        self.journal.append([self._entry(kind, key, block, record)])

    def session(
        self, spec: SenderSession, listener: LivenessListener | None = None
    ) -> SessionResults:
        return SessionResults(self, spec, listener)

    def resume_from(self, session: str) -> int | None:
        """The first block a restarted session has no loss record of (None: never measured)."""
        last = self.journal.last_block(Kind.LOSS, session)
        return None if last is None else last + 1

    def last_flow_blocks(self) -> dict[str, int]:
        """The last journaled block of every flow."""
        return self.journal.last_blocks(Kind.FLOW)

    def flow_blocks(self, blocks: Iterable[FlowBlock], flows: dict[str, MonitoredFlow]) -> None:
        self.journal.append(
            self._entry(
                Kind.FLOW,
                b.flow,
                b.block,
                pb.MeasurementRecord(
                    flow_block=records.flow_block(b, flows[b.flow], self.period_ns)
                ),
            )
            for b in blocks
            if b.flow in flows
        )

    # ---- reads -------------------------------------------------------------------------------

    def loss(
        self, session: str, since_block: int, limit: int = DEFAULT_LIMIT
    ) -> tuple[list[pb.LossRecord], bool]:
        rows, more = self.journal.records(Kind.LOSS, session or None, since_block, limit)
        return [pb.MeasurementRecord.FromString(r).loss for r in rows], more

    def delay(
        self, session: str, since_block: int, limit: int = DEFAULT_LIMIT
    ) -> tuple[list[pb.DelayRecord], bool]:
        rows, more = self.journal.records(Kind.DELAY, session or None, since_block, limit)
        return [pb.MeasurementRecord.FromString(r).delay for r in rows], more

    def liveness(
        self, session: str, since_block: int, limit: int = DEFAULT_LIMIT
    ) -> tuple[list[pb.LivenessEvent], bool]:
        """Liveness changes from `since_block` (the block of each deciding probe) on."""
        rows, more = self.journal.records(Kind.LIVENESS, session or None, since_block, limit)
        return [pb.MeasurementRecord.FromString(r).liveness for r in rows], more

    def intervals(
        self, session: str, since_block: int, limit: int = DEFAULT_LIMIT
    ) -> tuple[list[pb.DelayRecord], bool]:
        """Delay per computation interval, from the intervals of `since_block` on."""
        rows, more = self.journal.records(Kind.INTERVAL, session or None, since_block, limit)
        return [pb.MeasurementRecord.FromString(r).delay for r in rows], more

    def thresholds(
        self, session: str, since_block: int, limit: int = DEFAULT_LIMIT
    ) -> tuple[list[pb.ThresholdEvent], bool]:
        """Threshold events from `since_block` (the block of each event's at_unix_ns) on."""
        rows, more = self.journal.records(Kind.THRESHOLD, session or None, since_block, limit)
        return [pb.MeasurementRecord.FromString(r).threshold for r in rows], more

    @staticmethod
    def probe_records(probes: Iterable[DelayResult]) -> list[pb.ProbeRecord]:
        """Recent probes (in memory) as ReadResults returns them."""
        return [records.probe(p) for p in probes]

    def flow_block(self, flow: str, block: int) -> pb.FlowBlockRecord | None:
        row = self.journal.record_of(Kind.FLOW, flow, block)
        return pb.MeasurementRecord.FromString(row).flow_block if row else None
