"""The node's use cases over a data plane driver: converge to a desired state, read counters,
read blocks. One lock serialises them; a background thread snapshots counters once per block."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from srv6pm.common.srv6 import Behaviour
from srv6pm.twamp.error_estimate import clock_error_estimate
from srv6pm.twamp.sender import MAX_GAP_BLOCKS

from ..domain import validation
from ..domain.blocks import BlockClock, FlowBlock, colour, counter_delta
from ..domain.errors import FailedPrecondition, InvalidArgument, NodeManagerError, NotFound
from ..domain.model import (
    ApplyResult,
    Changes,
    KernelReflection,
    LocalSid,
    MonitoredFlow,
    NodeState,
    SrPolicy,
)
from ..drivers.base import Capabilities, DataPlaneDriver, FlowCounters, PacketStats
from .results import ResultsService
from .snapshots import Count, SnapshotStore
from .stamp import StampPlan, StampService

log = logging.getLogger(__name__)
T = TypeVar("T")
NO_BASELINE = (
    "no baseline: the flow was added in this block, or the node manager was not running in the "
    "block before"
)
NOT_RUNNING = "not measured: the node manager was not running"
Publication = tuple[list[FlowBlock], dict[str, MonitoredFlow]]


@dataclass(frozen=True)
class BlockReading:
    block: int
    colour: int
    counts: dict[str, Count]


def _policy_key(p: SrPolicy) -> Hashable:
    return (p.prefix, p.table)


def _sid_key(s: LocalSid) -> Hashable:
    return (s.sid, s.table)


def _same_policy(want: SrPolicy, have: SrPolicy) -> bool:
    """Equal but for the name; no device asked for means any device will do."""
    return replace(want, name="", device=want.device or have.device) == replace(have, name="")


def _same_sid(want: LocalSid, have: LocalSid) -> bool:
    return replace(want, device=want.device or have.device) == have


def _diff(
    desired: Sequence[T],
    actual: Sequence[T],
    key: Callable[[T], Hashable],
    same: Callable[[T, T], bool],
) -> tuple[list[T], list[T], int]:
    """(to add or replace, to remove, unchanged) to turn `actual` into `desired`."""
    have = {key(a): a for a in actual}
    want = {key(d): d for d in desired}
    add = [d for k, d in want.items() if k not in have or not same(d, have[k])]
    remove = [a for k, a in have.items() if k not in want]
    return add, remove, len(want) - len(add)


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
    ) -> None:
        self._driver = driver
        self.results = results
        self._clock = clock
        self.blocks = BlockClock(period_ns)
        self.guard_ns = guard_ns
        # Applying a large state can take longer than half a block; snapshots must not wait
        # for it, so they have a lock of their own.
        self._apply_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._names_file = state_dir / "names.json"
        self._snapshots = SnapshotStore(state_dir / "snapshots.json", history_blocks)
        self._flow_resume: dict[str, int] | None = None  # next block to journal, per flow
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # asked again once per block: a time daemon may gain or lose its source while we run
        self._clock_synchronised = clock_synchronised
        self._synced = clock_synchronised()
        self.stamp = StampService(
            driver.in_netns,
            self,
            results,
            period_ns,
            self._synced,
            driver.next_reflector_sequence,
        )
        # what the in-kernel reflector was last given; a sentinel, so the first apply sets it
        self._kernel_reflection: KernelReflection | object | None = object()
        self._reflector_block = -1  # the last block whose counts it was given

    @property
    def capabilities(self) -> Capabilities:
        return self._driver.capabilities()

    def interfaces(self) -> frozenset[str]:
        return self._driver.interfaces()

    def kernel_reflector_stats(self) -> Mapping[str, int]:
        return self._driver.kernel_reflector_stats()

    def flows(self) -> list[MonitoredFlow]:
        return self._driver.flows()

    # ---- desired state -----------------------------------------------------------------------

    def apply(self, desired: NodeState, dry_run: bool = False) -> ApplyResult:
        state = validation.node_state(desired)
        with self._apply_lock:
            self._check_preconditions(state)
            state = replace(state, policies=state.policies + self._probe_policies(state))
            pol_add, pol_del, pol_same = _diff(
                state.policies, self._driver.policies(), _policy_key, _same_policy
            )
            sid_add, sid_del, sid_same = _diff(
                state.local_sids, self._driver.local_sids(), _sid_key, _same_sid
            )
            installed = self._driver.flows()
            flow_add, flow_del, flow_same = _diff(
                state.flows, installed, lambda f: f.name, lambda a, b: a == b
            )
            # A changed flow is removed and added again: its counters start from zero. So is
            # every flow when the marking mode changes: the data plane finds them differently.
            held = self._driver.marking()
            if state.marking.mode != held.mode:
                flow_add, flow_del, flow_same = list(state.flows), list(installed), 0
            changed = {a.name for a in flow_add}
            flow_del += [f for f in installed if f.name in changed and f not in flow_del]
            stamp = self.stamp.prepare(state.reflector, state.sessions, dry_run)
            result = ApplyResult(
                Changes(len(pol_add), len(pol_del), pol_same),
                Changes(len(sid_add), len(sid_del), sid_same),
                Changes(len(flow_add), len(flow_del), flow_same),
                state.marking != held,
                stamp.changes,
                stamp.reflector_changed,
            )
            if dry_run:
                return result
            try:
                self._change(state, stamp, pol_add, pol_del, sid_add, sid_del, flow_add, flow_del)
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

    def _change(
        self,
        state: NodeState,
        stamp: StampPlan,
        pol_add: list[SrPolicy],
        pol_del: list[SrPolicy],
        sid_add: list[LocalSid],
        sid_del: list[LocalSid],
        flow_add: list[MonitoredFlow],
        flow_del: list[MonitoredFlow],
    ) -> None:
        """Converge, once nothing can be refused any more (validated, sockets bound)."""
        if flow_del:
            with self._read_lock:
                self._driver.update_flows([], flow_del)
                self._snapshots.forget([f.name for f in flow_del])
                for f in flow_del:  # one added again later starts afresh, with no gap
                    if self._flow_resume is not None:
                        self._flow_resume.pop(f.name, None)
        self._driver.set_marking(state.marking)
        for p in pol_del:
            self._driver.remove_policy(p)
        for s in sid_del:
            self._driver.remove_local_sid(s)
        for s in sid_add:
            self._driver.add_local_sid(s)
        for p in pol_add:
            self._driver.add_policy(p)
        if flow_add:
            self._driver.update_flows(flow_add, [])
            with self._read_lock:  # the snapshot thread writes the same store (and its file)
                self._snapshots.baseline(
                    self.blocks.block(self._clock()), [f.name for f in flow_add]
                )
        self._sync_local_addresses(state)
        self.stamp.commit(stamp)
        reflection = kernel_reflection(state, self._synced, self.blocks.period_ns)
        if reflection != self._kernel_reflection:
            self._driver.set_kernel_reflector(reflection)
            self._kernel_reflection = reflection
        self._save_names(state.policies)

    @staticmethod
    def _probe_policies(state: NodeState) -> tuple[SrPolicy, ...]:
        """STAMP probes share the data's fate: a /128 policy steers each session's probes into
        its direct SID list, and the replies to each declared sender into its return path
        (RFC 9503). Only declared state makes routes: nothing a probe carries does.

        Routes go by destination, so sessions that send to, or reflect for, the same peer
        address share one route: they must agree on its SID list."""
        direct = (
            (f"stamp:{s.name}", s.reflector_address, s.direct_segments)
            for s in state.sessions
            if s.direct_segments
        )
        sessions = state.reflector.sessions if state.reflector.enabled else ()
        back = (
            (f"stamp-return:{r.sender_address}", r.sender_address, r.segments)
            for s in sessions
            for r in s.return_paths
        )
        routes: dict[str, SrPolicy] = {}
        for name, address, segments in (*direct, *back):
            held = routes.setdefault(address, SrPolicy(name, f"{address}/128", segments))
            if held.segments != segments:
                raise InvalidArgument(
                    f"STAMP traffic to {address} would take two SID lists ({held.name}: "
                    f"{', '.join(held.segments)}; {name}: {', '.join(segments)}): probes and "
                    "replies are steered by destination, so they must agree"
                )
        return tuple(routes.values())

    def _sync_local_addresses(self, state: NodeState) -> None:
        """STAMP endpoints' addresses must be deliverable after End.DT6 decapsulation."""
        wanted = {s.source_address for s in state.sessions if s.source_address}
        if state.reflector.enabled and state.reflector.address != "::":
            wanted.add(state.reflector.address)
        have = self._driver.local_addresses()
        for address in have - wanted:
            self._driver.remove_local_address(address)
        for address in wanted - have:
            self._driver.add_local_address(address)

    def block_packets(self, flow: str, block: int) -> int | None:
        """Counters for STAMP's Direct Measurement TLV: None when not readable."""
        try:
            return self.read_block([flow], block).counts[flow][0]
        except NodeManagerError as e:
            log.info("no count of %s for block %d: %s", flow, block, e)
            return None

    def _check_preconditions(self, state: NodeState) -> None:
        caps = self._driver.capabilities()
        interfaces = self._driver.interfaces()
        problems = []
        for p in state.policies:
            if p.mode not in caps.encap_modes:
                problems.append(
                    f"policy {p.name!r}: this kernel does not support {p.mode.value} encapsulation"
                )
            if p.device and p.device not in interfaces:
                problems.append(f"policy {p.name!r}: interface {p.device!r} does not exist")
        for s in state.local_sids:
            if s.behaviour not in caps.behaviours:
                problems.append(
                    f"local SID {s.sid}: this kernel does not support "
                    f"{s.behaviour.value} (supported: "
                    f"{', '.join(sorted(b.value for b in caps.behaviours))})"
                )
            if s.device and s.device not in interfaces:
                problems.append(f"local SID {s.sid}: interface {s.device!r} does not exist")
        missing = sorted(set(state.marking.boundary_interfaces) - interfaces)
        if missing:
            problems.append(f"boundary interface(s) {', '.join(missing)} do not exist")
        for f in state.flows:
            missing = sorted(set(f.interfaces) - interfaces)
            if missing:
                problems.append(f"flow {f.name!r}: interface(s) {', '.join(missing)} do not exist")
        if len(state.flows) > caps.max_flows:
            problems.append(f"{len(state.flows)} flows exceed this node's {caps.max_flows}")
        if problems:
            raise FailedPrecondition("; ".join(problems))

    def _save_names(self, policies: Iterable[SrPolicy]) -> None:
        names = [[p.prefix, p.table, p.name] for p in policies]
        tmp = self._names_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(names))
        os.replace(tmp, self._names_file)

    def state(self) -> NodeState:
        names: dict[Hashable, str] = {}
        if self._names_file.exists():
            names = {(p, t): n for p, t, n in json.loads(self._names_file.read_text())}
        with self._apply_lock:
            policies = tuple(
                replace(p, name=names.get(_policy_key(p), p.prefix))
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
        with self._read_lock:
            names = self._names(requested)
            now = self._clock()
            return now, dict(self._driver.read_counters(names))

    def read_stats(self) -> PacketStats:
        return self._driver.read_stats()

    def read_block(self, requested: Iterable[str], block: int) -> BlockReading:
        with self._read_lock:
            due = self._snapshot_if_due(self._clock())
        self._publish(due)
        with self._read_lock:
            names = self._names(requested)
            now = self._clock()
            current = self.blocks.block(now)
            if block >= current or now < self.blocks.readable_from(block, self.guard_ns):
                raise FailedPrecondition(
                    f"block {block} is not readable yet: its counters are stable from "
                    f"{_iso(self.blocks.readable_from(block, self.guard_ns))} "
                    f"(now {_iso(now)}, block {current})"
                )
            counts = self._counts(names, block)
            return BlockReading(block, colour(block), counts)

    def _from_snapshots(self, name: str, block: int) -> FlowBlock:
        """Block `block` of one flow from snapshots block-1 and block+1 (present)."""
        start = self._snapshots.get(block - 1)
        end = self._snapshots.get(block + 1)
        if start is None or end is None or name not in start.counts or name not in end.counts:
            return FlowBlock(name, block, valid=False, reason=NO_BASELINE)
        width = self._driver.capabilities().counter_width_bits
        (p1, b1), (p0, b0) = end.counts[name], start.counts[name]
        return FlowBlock(name, block, counter_delta(p1, p0, width), counter_delta(b1, b0, width))

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
            record = self.results.flow_block(name, block)
            if record is not None and record.valid:
                counts[name] = (record.packets, record.bytes)
            elif reading is not None:
                missing.append(name)
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

    def _block_records(self, block: int) -> Publication:
        """Every flow's count of `block` (just readable), and "not running" records for the
        blocks a restart missed since the flow's last record (under the read lock; journaled
        after it, by `_publish`: building thousands of records must not hold up reads)."""
        flows = {f.name: f for f in self._driver.flows()}
        if self._flow_resume is None:
            self._flow_resume = {
                name: last + 1 for name, last in self.results.last_flow_blocks().items()
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

    def _publish(self, publication: Publication | None) -> None:
        if publication:
            self.results.flow_blocks(*publication)

    def _snapshot_if_due(self, now: int) -> Publication | None:
        """Read every flow's stable colour once per block, inside the safe window; the flow
        counts of the block that became readable, to publish."""
        current = self.blocks.block(now)
        snap = self._snapshots.get(current)
        if (snap and snap.complete) or now < self.blocks.start(current) + self.guard_ns:
            return None
        stable = colour(current - 1)
        names = [f.name for f in self._driver.flows()]
        read = self._driver.read_counters(names)
        if self.blocks.block(self._clock()) != current:
            log.warning("block %d: counter read ran into the next block; not recorded", current)
            return None
        counts = {n: (c[stable].packets, c[stable].bytes) for n, c in read.items()}
        self._snapshots.record(current, counts)
        return self._block_records(current - 1)

    # ---- snapshot thread ---------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="block-snapshots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stamp.stop()
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        """Snapshot at the middle of every block (RFC 9341's usual safe read point)."""
        while not self._stop.is_set():
            try:
                with self._read_lock:
                    due = self._snapshot_if_due(self._clock())  # the time of the read
                self._publish(due)
                self._publish_reflector_counts()
            except Exception:
                log.exception("block snapshot failed")
            wake = min(self._next_read(), self._next_reflector_counts())
            self._stop.wait(max(0.0, (wake - self._clock()) / 1e9))

    def _next_reflector_counts(self) -> int:
        """When the last closed block's counts are due to the in-kernel reflector: as soon as
        they are stable (the guard), before the senders' loss probes (mid-block) arrive."""
        current = self.blocks.block(self._clock())
        if self._reflector_block < current - 1:
            return self.blocks.readable_from(current - 1, self.guard_ns)
        return self.blocks.readable_from(current, self.guard_ns)

    def _refresh_clock(self) -> None:
        """Follow the clock's synchronisation state: the S bit the senders and the reflectors
        (userspace and kernel) put in their Error Estimates, and whether loss can be valid."""
        synced = self._clock_synchronised()
        if synced == self._synced:
            return
        log.warning("clock %s", "synchronised" if synced else "no longer synchronised")
        with self._apply_lock:  # an apply reads the state too
            self._synced = synced
            self.stamp.set_clock_synchronised(synced)
            reflection = self._kernel_reflection
            if isinstance(reflection, KernelReflection):
                reflection = replace(reflection, error_estimate=clock_error_estimate(synced))
                self._driver.set_kernel_reflector(reflection)
                self._kernel_reflection = reflection

    def _publish_reflector_counts(self) -> None:
        """The in-kernel reflector's Direct Measurement counts: the sessions' flows in the last
        closed block, once stable (a session whose counts are not readable is left to
        userspace, which answers when the kernel cannot)."""
        now = self._clock()
        block = self.blocks.block(now) - 1
        if block <= self._reflector_block or now < self.blocks.readable_from(block, self.guard_ns):
            return
        self._reflector_block = block
        self._refresh_clock()  # once per block
        reflection = self._kernel_reflection
        if not isinstance(reflection, KernelReflection):
            return
        self._driver.refresh_kernel_reflector()  # once per block
        if not reflection.sessions:
            return
        counts = {}
        for ssid, forward, reverse in reflection.sessions:
            rx, tx = self.block_packets(forward, block), self.block_packets(reverse, block)
            if rx is not None and tx is not None:
                counts[ssid] = (rx, tx)
        if counts:
            self._driver.publish_reflector_block(block, counts)

    def _next_read(self) -> int:
        """This block's read point while its snapshot is still to take (a thread that woke
        late, or waited for the lock, must not skip a block), else the next block's."""
        now = self._clock()
        current = self.blocks.block(now)
        offset = max(self.blocks.period_ns // 2, self.guard_ns)
        snap = self._snapshots.get(current)
        if snap is None or not snap.complete:
            return max(now, self.blocks.start(current) + offset)
        return self.blocks.start(current + 1) + offset


def _iso(unix_ns: int) -> str:
    ms = (unix_ns // 1_000_000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_ns / 1e9)) + f".{ms:03d}Z"


MAIN_TABLE = 254


def kernel_reflection(
    state: NodeState, clock_synchronised: bool, period_ns: int
) -> KernelReflection | None:
    """What the in-kernel reflector takes over from the userspace one: unauthenticated probes
    (authenticated ones need the key and the HMAC: userspace), after decapsulation by an End.DT6
    SID that delivers into table main, where the reflector address is local."""
    reflector = state.reflector
    if not reflector.enabled or reflector.hmac_key:
        return None
    decap = tuple(
        s.sid
        for s in state.local_sids
        if s.behaviour == Behaviour.END_DT6 and s.lookup_table in (0, MAIN_TABLE)
    )
    return KernelReflection(
        reflector.address,
        reflector.port,
        reflector.stateful,
        clock_error_estimate(clock_synchronised),
        decap,
        period_ns,
        tuple((s.ssid, s.forward_flow, s.reverse_flow) for s in reflector.sessions),
        tuple(
            (r.sender_address, s.ssid, r.segments)
            for s in reflector.sessions
            for r in s.return_paths
        ),
        reflector.allowed_dscp,
    )
