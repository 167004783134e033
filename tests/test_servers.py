"""The real Kafka broker and InfluxDB server that tests, the demo and benchmarks run against
(srv6pm.lab.servers, installed by `make servers`): they serve, and keep their data across a
graceful stop and a crash."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource
from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS
from srv6pm.lab.servers import InfluxServer, KafkaServer, ServerError, free_port

pytestmark = pytest.mark.slow

TOPIC = "records"
GROUP = "collector"


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KafkaServer]:
    with KafkaServer(tmp_path / "kafka", port=free_port()) as server:
        yield server


@pytest.fixture
def influx(tmp_path: Path) -> Iterator[InfluxServer]:
    with InfluxServer(tmp_path / "influxdb", port=free_port()) as server:
        yield server


def consumer(kafka: KafkaServer) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def consume(c: Consumer, n: int, timeout: float = 60) -> list[Message]:
    """Exactly n records, then nothing more for 2 s."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    assert len(got) == n
    assert c.poll(2.0) is None
    return got


def test_kafka_serves_and_keeps_topics_and_offsets_across_a_restart(kafka: KafkaServer) -> None:
    kafka.create_topic(TOPIC, partitions=3, retention_ms=3_600_000)
    kafka.create_topic(TOPIC, partitions=3, retention_ms=3_600_000)  # existing: fine

    admin = kafka.admin()
    assert len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"

    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(TOPIC, key=f"k{i}", value=f"v{i}", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert errors == []

    c = consumer(kafka)
    c.subscribe([TOPIC])
    records = consume(c, 100)
    assert sorted(m.value() for m in records) == sorted(f"v{i}".encode() for i in range(100))
    assert all(m.value() == b"v" + m.key()[1:] for m in records)
    per_partition = {p: sum(m.partition() == p for m in records) for p in range(3)}
    assert sum(per_partition.values()) == 100
    c.commit(asynchronous=False)
    c.close()

    kafka.stop()
    assert not kafka.running
    kafka.start()

    assert len(kafka.admin().list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) == 3
    c = consumer(kafka)
    partitions = [TopicPartition(TOPIC, p) for p in range(3)]
    committed = c.committed(partitions, timeout=30)
    assert {tp.partition: tp.offset for tp in committed} == per_partition
    for p, count in per_partition.items():
        assert c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10) == (0, count)

    # The group resumes where it committed: only a record produced after the restart comes.
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    producer.produce(TOPIC, key="k100", value="after-restart")
    assert producer.flush(30) == 0
    c.subscribe([TOPIC])
    (again,) = consume(c, 1)
    assert (again.key(), again.value()) == (b"k100", b"after-restart")
    c.close()


def test_influxdb_serves_v2_writes_and_keeps_points_after_a_crash(influx: InfluxServer) -> None:
    influx.create_database("srv6pm", "autogen", "7d")
    assert influx.query("SHOW RETENTION POLICIES", "srv6pm") == [
        {
            "columns": ["name", "duration", "shardGroupDuration", "replicaN", "default"],
            "values": [["autogen", "168h0m0s", "24h0m0s", 1, True]],
        }
    ]

    t0 = time.time_ns() // 10**9 * 10**9  # inside the 7-day retention policy
    points = [
        Point("delay").tag("flow", f"f{i}").field("one_way_ns", 1000 * i).time(t0 + i, "ns")
        for i in (1, 2, 3)
    ]
    with InfluxDBClient(url=influx.url, token="", org="-") as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            bucket="srv6pm", record=points, write_precision=WritePrecision.NS
        )

    expected = [
        {
            "name": "delay",
            "columns": ["time", "flow", "one_way_ns"],
            "values": [[t0 + i, f"f{i}", 1000 * i] for i in (1, 2, 3)],
        }
    ]
    select = 'SELECT "flow", "one_way_ns" FROM "delay" ORDER BY time'
    assert influx.query(select, "srv6pm", epoch="ns") == expected

    influx.kill()
    assert not influx.running
    influx.start()
    assert influx.query(select, "srv6pm", epoch="ns") == expected


def test_influxdb_that_cannot_bind_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = InfluxServer(tmp_path / "influxdb", port=taken.getsockname()[1])
        with pytest.raises(ServerError, match="address already in use"):
            server.start()
        assert not server.running


def test_missing_install_names_make_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SRV6PM_CACHE", str(tmp_path / "empty-cache"))
    for server in (KafkaServer(tmp_path / "kafka"), InfluxServer(tmp_path / "influxdb")):
        with pytest.raises(ServerError, match="make servers"):
            server.start()
        assert not server.running
