"""The SQL store: engine, migrations, transactions, and rows as domain values.

SQLite (a file, the default) or PostgreSQL (by URL). SQLite runs in WAL mode with
synchronous=FULL: a change the API acknowledged is on disk, and the reconciler reads while the API
writes.
"""

from __future__ import annotations

import dataclasses
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

from ...domain.model import (
    DelayThresholds,
    Fleet,
    LivenessSettings,
    LocalSid,
    Measurement,
    Node,
    NodeInfo,
    Policy,
    Probed,
    Profile,
    SegmentList,
)
from ...domain.model import Session as MeasurementSession
from .tables import (
    AuditRow,
    LocalSidRow,
    NodeRow,
    PolicyRow,
    ProfileRow,
    SegmentListRow,
    SessionRow,
    SessionSsidRow,
)

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
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # SQLite alters a table by copying it and dropping the old one; with foreign keys on,
            # that drop would cascade to (or be refused by) the rows that refer to it. The pragma
            # only takes effect outside a transaction.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                if sqlite and connection.exec_driver_sql("PRAGMA foreign_key_check").first():
                    raise RuntimeError("the migration left rows referring to missing ones")
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


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
        segment_lists=tuple(
            SegmentList(tuple(sl.segments), sl.name, sl.weight, sl.flow_mon_id)
            for sl in row.segment_lists
        ),
        prefix=row.prefix,
        encap_mode=EncapMode(row.encap_mode),
        device=row.device,
        table=row.table,
        protection=row.protection,
    )


def segments_key(segments: Iterable[str]) -> str:
    return ",".join(segments)


def write_policy(row: PolicyRow, policy: Policy) -> None:
    """Set a policy row's columns and segment lists; a segment list kept by name is updated in
    place (its FlowMonID stays unique at every step)."""
    for column in ("head_node", "tail_node", "prefix", "device", "table", "protection"):
        setattr(row, column, getattr(policy, column))
    row.encap_mode = policy.encap_mode.value
    held = {sl.name: sl for sl in row.segment_lists}
    rows = []
    for position, sl in enumerate(policy.segment_lists):
        found = held.get(sl.name) or SegmentListRow(name=sl.name)
        found.position = position
        found.segments = list(sl.segments)
        found.segments_key = segments_key(sl.segments)
        found.weight = sl.weight
        found.flow_mon_id = sl.flow_mon_id
        rows.append(found)
    row.segment_lists = rows


def liveness_of(value: dict[str, Any]) -> LivenessSettings:
    return LivenessSettings(**value)


def thresholds_of(value: dict[str, Any]) -> DelayThresholds:
    return DelayThresholds(**{**value, "metrics": tuple(value.get("metrics", ()))})


def measurement_of(row: ProfileRow) -> Measurement:
    return Measurement(
        delay_interval_ms=row.delay_interval_ms,
        liveness=liveness_of(row.liveness),
        histogram_edges_us=tuple(row.histogram_edges_us),
        burst_size=row.burst_size,
        computation_interval_ms=row.computation_interval_ms,
        thresholds=thresholds_of(row.thresholds),
        loss=row.loss,
    )


def profile_of(row: ProfileRow) -> Profile:
    return Profile(name=row.name, measurement=measurement_of(row))


def write_profile(row: ProfileRow, profile: Profile) -> None:
    m = profile.measurement
    row.delay_interval_ms = m.delay_interval_ms
    row.liveness = dataclasses.asdict(m.liveness)
    row.histogram_edges_us = list(m.histogram_edges_us)
    row.burst_size = m.burst_size
    row.computation_interval_ms = m.computation_interval_ms
    row.thresholds = _thresholds_json(m.thresholds)
    row.loss = m.loss


def _thresholds_json(t: DelayThresholds) -> dict[str, Any]:
    return {**dataclasses.asdict(t), "metrics": list(t.metrics)}


def session_of(row: SessionRow) -> MeasurementSession:
    return MeasurementSession(
        name=row.name,
        policy=row.policy,
        return_policy=row.return_policy,
        segment_list=row.segment_list,
        return_segment_list=row.return_segment_list,
        profile=row.profile or "",
        delay_interval_ms=row.delay_interval_ms,
        liveness=None if row.liveness is None else liveness_of(row.liveness),
        histogram_edges_us=None
        if row.histogram_edges_us is None
        else tuple(row.histogram_edges_us),
        hmac_key=row.hmac_key,
        ssids=tuple(Probed(p.segment_list, p.ssid) for p in row.ssids),
        burst_size=row.burst_size,
        computation_interval_ms=row.computation_interval_ms,
        thresholds=None if row.thresholds is None else thresholds_of(row.thresholds),
        loss=row.loss,
    )


def write_session(row: SessionRow, session: MeasurementSession) -> None:
    """Set a session row's columns and SSIDs; an SSID kept by segment list stays its row."""
    for column in (
        "policy",
        "return_policy",
        "segment_list",
        "return_segment_list",
        "delay_interval_ms",
        "hmac_key",
        "burst_size",
        "computation_interval_ms",
        "loss",
    ):
        setattr(row, column, getattr(session, column))
    row.profile = session.profile or None
    held_thresholds = session.thresholds
    row.thresholds = None if held_thresholds is None else _thresholds_json(held_thresholds)
    row.liveness = None if session.liveness is None else dataclasses.asdict(session.liveness)
    edges = session.histogram_edges_us
    row.histogram_edges_us = None if edges is None else list(edges)
    held = {p.segment_list: p for p in row.ssids}
    rows = []
    for probed in session.ssids:
        found = held.get(probed.segment_list) or SessionSsidRow(segment_list=probed.segment_list)
        found.ssid = probed.ssid
        rows.append(found)
    row.ssids = rows


def fleet(
    db: Session,
    marking_mode: MarkingMode,
    nodes: Iterable[NodeRow] | None = None,
    sids: Iterable[LocalSidRow] | None = None,
    policies: Iterable[PolicyRow] | None = None,
    sessions: Iterable[SessionRow] | None = None,
    profiles: Iterable[ProfileRow] | None = None,
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
        profiles={
            p.name: profile_of(p)
            for p in (db.scalars(select(ProfileRow)) if profiles is None else profiles)
        },
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
