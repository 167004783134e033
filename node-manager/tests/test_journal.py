"""The node's journal: committed before visible, kept across restarts, bounded by retention."""

from __future__ import annotations

import time

import pytest
from srv6pm.node_manager.adapters.journal import Entry, Journal, Kind
from srv6pm.node_manager.adapters.records import with_journal_id
from srv6pm.proto.v1 import records_pb2 as pb


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.db", retention_s=3600, max_bytes=1 << 30)
    yield j
    j.close()


def entry(key="s1", block=1, kind=Kind.LOSS, created_ns=None, size=10) -> Entry:
    return Entry(kind, key, block, created_ns or time.time_ns(), bytes(size))


def test_records_are_read_back_in_block_order_once_committed(journal):
    journal.append([entry(block=b) for b in (3, 1, 2)] + [entry(key="s2", block=9)])
    assert journal.flush()
    rows, more = journal.records(Kind.LOSS, "s1", since_block=2, limit=10)
    assert len(rows) == 2 and not more
    assert journal.last_block(Kind.LOSS, "s1") == 3
    assert journal.last_blocks(Kind.LOSS) == {"s1": 3, "s2": 9}
    rows, more = journal.records(Kind.LOSS, None, since_block=0, limit=3)
    assert len(rows) == 3 and more


def test_a_reopened_journal_keeps_records_and_what_was_delivered(tmp_path):
    path = tmp_path / "journal.db"
    first = Journal(path, 3600, 1 << 30)
    first.append([entry(block=b) for b in range(5)])
    first.flush()
    ids = [i for i, _, _ in first.undelivered(0, 100)]
    first.mark_delivered(ids[:2])
    first.flush()
    first.close()
    again = Journal(path, 3600, 1 << 30)
    try:
        assert [i for i, _, _ in again.undelivered(0, 100)] == ids[2:]
        assert again.depth() == 3
        assert again.last_block(Kind.LOSS, "s1") == 4
    finally:
        again.close()


def test_retention_removes_old_records_and_counts_the_undelivered(tmp_path):
    j = Journal(tmp_path / "journal.db", retention_s=60, max_bytes=1 << 30)
    try:
        old = time.time_ns() - 120 * 10**9
        j.append([entry(block=1, created_ns=old), entry(block=2, created_ns=old), entry(block=3)])
        j.flush()
        j.mark_delivered([j.undelivered(0, 1)[0][0]])
        j.flush()
        j._expire(j._connect())
        assert (j.stats.expired, j.stats.expired_undelivered) == (2, 1)
        assert j.last_blocks(Kind.LOSS) == {"s1": 3}
    finally:
        j.close()


def test_the_size_bound_removes_the_oldest_records_first(tmp_path):
    j = Journal(tmp_path / "journal.db", retention_s=3600, max_bytes=2 << 20)
    try:
        j.append([entry(block=b, size=4096) for b in range(2000)])  # ~8 MB
        j.flush()
        j._expire(j._connect())
        rows, _ = j.records(Kind.LOSS, "s1", 0, 10_000)
        assert 0 < len(rows) < 2000 and j.stats.expired == 2000 - len(rows)
        assert j.last_block(Kind.LOSS, "s1") == 1999  # the newest stay
    finally:
        j.close()


def test_a_full_queue_drops_and_counts_instead_of_blocking(tmp_path):
    j = Journal(tmp_path / "journal.db", 3600, 1 << 30, queue_size=10)
    try:
        j.append(entry(block=b) for b in range(10_000))
        j.flush()
        assert j.stats.dropped > 0  # a blocking append would have waited instead of dropping
        assert j.stats.appended + j.stats.dropped == 10_000
    finally:
        j.close()


def test_the_journal_id_appended_to_a_stored_record_is_read_as_its_field():
    record = pb.MeasurementRecord(node="r1", created_unix_ns=5, loss=pb.LossRecord(block=3))
    for journal_id in (1, 127, 128, 300, 2**40):
        parsed = pb.MeasurementRecord.FromString(
            with_journal_id(record.SerializeToString(), journal_id)
        )
        assert parsed.journal_id == journal_id and parsed.loss.block == 3
