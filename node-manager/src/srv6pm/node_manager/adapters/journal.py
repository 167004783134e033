"""The node's journal of measurement records: SQLite in WAL mode, fsync'd at every commit.

Why SQLite: a record must be on disk before anything else sees it, and then be read back three
ways (by session and block for ReadResults, in order of arrival for Kafka, by age for retention)
and marked delivered. SQLite does all of it transactionally, survives kill -9 and power loss
(WAL, synchronous=FULL), ships with Python, and its file can be inspected with `sqlite3`. An
append-only segment log would need its own index, delivery marks and compaction.

One writer thread owns every write and commits in groups (everything queued since its last
commit, one fsync): producers (the STAMP loop, the snapshot thread) never wait for the disk, and a
slow or full disk never blocks them: the queue is bounded, and what does not fit is counted and
dropped, before anyone was told it exists. Readers use their own connections and see committed
records only.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: it is the record's journal_id
  kind INTEGER NOT NULL,
  key TEXT NOT NULL,                     -- session or flow name
  block INTEGER NOT NULL,
  created_ns INTEGER NOT NULL,
  record BLOB NOT NULL,                  -- a serialized srv6pm.v1.MeasurementRecord
  delivered INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS records_by_key ON records (kind, key, block);
CREATE INDEX IF NOT EXISTS records_undelivered ON records (id) WHERE delivered = 0;
"""
RETRY_S = 1.0
HOUSEKEEPING_S = 30.0
BATCH = 5000  # entries per commit at most: a commit stays well under a second


class Kind(enum.IntEnum):
    LOSS = 1
    DELAY = 2
    FLOW = 3
    PROBE = 4
    LIVENESS = 5  # block: the block of the deciding probe's T1
    INTERVAL = 6  # delay per computation interval; block: the one the interval lies in
    THRESHOLD = 7  # block: the block of the event's at_unix_ns


@dataclass(frozen=True)
class Entry:
    kind: Kind
    key: str
    block: int
    created_ns: int
    record: bytes


@dataclass
class JournalStats:
    appended: int = 0  # committed to disk
    dropped: int = 0  # refused: the write queue was full (disk too slow or failing)
    write_errors: int = 0  # failed commits (retried)
    expired: int = 0  # removed by retention (age or size)
    expired_undelivered: int = 0  # ... of which never reached Kafka


