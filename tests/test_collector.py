"""The collector against a real Kafka broker and a real InfluxDB, without a lab: collectors in
one group share the partitions and write every record once; a record whose points InfluxDB
refuses goes to the dead-letter topic and the others go through."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer
from influxdb_client.client.influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from srv6pm.lab.pipeline import DATABASE, DLQ_TOPIC, TOPIC, ResultsPipeline
from srv6pm.lab.servers import CollectorProcess
from srv6pm.proto.v1 import records_pb2 as pb

pytestmark = pytest.mark.slow
PERIOD = 10_000_000_000
BASE = time.time_ns() // PERIOD - 100  # recent: InfluxDB refuses points beyond its retention


def flow_record(node: str, flow: str, block: int, packets: int) -> bytes:
    return pb.MeasurementRecord(
        node=node,
        flow_block=pb.FlowBlockRecord(
            flow=flow,
            block=block,
            packets=packets,
            bytes=packets * 100,
            valid=True,
            role=pb.ROLE_TRANSIT,
            block_info=pb.Block(index=block, start_unix_ns=block * PERIOD, period_ns=PERIOD),
        ),
    ).SerializeToString()


@pytest.fixture
def pipeline(tmp_path):
    with ResultsPipeline(tmp_path, {"batch_size": "500"}) as running:
        yield running


def produce(pipeline, records: list[tuple[str, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap, "linger.ms": 50})
    for key, value in records:
        producer.produce(TOPIC, key=key, value=value)
    assert producer.flush(30) == 0


def count_points(pipeline) -> int:
    series = pipeline.query('SELECT count("packets") FROM flow')
    return series[0]["values"][0][1] if series else 0


def wait_count(pipeline, expected: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while (n := count_points(pipeline)) < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    return n


def test_collectors_in_one_group_share_the_partitions_and_write_every_record_once(
    pipeline, tmp_path
):
    second = CollectorProcess(tmp_path / "second", pipeline.collector.settings)
    with second:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = [
                json.loads(c.get("/healthz")[1])["partitions"] for c in (pipeline.collector, second)
            ]
            if all(parts) and sum(len(p) for p in parts) == 3:
                break
            time.sleep(0.5)
        assert sorted(parts[0] + parts[1]) == [0, 1, 2] and all(parts), parts
        records = [
            (f"r{n}/f{f}", flow_record(f"r{n}", f"f{f}", BASE + b, n * 1000 + f * 10 + b))
            for n in range(4)
            for f in range(25)
            for b in range(20)
        ]
        produce(pipeline, records + records)  # everything twice: a re-send after a crash
        assert wait_count(pipeline, len(records)) == len(records)
        time.sleep(2)
        assert count_points(pipeline) == len(records)  # the duplicates overwrote, added nothing
    value = pipeline.query(
        f"SELECT packets FROM flow WHERE node = 'r3' AND flow = 'f7' AND block = {BASE + 5}"
    )
    assert value[0]["values"][0][1] == 3075


def test_a_record_influxdb_refuses_goes_to_the_dead_letter_topic_alone(pipeline):
    # `packets` already holds a string in the shard (a day) of the refused record's block:
    # InfluxDB refuses an integer there; the other records are in today's shard
    day_before = BASE - 24 * 3600 * 10**9 // PERIOD
    with InfluxDBClient(url=pipeline.influx.url, token="", org="-") as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            DATABASE, record=f'flow,flow=f1,node=r1,role=transit packets="x" {day_before * PERIOD}'
        )
    good = [(f"r1/f{f}", flow_record("r1", f"f{f}", BASE, 10 + f)) for f in range(2, 6)]
    refused = ("r1/f1", flow_record("r1", "f1", day_before, 5))
    produce(pipeline, [*good[:2], refused, *good[2:]])
    assert wait_count(pipeline, len(good)) == len(good)

    consumer = Consumer(
        {
            "bootstrap.servers": pipeline.kafka.bootstrap,
            "group.id": "dlq-reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([DLQ_TOPIC])
    deadline = time.monotonic() + 30
    letter = None
    while letter is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            letter = message
    consumer.close()
    assert letter is not None and letter.value() == refused[1]
    reason = dict(letter.headers())["srv6pm.reason"].decode()
    assert "InfluxDB refused its points" in reason and "conflict" in reason
