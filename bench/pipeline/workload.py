"""Records like a node's: per node, STAMP sessions (a loss and a delay record per block each)
and monitored flows (a flow-block record per block each), labelled as the node manager labels
them; and the same points as line protocol (what Telegraf is given)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypedDict, Unpack

from srv6pm.collector.domain import points
from srv6pm.common.srv6 import Role
from srv6pm.node_manager.adapters import records
from srv6pm.node_manager.domain.blocks import FlowBlock
from srv6pm.node_manager.domain.model import MonitoredFlow, SenderSession
from srv6pm.proto.v1 import records_pb2 as pb
from srv6pm.twamp.results import DelayBlock, DelayStats, DirectionLoss, LossResult

from bench.pipeline.common import (
    PERIOD_NS,
)


class RecordKind(TypedDict, total=False):
    """The one kind a MeasurementRecord carries."""

    loss: pb.LossRecord
    delay: pb.DelayRecord
    flow_block: pb.FlowBlockRecord


@dataclass(frozen=True)
class Mix:
    """What the nodes measure: per node, `sessions` STAMP sessions (a loss and a delay record per
    block each) and `flows` monitored flows (a flow-block record per block each)."""

    nodes: int
    sessions: int
    flows: int

    @property
    def records_per_block(self) -> int:
        return self.nodes * (2 * self.sessions + self.flows)


@dataclass(frozen=True)
class Sample:
    """Where the first point of one record lands: enough to ask InfluxDB whether it is there."""

    measurement: str
    tags: tuple[tuple[str, str], ...]
    time_ns: int

    def statement(self) -> str:
        where = " AND ".join(f"\"{k}\"='{v}'" for k, v in self.tags)
        return (
            f'SELECT count("block") FROM "{self.measurement}" '
            f"WHERE {where} AND time = {self.time_ns}"
        )


@dataclass
class Generated:
    record: pb.MeasurementRecord
    key: str
    sample: Sample


class Node:
    """One node's sessions and flows, labelled as the node manager labels them."""

    ROLES = (Role.INGRESS, Role.TRANSIT, Role.EGRESS)

    def __init__(self, index: int, mix: Mix, seed: int) -> None:
        self.name = f"r{index + 1:02d}"
        self.rng = random.Random(seed * 1000 + index)
        self.journal_id = 0
        peer = f"r{(index + 1) % mix.nodes + 1:02d}"
        self.sessions = [
            SenderSession(
                name=f"sess-{j:03d}",
                ssid=j + 1,
                reflector_address=f"fc00:0:{index + 2:x}:{j:x}::1",
                forward_flow=f"flow-{2 * j:03d}",
                reverse_flow=f"flow-{2 * j + 1:03d}",
                direct_segments=(f"fc00:0:{index + 2:x}::e", f"fc00:0:{index + 3:x}::d6"),
                return_segments=(f"fc00:0:{index + 1:x}::d6",),
                policy=f"policy-{self.name}-{j:03d}",
                reflector_node=peer,
            )
            for j in range(mix.sessions)
        ]
        self.labels = [records.labels(s) for s in self.sessions]
        role = self.ROLES[index % 3]
        self.flows = [
            MonitoredFlow(
                name=f"flow-{k:03d}",
                segments=(f"fc00:0:{k % 250 + 2:x}::e", f"fc00:0:{k % 250 + 3:x}::d6"),
                role=role,
                interfaces=("eth1",),
                flowmon_id=k + 1,
            )
            for k in range(mix.flows)
        ]

    def _wrap(self, **kind: Unpack[RecordKind]) -> pb.MeasurementRecord:
        self.journal_id += 1
        return pb.MeasurementRecord(
            node=self.name, created_unix_ns=time.time_ns(), journal_id=self.journal_id, **kind
        )

    def _stats(self, base_ns: int) -> DelayStats:
        d = sorted(base_ns + self.rng.randrange(0, 400_000) for _ in range(10))
        return DelayStats(10, d[0], d[4], d[8], d[9], d[9], sum(d) // 10, 35_000)

    def block(self, block: int) -> Iterator[Generated]:
        """This node's records of one block, in the order a node journals them: flow counts at
        the block snapshot, then each session's loss and delay."""
        start = block * PERIOD_NS
        for flow in self.flows:
            packets = self.rng.randrange(80_000, 120_000)
            fb = FlowBlock(flow.name, block, packets, packets * 700)
            record = self._wrap(flow_block=records.flow_block(fb, flow, PERIOD_NS))
            role = records.ROLE_TO_PB[flow.role]
            flow_tags = (("node", self.name), ("flow", flow.name), ("role", points.ROLES[role]))
            yield Generated(record, f"{self.name}/{flow.name}", Sample("flow", flow_tags, start))
        for spec, labels in zip(self.sessions, self.labels, strict=True):
            key = f"{self.name}/{spec.name}"
            tags = (("src_node", self.name), ("session", spec.name))
            if self.rng.random() < 0.01:  # now and then a block the node could not read
                loss = LossResult(spec.name, block, None, None, False, "no counters for block")
            else:
                tx = self.rng.randrange(9_000, 11_000)
                fwd = DirectionLoss(tx, tx - self.rng.choice((0, 0, 0, 1, 5)))
                rev = DirectionLoss(tx, tx - self.rng.choice((0, 0, 0, 2)))
                loss = LossResult(spec.name, block, fwd, rev, True)
            record = self._wrap(loss=records.loss(loss, labels, PERIOD_NS))
            yield Generated(record, key, Sample("loss", (*tags, ("direction", "forward")), start))
            two_way = self._stats(200_000)
            delay = DelayBlock(
                spec.name, block, 10, 0, two_way, self._stats(90_000), self._stats(90_000)
            )
            record = self._wrap(delay=records.delay(delay, labels, PERIOD_NS))
            yield Generated(record, key, Sample("delay", (*tags, ("direction", "two_way")), start))


def generate(mix: Mix, first_block: int, seed: int) -> Iterator[Generated]:
    """Records block after block, every node's for each block (what the nodes publish)."""
    nodes = [Node(i, mix, seed) for i in range(mix.nodes)]
    block = first_block
    while True:
        for node in nodes:
            yield from node.block(block)
        block += 1


@dataclass
class Workload:
    """Pre-built Kafka messages: the records (for our collector) and the same points as line
    protocol, one message per record (for Telegraf)."""

    keys: list[bytes]
    values: list[bytes]
    lines: list[bytes]
    expected: dict[str, int]  # points per measurement
    blocks: int

    @property
    def points(self) -> int:
        return sum(self.expected.values())


def build_workload(n: int, mix: Mix, seed: int) -> Workload:
    blocks = math.ceil(n / mix.records_per_block)
    # Blocks in the recent past, well inside the 30-day retention.
    first = time.time_ns() // PERIOD_NS - blocks - 10
    keys: list[bytes] = []
    values: list[bytes] = []
    lines: list[bytes] = []
    expected = {"loss": 0, "delay": 0, "flow": 0}
    for g in generate(mix, first, seed):
        if len(values) == n:
            break
        record_lines = points.lines(g.record)  # also checks each record converts
        expected[g.sample.measurement] += len(record_lines)
        keys.append(g.key.encode())
        values.append(g.record.SerializeToString())
        lines.append("\n".join(record_lines).encode())
    return Workload(keys, values, lines, expected, blocks)
