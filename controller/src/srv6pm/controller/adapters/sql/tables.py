"""The controller's SQL schema (SQLAlchemy 2). Alembic migrations (migrations/) create and evolve
it; tests check that they produce exactly these tables, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAME = 64  # resource names: [A-Za-z0-9][A-Za-z0-9._-]{0,63}
ADDRESS = 45  # the longest text form of an IPv6 address


class Base(DeclarativeBase):
    pass


class Revisioned(Base):
    """A desired-state object: `revision` is the audit id of its last change."""

    __abstract__ = True
    revision: Mapped[int] = mapped_column(Integer)


class NodeRow(Revisioned):
    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(300))
    probe_address: Mapped[str] = mapped_column(String(ADDRESS), default="")
    core_interfaces: Mapped[list[str]] = mapped_column(JSON, default=list)
    boundary_interfaces: Mapped[list[str]] = mapped_column(JSON, default=list)
    # What the reconciler last learnt and did (kept here so it survives restarts).
    info: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    reachable: Mapped[bool | None] = mapped_column(default=None)
    applied_revision: Mapped[int] = mapped_column(Integer, default=0)
    apply_error: Mapped[str] = mapped_column(Text, default="")
    applied_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    attempted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)


class LocalSidRow(Revisioned):
    __tablename__ = "local_sids"

    sid: Mapped[str] = mapped_column(String(ADDRESS), primary_key=True)
    node: Mapped[str] = mapped_column(ForeignKey("nodes.name"), index=True)
    behaviour: Mapped[str] = mapped_column(String(16))
    nexthop: Mapped[str] = mapped_column(String(ADDRESS), default="")
    lookup_table: Mapped[int] = mapped_column(Integer, default=0)
    device: Mapped[str] = mapped_column(String(15), default="")
    table: Mapped[int] = mapped_column(Integer, default=0)


class PolicyRow(Revisioned):
    __tablename__ = "policies"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    head_node: Mapped[str] = mapped_column(ForeignKey("nodes.name"), index=True)
    tail_node: Mapped[str] = mapped_column(ForeignKey("nodes.name"), index=True)
    prefix: Mapped[str] = mapped_column(String(50))
    encap_mode: Mapped[str] = mapped_column(String(16))
    device: Mapped[str] = mapped_column(String(15), default="")
    table: Mapped[int] = mapped_column(Integer, default=0)
    protection: Mapped[bool] = mapped_column(default=False)
    segment_lists: Mapped[list[SegmentListRow]] = relationship(
        cascade="all, delete-orphan", order_by="SegmentListRow.position", lazy="selectin"
    )


class SegmentListRow(Base):
    """A policy's segment list: a measured path of its own, with its own FlowMonID."""

    __tablename__ = "segment_lists"

    policy: Mapped[str] = mapped_column(
        ForeignKey("policies.name", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    segments: Mapped[list[str]] = mapped_column(JSON)
    # the SID list as text, indexed: a head-end's flows are told apart by it
    segments_key: Mapped[str] = mapped_column(String(800), index=True)
    weight: Mapped[int] = mapped_column(Integer, default=1)
    flow_mon_id: Mapped[int] = mapped_column(Integer, unique=True)


class ProfileRow(Revisioned):
    """A measurement profile: settings sessions name instead of repeating them."""

    __tablename__ = "profiles"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    delay_interval_ms: Mapped[int] = mapped_column(Integer, default=0)
    liveness: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    histogram_edges_us: Mapped[list[int]] = mapped_column(JSON, default=list)
    burst_size: Mapped[int] = mapped_column(Integer, default=1)
    computation_interval_ms: Mapped[int] = mapped_column(Integer, default=0)
    thresholds: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    loss: Mapped[bool] = mapped_column(default=True)


class SessionRow(Revisioned):
    __tablename__ = "sessions"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    policy: Mapped[str] = mapped_column(ForeignKey("policies.name"), index=True)
    return_policy: Mapped[str] = mapped_column(ForeignKey("policies.name"), index=True)
    segment_list: Mapped[str] = mapped_column(String(NAME), default="")  # "": all of them
    return_segment_list: Mapped[str] = mapped_column(String(NAME), default="")  # "": the first
    profile: Mapped[str | None] = mapped_column(
        ForeignKey("profiles.name"), index=True, default=None
    )
    # explicit settings (null: the profile's)
    delay_interval_ms: Mapped[int | None] = mapped_column(Integer, default=None)
    liveness: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    histogram_edges_us: Mapped[list[int] | None] = mapped_column(JSON, default=None)
    burst_size: Mapped[int | None] = mapped_column(Integer, default=None)
    computation_interval_ms: Mapped[int | None] = mapped_column(Integer, default=None)
    thresholds: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    loss: Mapped[bool | None] = mapped_column(default=None)
    hmac_key: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    ssids: Mapped[list[SessionSsidRow]] = relationship(
        cascade="all, delete-orphan", order_by="SessionSsidRow.ssid", lazy="selectin"
    )


class SessionSsidRow(Base):
    """The SSID of each segment list a session probes, kept by the segment list's name: a
    segment list added to (or removed from) the policy changes no other one's SSID, so the
    node managers keep those senders and their sequence numbers."""

    __tablename__ = "session_ssids"

    session: Mapped[str] = mapped_column(
        ForeignKey("sessions.name", ondelete="CASCADE"), primary_key=True
    )
    segment_list: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    ssid: Mapped[int] = mapped_column(Integer, unique=True)


class ThresholdRow(Revisioned):
    """A session's service-level objective and its evaluated state."""

    __tablename__ = "thresholds"

    session: Mapped[str] = mapped_column(
        ForeignKey("sessions.name", ondelete="CASCADE"), primary_key=True
    )
    loss_ratio_max: Mapped[float | None] = mapped_column(default=None)
    delay_p99_max_ms: Mapped[float | None] = mapped_column(default=None)
    invalid_blocks_max: Mapped[int | None] = mapped_column(Integer, default=None)
    window_blocks: Mapped[int] = mapped_column(Integer, default=6)
    state: Mapped[str] = mapped_column(String(16), default="unknown")
    since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    detail: Mapped[str] = mapped_column(Text, default="")


class TokenRow(Base):
    __tablename__ = "api_tokens"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    scope: Mapped[str] = mapped_column(String(8))  # read | admin
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuditRow(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    actor: Mapped[str] = mapped_column(String(NAME))
    action: Mapped[str] = mapped_column(String(8))  # create | update | delete
    kind: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str] = mapped_column(String(NAME))
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
