"""The SQL store: engine, migrations, transactions, and rows as domain values.

SQLite (a file, the default) or PostgreSQL (by URL). SQLite runs in WAL mode with
synchronous=FULL: a change the API acknowledged is on disk, and the reconciler reads while the API
writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode

from ...domain.model import Fleet, LocalSid, Node, NodeInfo, Policy
from ...domain.model import Session as MeasurementSession
from .tables import AuditRow, LocalSidRow, NodeRow, PolicyRow, SessionRow

MIGRATIONS = Path(__file__).parent / "migrations"


def engine_for(url: str) -> Engine:
    """An engine for `url`; a SQLite file's folder is created."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=10)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi: Any, _record: Any) -> None:
        cursor = dbapi.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return engine


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (a no-op when it is there)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


class Store:
    def __init__(self, url: str) -> None:
        self.engine = engine_for(url)
        migrate(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # One writer at a time in this process: identifiers are allocated as max + 1 (the unique
        # constraints still catch a second controller writing to the same PostgreSQL).
        self.write_lock = threading.Lock()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self.write_lock, self._sessions() as session, session.begin():
            yield session

    def close(self) -> None:
        self.engine.dispose()


# ---- rows as domain values ----------------------------------------------------------------------


def node_of(row: NodeRow) -> Node:
    return Node(
        name=row.name,
        endpoint=row.endpoint,
        probe_address=row.probe_address,
        core_interfaces=tuple(row.core_interfaces),
        boundary_interfaces=tuple(row.boundary_interfaces),
        info=info_of(row.info) if row.info else None,
    )


def info_of(info: dict[str, Any]) -> NodeInfo:
    return NodeInfo(
        driver=info["driver"],
        version=info["version"],
        period_ns=info["period_ns"],
        interfaces=tuple(info["interfaces"]),
        behaviours=tuple(info.get("behaviours", ())),
        encap_modes=tuple(info.get("encap_modes", ())),
        max_flows=info.get("max_flows", 0),
        max_segments=info.get("max_segments", 0),
        warnings=tuple(info.get("warnings", ())),
    )


def sid_of(row: LocalSidRow) -> LocalSid:
    return LocalSid(
        sid=row.sid,
        node=row.node,
        behaviour=Behaviour(row.behaviour),
        nexthop=row.nexthop,
        lookup_table=row.lookup_table,
        device=row.device,
        table=row.table,
    )


def policy_of(row: PolicyRow) -> Policy:
    return Policy(
        name=row.name,
        head_node=row.head_node,
        tail_node=row.tail_node,
        segments=tuple(row.segments),
        prefix=row.prefix,
        encap_mode=EncapMode(row.encap_mode),
        device=row.device,
        table=row.table,
        flow_mon_id=row.flow_mon_id,
    )


def session_of(row: SessionRow) -> MeasurementSession:
    return MeasurementSession(
        name=row.name,
        policy=row.policy,
        return_policy=row.return_policy,
        delay_interval_ms=row.delay_interval_ms,
        hmac_key=row.hmac_key,
        ssid=row.ssid,
    )


def fleet(
    db: Session,
    marking_mode: MarkingMode,
    nodes: Iterable[NodeRow] | None = None,
    sids: Iterable[LocalSidRow] | None = None,
    policies: Iterable[PolicyRow] | None = None,
    sessions: Iterable[SessionRow] | None = None,
) -> Fleet:
    """The whole domain (rows not given are all read), or the part of it given."""
    return Fleet(
        nodes={
            n.name: node_of(n) for n in (db.scalars(select(NodeRow)) if nodes is None else nodes)
        },
        sids={
            s.sid: sid_of(s) for s in (db.scalars(select(LocalSidRow)) if sids is None else sids)
        },
        policies={
            p.name: policy_of(p)
            for p in (db.scalars(select(PolicyRow)) if policies is None else policies)
        },
        sessions={
            s.name: session_of(s)
            for s in (db.scalars(select(SessionRow)) if sessions is None else sessions)
        },
        marking_mode=marking_mode,
    )


def audit(
    db: Session,
    actor: str,
    action: str,
    kind: str,
    name: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> int:
    """Record a change; its id is the change's revision (monotonic)."""
    row = AuditRow(
        at=datetime.now(UTC),
        actor=actor,
        action=action,
        kind=kind,
        name=name,
        before=before,
        after=after,
    )
    db.add(row)
    db.flush()
    return row.id


def revision(db: Session) -> int:
    """The newest change's revision (0: none yet)."""
    return db.scalar(select(func.max(AuditRow.id))) or 0
