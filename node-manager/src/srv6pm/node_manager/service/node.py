"""The node's use cases over a data plane driver: converge to a desired state, read counters,
read blocks. Applies are serialised by one lock, reads by another (block_reads.py); a background
thread (periodic.py) snapshots counters once per block."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ..domain import validation
from ..domain.blocks import BlockClock
from ..domain.model import REPLY_MARKS, ApplyResult, MonitoredFlow, NodeState, SrPolicy
from ..drivers.base import (
    Capabilities,
    DataPlaneDriver,
    FlowCounters,
    PacketStats,
    counter_epoch,
    kernel_reflector,
    namespaced_sockets,
    probe_endpoints,
)
from . import desired
from .block_reads import BlockReading, BlockReads
from .desired import DEFAULT_STEERING_MARK_BASE
from .kernel_reflection import KernelReflectorFeed
from .periodic import ClockSync, Periodic
from .protection import Protection
from .results import ResultsService
from .snapshots import SnapshotStore
from .stamp import StampPlan, StampService

log = logging.getLogger(__name__)
T = TypeVar("T")


class NodeService:
    def __init__(
        self,
        driver: DataPlaneDriver,
        results: ResultsService,
        state_dir: Path,
        period_ns: int,
        guard_ns: int,
        history_blocks: int = 32,
        clock: Callable[[], int] = time.time_ns,
        clock_synchronised: Callable[[], bool] = lambda: False,
        steering_mark_base: int = DEFAULT_STEERING_MARK_BASE,
    ) -> None:
        self._driver = driver
        self._mark_base = steering_mark_base
        self.results = results
        self._clock = clock
        self.blocks = BlockClock(period_ns)
        self.guard_ns = guard_ns
        # Applying a large state can take longer than half a block; snapshots must not wait
        # for it, so reads have a lock of their own.
        self._apply_lock = threading.Lock()
        self._names_file = state_dir / "names.json"
        snapshots = SnapshotStore(state_dir / "snapshots.json", history_blocks)
        self.reads = BlockReads(driver, results, snapshots, self.blocks, guard_ns, clock)
        self.clock_sync = ClockSync(clock_synchronised, self._apply_lock)
        self._kernel = KernelReflectorFeed(
            kernel_reflector(driver), period_ns, steering_mark_base + REPLY_MARKS
        )
        self.protection = Protection(driver, self._apply_lock)
        sockets = namespaced_sockets(driver)
        self.stamp = StampService(
            sockets.in_netns if sockets else _here,
            self.reads,
            results,
            period_ns,
            self.clock_sync.synced,
            self._kernel.next_sequence(),
            steering_mark_base,
            liveness_listener=self.protection.liveness_changed,
            probe_endpoints=probe_endpoints(driver),
            data_plane_reflects=self._kernel.answers_all,
        )
        self.clock_sync.follow(self.stamp.set_clock_synchronised)
        self.clock_sync.follow(self._kernel.set_clock_synchronised)
        self.periodic = Periodic(
            self.reads,
            self._kernel,
            self.clock_sync,
            self.blocks,
            guard_ns,
            clock,
            lambda: counter_epoch(driver),
        )

    @property
    def capabilities(self) -> Capabilities:
        return self._driver.capabilities()

    def interfaces(self) -> frozenset[str]:
        return self._driver.interfaces()

    def kernel_reflector_stats(self) -> Mapping[str, int]:
        """What the in-kernel reflector did ({} without one)."""
        return self._kernel.stats()

    def flows(self) -> list[MonitoredFlow]:
        return self._driver.flows()

    # ---- desired state -----------------------------------------------------------------------

    def apply(self, state: NodeState, dry_run: bool = False) -> ApplyResult:
        state = validation.node_state(state, self.blocks.period_ns)
        with self._apply_lock:
            desired.check_preconditions(
                state, self._driver.capabilities(), self._driver.interfaces()
            )
            routes = desired.probe_routes(state, self._mark_base)
            held = self._driver.marking()
            routed = replace(state, policies=self.protection.routed(state.policies, state.sessions))
            diff = desired.diff(
                routed,
                self._driver.policies(),
                self._driver.local_sids(),
                self._driver.flows(),
                held,
                routes,
                self._driver.probe_routes(),
            )
            stamp = self.stamp.prepare(state.reflector, state.sessions, dry_run)
            result = ApplyResult(
                *diff.changes,
                state.marking != held,
                stamp.changes,
                stamp.reflector_changed,
            )
            if dry_run:
                return result
            try:
                self._change(state, stamp, diff)
            except BaseException:
                self.stamp.discard(stamp)
                raise
            log.info(
                "applied state policies=%s local_sids=%s flows=%s",
                result.policies,
                result.local_sids,
                result.flows,
            )
            return result

    def _change(self, state: NodeState, stamp: StampPlan, diff: desired.Diff) -> None:
        """Converge, once nothing can be refused any more (validated, sockets bound)."""
        if diff.flow_del:
            with self.reads.lock:
                self._driver.update_flows([], diff.flow_del)
                self.reads.removed(f.name for f in diff.flow_del)
        self._driver.set_marking(state.marking)
        for p in diff.pol_del:
            self._driver.remove_policy(p)
        for s in diff.sid_del:
            self._driver.remove_local_sid(s)
        for s in diff.sid_add:
            self._driver.add_local_sid(s)
        for p in diff.pol_add:
            self._driver.add_policy(p)
        if diff.route_add or diff.route_del:
            self._driver.update_probe_routes(diff.route_add, diff.route_del)
        if diff.flow_add:
            self._driver.update_flows(diff.flow_add, [])
            with self.reads.lock:  # the snapshot thread writes the same store (and its file)
                self.reads.added(f.name for f in diff.flow_add)
        self._sync_local_addresses(desired.local_addresses(state))
        self.stamp.commit(stamp)
        self._kernel.apply(state, self.clock_sync.synced)
        self._save_names(state.policies)

    def _sync_local_addresses(self, wanted: set[str]) -> None:
        have = self._driver.local_addresses()
        for address in have - wanted:
            self._driver.remove_local_address(address)
        for address in wanted - have:
            self._driver.add_local_address(address)

    def _save_names(self, policies: Iterable[SrPolicy]) -> None:
        """What the data plane does not hold: names, segment list names, protection."""
        names = [
            [
                p.prefix,
                p.table,
                p.name,
                {" ".join(sl.segments): sl.name for sl in p.paths()},
                p.protection,
            ]
            for p in policies
        ]
        tmp = self._names_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(names))
        os.replace(tmp, self._names_file)

    def state(self) -> NodeState:
        saved: dict[Hashable, list[Any]] = {}
        if self._names_file.exists():
            saved = {(e[0], e[1]): e[2:] for e in json.loads(self._names_file.read_text())}
        with self._apply_lock:
            policies = tuple(
                _named(p, *saved.get(desired.policy_key(p), [p.prefix]))
                for p in self._driver.policies()
            )
            reflector, sessions = self.stamp.specs()
            return NodeState(
                self._driver.marking(),
                policies,
                tuple(self._driver.local_sids()),
                tuple(self._driver.flows()),
                reflector,
                sessions,
            )

    # ---- counters ----------------------------------------------------------------------------

    def read_counters(self, requested: Iterable[str]) -> tuple[int, dict[str, FlowCounters]]:
        return self.reads.read_counters(requested)

    def read_stats(self) -> PacketStats:
        return self._driver.read_stats()

    def read_block(self, requested: Iterable[str], block: int) -> BlockReading:
        return self.reads.read_block(requested, block)

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.periodic.start()

    def stop(self) -> None:
        self.stamp.stop()
        self.protection.close()
        self.periodic.stop()


def _named(
    p: SrPolicy, name: str, lists: Mapping[str, str] | None = None, protection: bool = False
) -> SrPolicy:
    """A policy read from the data plane with what only the node manager knows of it."""
    lists = lists or {}
    return replace(
        p,
        name=name,
        protection=protection,
        segment_lists=tuple(
            replace(sl, name=lists.get(" ".join(sl.segments), sl.name)) for sl in p.segment_lists
        ),
    )


def _here(fn: Callable[[], T]) -> T:
    """Sockets of a data plane without a namespace of its own: opened where we run."""
    return fn()
