"""The real Kafka broker, InfluxDB and PostgreSQL servers that tests, the demo and benchmarks run
against (srv6pm.lab.servers; Kafka and InfluxDB installed by `make servers`, PostgreSQL by
`make deps`): they serve, and keep their data across a graceful stop and a crash."""

from __future__ import annotations

import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource
from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS
from srv6pm.lab.servers import InfluxServer, KafkaServer, PostgresServer, ServerError, free_port

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


@pytest.fixture
def postgres_dirs() -> Iterator[list[Path]]:
    """Two empty directories the postgres user can reach (as root, PostgresServer runs it as
    that user, and pytest's tmp_path lies under a 0700 directory of root's)."""
    dirs = [Path(tempfile.mkdtemp(prefix="srv6pm-test-postgres-")) for _ in range(2)]
    yield dirs
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def postgres(postgres_dirs: list[Path]) -> Iterator[PostgresServer]:
    with PostgresServer(postgres_dirs[0], port=free_port()) as server:
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


def process_state(pid: int) -> str | None:
    """A process's state letter (R, S, Z, ...), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2]


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is pid."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            children.append(int(entry.name))
    return children


def gone(pid: int) -> bool:
    return process_state(pid) in (None, "Z")


def test_postgres_runs_sql_in_a_database_it_creates_and_keeps_it_across_a_restart(
    postgres: PostgresServer,
) -> None:
    postgres.create_database("srv6pm")
    postgres.create_database("srv6pm")  # existing: fine
    assert (
        postgres.url("srv6pm") == f"postgresql+psycopg://postgres@127.0.0.1:{postgres.port}/srv6pm"
    )

    with postgres.connect("srv6pm") as conn:
        conn.execute("CREATE TABLE flows (id integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO flows VALUES (1, 'r1-r3'), (2, 'r3-r1 é')")
        rows = conn.execute("SELECT id, name FROM flows ORDER BY id").fetchall()
        assert rows == [(1, "r1-r3"), (2, "r3-r1 é")]
        settings = conn.execute(
            "SELECT current_database(), current_user, current_setting('server_encoding'), "
            "current_setting('listen_addresses'), current_setting('data_directory')"
        ).fetchone()
        assert settings == ("srv6pm", "postgres", "UTF8", "127.0.0.1", str(postgres.data_dir))

    pid = postgres.pid
    assert pid is not None
    postgres.stop()
    assert not postgres.running
    assert gone(pid)
    # A clean shutdown: PostgreSQL removed its lock file and socket.
    assert not (postgres.data_dir / "postmaster.pid").exists()
    assert list(postgres.socket_dir.iterdir()) == []
    with pytest.raises(psycopg.OperationalError):
        postgres.connect("srv6pm").close()

    postgres.start()
    with postgres.connect("srv6pm") as conn:
        assert conn.execute("SELECT id, name FROM flows ORDER BY id").fetchall() == rows


def test_postgres_url_is_one_sqlalchemy_connects_with(postgres: PostgresServer) -> None:
    postgres.create_database("controller")
    engine = sqlalchemy.create_engine(postgres.url("controller"))
    try:
        with engine.connect() as conn:
            row = conn.execute(sqlalchemy.text("SELECT current_database(), current_user")).one()
            assert tuple(row) == ("controller", "postgres")
    finally:
        engine.dispose()


def test_postgres_kill_leaves_no_process_behind_and_recovers_its_data(
    postgres: PostgresServer,
) -> None:
    postgres.create_database("srv6pm")
    with postgres.connect("srv6pm") as conn:
        conn.execute("CREATE TABLE blocks (k bigint PRIMARY KEY)")
        conn.execute("INSERT INTO blocks SELECT generate_series(1, 1000)")

    client = postgres.connect("srv6pm")  # a backend process serving it
    postmaster = postgres.pid
    assert postmaster is not None
    children = child_pids(postmaster)
    assert len(children) >= 5  # checkpointer, writers, launchers and the client's backend

    postgres.kill()
    assert not postgres.running
    assert process_state(postmaster) is None  # reaped, the PID is gone
    assert [pid for pid in children if not gone(pid)] == []
    with pytest.raises(psycopg.OperationalError):
        client.execute("SELECT 1")
    client.close()

    postgres.start()  # crash recovery on the same data
    with postgres.connect("srv6pm") as conn:
        assert conn.execute("SELECT count(*), sum(k) FROM blocks").fetchone() == (1000, 500500)


def test_two_postgres_servers_run_at_once_each_on_its_own_port_and_data(
    postgres_dirs: list[Path],
) -> None:
    with (
        PostgresServer(postgres_dirs[0]) as a,
        PostgresServer(postgres_dirs[1]) as b,
    ):
        assert a.port != b.port
        assert a.pid != b.pid
        a.create_database("only_in_a")
        for server, value in ((a, "a"), (b, "b")):
            with server.connect() as conn:
                conn.execute("CREATE TABLE owner (name text)")
                conn.execute("INSERT INTO owner VALUES (%s)", (value,))
        for server, value in ((a, "a"), (b, "b")):
            with server.connect() as conn:
                assert conn.execute("SELECT name FROM owner").fetchall() == [(value,)]
                databases = conn.execute("SELECT datname FROM pg_database").fetchall()
                assert (("only_in_a",) in databases) == (server is a)
        b.stop()
        with a.connect() as conn:  # one stopping leaves the other serving
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_postgres_that_cannot_bind_says_why(postgres_dirs: list[Path]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = PostgresServer(postgres_dirs[0], port=taken.getsockname()[1])
        with pytest.raises(ServerError, match=r"(?s)exited with code.*Address already in use"):
            server.start()
        assert not server.running


@pytest.mark.root  # as root, PostgreSQL runs as the postgres user
def test_postgres_in_a_workdir_its_user_cannot_reach_names_the_directory(
    postgres_dirs: list[Path],
) -> None:
    closed = postgres_dirs[0]  # mkdtemp's: root's, mode 0700
    server = PostgresServer(closed / "postgres")
    with pytest.raises(
        ServerError, match=rf"cannot reach .*: {re.escape(str(closed))} is drwx------"
    ):
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
