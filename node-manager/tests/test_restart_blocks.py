"""Blocks journaled before a node manager was killed stay readable after its restart, whatever
snapshots survived on disk (only the last few are kept there)."""

import pytest
from srv6pm.node_manager.adapters.journal import Journal
from srv6pm.node_manager.domain.blocks import colour
from srv6pm.node_manager.domain.errors import FailedPrecondition
from srv6pm.node_manager.domain.model import NodeState
from srv6pm.node_manager.service.node import NodeService
from srv6pm.node_manager.service.results import ResultsService
from test_service import FLOW, Clock, MemoryDriver

S = 1_000_000_000
T = 2 * S  # the lab's period
GUARD = S // 2  # the node manager's default guard
B0 = 1000
STATE = NodeState(flows=(FLOW,))


def sent_in(block: int) -> int:
    return 10 + block - B0  # a different count per block: a wrong pair of snapshots shows


def start(driver, clock, tmp_path):
    journal = Journal(tmp_path / "journal.db", 3600, 1 << 30)
    service = NodeService(
        driver, ResultsService(journal, "n1", T, clock=clock), tmp_path, T, GUARD, clock=clock
    )
    service.apply(STATE)  # what the servicer restores at start
    return service, journal


def test_every_journaled_block_is_readable_after_a_kill_and_restart(tmp_path):
    driver = MemoryDriver()  # its counters outlive the process, as pinned maps do
    clock = Clock(B0 * T - T + S // 10)  # the flow is added early in block b0 - 1
    service, journal = start(driver, clock, tmp_path)
    for block in range(B0 - 1, B0 + 8):
        clock.now = block * T + S // 10
        if block >= B0:
            driver.counts["f"][colour(block)] += sent_in(block)
        clock.now = block * T + T // 2  # the read point: the middle of the block
        service.periodic.tick()
    journal.flush()
    # killed in block b0+7 after its snapshot, back 1.4 s later (nothing saved on the way out)
    service.stamp.stop()
    journal.close()
    clock.now = (B0 + 7) * T + T // 2 + 1_400_000_000
    service, journal = start(driver, clock, tmp_path)
    try:
        driver.counts["f"][colour(B0 + 8)] += sent_in(B0 + 8)
        for block in (B0 + 8, B0 + 9):
            clock.now = block * T + T // 2
            service.periodic.tick()
        journal.flush()
        read = {b: service.read_block([], b).counts["f"][0] for b in range(B0, B0 + 9)}
        assert read == {b: sent_in(b) for b in range(B0, B0 + 9)}
    finally:
        service.stop()
        journal.close()


class RestartingDriver(MemoryDriver):
    """A data plane whose counters start again from zero when it restarts (VPP)."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 1

    def counter_epoch(self) -> int:
        return self.epoch

    def restart(self) -> None:
        self.epoch += 1
        self.counts["f"] = [0, 0]


def test_blocks_spanning_a_data_plane_restart_are_invalid_with_a_reason(tmp_path):
    driver = RestartingDriver()
    clock = Clock(B0 * T - T + S // 10)
    service, journal = start(driver, clock, tmp_path)
    restart_in = B0 + 3
    restarts: list[int] = []  # the server gives the restarted data plane its state again

    def restore() -> bool:  # refused once (the interfaces not back yet), then done
        restarts.append(driver.epoch)
        return len(restarts) > 1

    service.periodic.on_data_plane_restart(restore)
    try:
        for block in range(B0 - 1, B0 + 8):
            clock.now = block * T + S // 10
            if block == restart_in:
                driver.restart()  # early in the block, before its snapshot
            if block >= B0:
                driver.counts["f"][colour(block)] += sent_in(block)
            clock.now = block * T + T // 2
            service.periodic.tick()
        journal.flush()
        assert restarts == [2, 2]
        for block in range(B0, B0 + 7):
            if block in (restart_in - 1, restart_in):  # their snapshots straddle the restart
                with pytest.raises(FailedPrecondition, match="data plane restarted"):
                    service.read_block([], block)
            else:  # restart_in + 1 too: its colour did not count before the restart
                assert service.read_block([], block).counts["f"][0] == sent_in(block), block
    finally:
        service.stop()
        journal.close()
