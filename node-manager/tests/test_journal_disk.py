"""A full disk under the journal: appends never block, nothing unwritten is ever visible, and
what waited in memory is written once there is room again."""

from __future__ import annotations

import subprocess
import time

import pytest
from srv6pm.node_manager.adapters.journal import Entry, Journal, Kind

pytestmark = pytest.mark.root


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_neither_blocks_appends_nor_loses_what_waits(small_disk):
    journal = Journal(small_disk / "journal.db", 3600, 1 << 30)
    try:
        journal.append(Entry(Kind.LOSS, "s1", b, time.time_ns(), bytes(1024)) for b in range(2000))
        assert not journal.flush(timeout=3)  # 2 MB do not fit in 256 kB
        assert journal.stats.write_errors >= 1
        committed = journal.stats.appended
        rows, _ = journal.records(Kind.LOSS, "s1", 0, 10_000)
        assert len(rows) == committed < 2000  # only what is on disk is ever visible

        subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
        assert journal.flush(timeout=30)
        rows, _ = journal.records(Kind.LOSS, "s1", 0, 10_000)
        assert len(rows) == journal.stats.appended == 2000
        assert journal.stats.dropped == 0
    finally:
        journal.close()
