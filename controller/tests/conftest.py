"""Fixtures of the controller's tests, real servers only: the desired state in a SQLite file or a
PostgreSQL server (every API test runs on both), results in InfluxDB. The services are built as
the controller builds them (server.build, no reconciler: no node is contacted) and the app is
driven through FastAPI's TestClient. Everything started is stopped and removed, also on failure.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_fleet import INFLUX_DATABASE, Api, closed_port
from fastapi.testclient import TestClient
from psycopg import sql
from srv6pm.controller.adapters.sql.store import Store
from srv6pm.controller.api.app import create_app
from srv6pm.controller.api.deps import Services
from srv6pm.controller.config import Settings
from srv6pm.controller.server import build
from srv6pm.lab.servers import InfluxServer, PostgresServer, free_port


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server per test session. Its workdir comes from mkdtemp: as root the server
    runs as the postgres user, who cannot enter pytest's 0700 tmp_path."""
    workdir = Path(tempfile.mkdtemp(prefix="srv6pm-controller-postgres-"))
    try:
        with PostgresServer(workdir, port=free_port()) as server:
            yield server
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a SQLite file in the test's directory, or a fresh PostgreSQL database
    (dropped after the test)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'controller.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = f"controller_{uuid.uuid4().hex[:12]}"
    server.create_database(name)
    yield server.url(name)
    with server.connect() as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def influx_url() -> str:
    """Where the results are read from: by default a closed port (results answer 503); the
    results tests override it with a real InfluxDB."""
    return f"http://127.0.0.1:{closed_port()}"


@pytest.fixture
def built(database_url: str, influx_url: str) -> Iterator[tuple[Services, Store]]:
    services, store, influx = build(
        Settings(database_url=database_url, influx_url=influx_url), reconcile=False
    )
    yield services, store
    influx.close()
    store.close()


@pytest.fixture
def services(built: tuple[Services, Store]) -> Services:
    return built[0]


@pytest.fixture
def store(built: tuple[Services, Store]) -> Store:
    return built[1]


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


@pytest.fixture
def admin(client: TestClient, services: Services) -> Api:
    """An admin token's client (token name: alice)."""
    return Api(client, services.auth.create("alice", "admin", "test"))


@pytest.fixture
def reader(client: TestClient, services: Services) -> Api:
    """A read-only token's client (token name: bob)."""
    return Api(client, services.auth.create("bob", "read", "test"))


@pytest.fixture
def anonymous(client: TestClient) -> Api:
    return Api(client, None)


@pytest.fixture(scope="session")
def influx_server() -> Iterator[InfluxServer]:
    """One InfluxDB per test session, database srv6pm (each test writes its own sessions)."""
    workdir = Path(tempfile.mkdtemp(prefix="srv6pm-controller-influxdb-"))
    try:
        with InfluxServer(workdir / "influxdb") as server:
            server.create_database(INFLUX_DATABASE)
            yield server
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