class Journal:
    def __init__(
        self,
        path: Path,
        retention_s: float,
        max_bytes: int,
        queue_size: int = 200_000,
    ) -> None:
        self._path = path
        self._retention_ns = int(retention_s * 1e9)
        self._max_bytes = max_bytes
        self._queue: queue.Queue[Entry | list[int] | None] = queue.Queue(queue_size)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self.stats = JournalStats()
        self._committed = threading.Condition()
        self._closing = threading.Event()
        self._enqueued = 0  # entries and marks handed to the writer
        self._done = 0  # of which committed (or given up)
        with self._connect() as db:
            db.executescript(SCHEMA)
        self._thread = threading.Thread(target=self._write_loop, name="journal", daemon=True)
        self._thread.start()

    def _connect(self) -> sqlite3.Connection:
        # closed by close() from another thread; each is used by one thread only
        db = sqlite3.connect(self._path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # the WAL is fsync'd at every commit
        return db

    @property
    def _reader(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._connect()
            self._readers.append(db)
        return db

    # ---- writes ------------------------------------------------------------------------------

    def append(self, entries: Iterable[Entry]) -> None:
        """Queue records for the next commit; never blocks (a full queue drops and counts)."""
        for entry in entries:
            self._put(entry)

    def mark_delivered(self, ids: list[int]) -> None:
        """Kafka acknowledged these records (durable only once committed: a crash re-sends)."""
        if ids:
            self._put(ids)

    def _put(self, item: Entry | list[int]) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.stats.dropped += 1
            if self.stats.dropped in (1, 10, 100) or self.stats.dropped % 10_000 == 0:
                log.error("journal queue full: %d records dropped so far", self.stats.dropped)
            return
        with self._committed:
            self._enqueued += 1

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far is committed."""
        with self._committed:
            target = self._enqueued
            return self._committed.wait_for(lambda: self._done >= target, timeout)

    def _write_loop(self) -> None:
        db = self._connect()
        next_housekeeping = time.monotonic() + HOUSEKEEPING_S
        while True:
            batch = self._next_batch()
            stop = None in batch
            items = [b for b in batch if b is not None]
            while items and not self._commit(db, items):
                if self._closing.is_set():
                    log.error("journal closed: %d records could not be written", len(items))
                    break
                time.sleep(RETRY_S)
            with self._committed:
                self._done += len(items)
                self._committed.notify_all()
            if stop or (self._closing.is_set() and self._queue.empty()):
                db.close()
                return
            if time.monotonic() >= next_housekeeping:
                next_housekeeping = time.monotonic() + HOUSEKEEPING_S
                self._expire(db)

    def _next_batch(self) -> list[Entry | list[int] | None]:
        """Everything queued (up to BATCH), waiting for the first; [] after a quiet while."""
        try:
            batch = [self._queue.get(timeout=HOUSEKEEPING_S)]
        except queue.Empty:
            return []
        while len(batch) < BATCH:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _commit(self, db: sqlite3.Connection, items: list[Entry | list[int]]) -> bool:
        entries = [i for i in items if isinstance(i, Entry)]
        delivered = [(n,) for i in items if isinstance(i, list) for n in i]
        try:
            with _transaction(db):
                db.executemany(
                    "INSERT INTO records (kind, key, block, created_ns, record) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(int(e.kind), e.key, e.block, e.created_ns, e.record) for e in entries],
                )
                db.executemany("UPDATE records SET delivered = 1 WHERE id = ?", delivered)
        except sqlite3.Error as e:
            self.stats.write_errors += 1
            log.error("journal commit of %d records failed (retrying): %s", len(entries), e)
            return False
        self.stats.appended += len(entries)
        return True

    def _expire(self, db: sqlite3.Connection) -> None:
        """Retention: records older than the retention, then the oldest while over the size."""
        try:
            cutoff = time.time_ns() - self._retention_ns
            row = db.execute(
                "SELECT id FROM records WHERE created_ns >= ? ORDER BY id LIMIT 1", (cutoff,)
            ).fetchone()
            last = db.execute("SELECT max(id) FROM records").fetchone()[0] or 0
            self._delete_below(db, row[0] if row else last + 1, "older than the retention")
            while self._size(db) > self._max_bytes:
                count = db.execute("SELECT count(*) FROM records").fetchone()[0]
                if not count:
                    break
                first = db.execute("SELECT min(id) FROM records").fetchone()[0]
                self._delete_below(db, first + max(1, count // 10), "over the journal's size")
        except sqlite3.Error as e:
            log.error("journal retention failed: %s", e)

    def _delete_below(self, db: sqlite3.Connection, below_id: int, why: str) -> None:
        with _transaction(db):
            total, undelivered = db.execute(
                "SELECT count(*), coalesce(sum(delivered = 0), 0) FROM records WHERE id < ?",
                (below_id,),
            ).fetchone()
            if not total:
                return
            db.execute("DELETE FROM records WHERE id < ?", (below_id,))
        self.stats.expired += total
        self.stats.expired_undelivered += undelivered
        log.warning(
            "journal: removed %d records %s (%d never reached Kafka)", total, why, undelivered
        )

    @staticmethod
    def _size(db: sqlite3.Connection) -> int:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        size: int = (pages - free) * db.execute("PRAGMA page_size").fetchone()[0]
        return size

    def close(self) -> None:
        """Commit what is queued and stop; a disk that keeps failing is not waited for."""
        self._closing.set()
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=RETRY_S)
        self._thread.join(timeout=30)
        for db in self._readers:
            db.close()

    # ---- reads (committed records only) ------------------------------------------------------

    def records(
        self, kind: Kind, key: str | None, since_block: int, limit: int
    ) -> tuple[list[bytes], bool]:
        """Newest `limit` records of a kind (one key or all) from `since_block` on, in block
        order; and whether more matched."""
        where = "kind = ? AND block >= ?" + (" AND key = ?" if key is not None else "")
        args: tuple[object, ...] = (int(kind), since_block) + ((key,) if key is not None else ())
        rows = self._reader.execute(
            f"SELECT record FROM records WHERE {where} ORDER BY block DESC, id DESC LIMIT ?",  # noqa: S608
            (*args, limit + 1),
        ).fetchall()
        return [r[0] for r in reversed(rows[:limit])], len(rows) > limit

    def record_of(self, kind: Kind, key: str, block: int) -> bytes | None:
        """The newest record of one key and block."""
        row = self._reader.execute(
            "SELECT record FROM records WHERE kind = ? AND key = ? AND block = ? "
            "ORDER BY id DESC LIMIT 1",
            (int(kind), key, block),
        ).fetchone()
        return row[0] if row else None

    def last_block(self, kind: Kind, key: str) -> int | None:
        row = self._reader.execute(
            "SELECT max(block) FROM records WHERE kind = ? AND key = ?", (int(kind), key)
        ).fetchone()
        return row[0] if row else None

    def last_blocks(self, kind: Kind) -> dict[str, int]:
        rows = self._reader.execute(
            "SELECT key, max(block) FROM records WHERE kind = ? GROUP BY key", (int(kind),)
        ).fetchall()
        return {r[0]: r[1] for r in rows}

    def undelivered(self, after_id: int, limit: int) -> list[tuple[int, str, bytes]]:
        """Records Kafka has not acknowledged, oldest first: (journal id, key, record)."""
        rows = self._reader.execute(
            "SELECT id, key, record FROM records WHERE delivered = 0 AND id > ? ORDER BY id "
            "LIMIT ?",
            (after_id, limit),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def depth(self) -> int:
        """Records waiting for Kafka."""
        row = self._reader.execute("SELECT count(*) FROM records WHERE delivered = 0").fetchone()
        return int(row[0])


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
