"""segment lists, SSIDs per segment list, measurement profiles

A policy's SID list and FlowMonID move to its first segment list (named sl0), a session's SSID
to the segment list it probes (sl0); sessions may share a policy (each on its own segment lists).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"

FIRST = "sl0"  # the name a policy's only segment list gets


def _drop_unique(table: str, column: str) -> None:
    """0001's unique constraints have no name: PostgreSQL's is <table>_<column>_key; SQLite's is
    found by a naming convention while the table is copied."""
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(f"{table}_{column}_key", table, type_="unique")
        return
    convention = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
    with op.batch_alter_table(table, naming_convention=convention) as batch_op:
        batch_op.drop_constraint(f"uq_{table}_{column}", type_="unique")


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("delay_interval_ms", sa.Integer(), nullable=False),
        sa.Column("liveness", sa.JSON(), nullable=False),
        sa.Column("histogram_edges_us", sa.JSON(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "segment_lists",
        sa.Column("policy", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("segments", sa.JSON(), nullable=False),
        sa.Column("segments_key", sa.String(length=800), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("flow_mon_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["policy"], ["policies.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("policy", "name"),
        sa.UniqueConstraint("flow_mon_id"),
    )
    with op.batch_alter_table("segment_lists", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_segment_lists_segments_key"), ["segments_key"], unique=False
        )
    op.create_table(
        "session_ssids",
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("segment_list", sa.String(length=64), nullable=False),
        sa.Column("ssid", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["session"], ["sessions.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session", "segment_list"),
        sa.UniqueConstraint("ssid"),
    )
    op.execute(
        sa.text(
            "INSERT INTO segment_lists (policy, name, position, segments, segments_key, weight, "
            "flow_mon_id) SELECT name, :first, 0, segments, segments_key, 1, flow_mon_id "
            "FROM policies"
        ).bindparams(first=FIRST)
    )
    op.execute(
        sa.text(
            "INSERT INTO session_ssids (session, segment_list, ssid) "
            "SELECT name, :first, ssid FROM sessions"
        ).bindparams(first=FIRST)
    )

    _drop_unique("policies", "flow_mon_id")
    with op.batch_alter_table("policies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_policies_segments_key"))
        batch_op.drop_column("segments_key")
        batch_op.drop_column("segments")
        batch_op.drop_column("flow_mon_id")
        batch_op.add_column(
            sa.Column("protection", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("policies", schema=None) as batch_op:
        batch_op.alter_column("protection", server_default=None)

    _drop_unique("sessions", "policy")
    _drop_unique("sessions", "ssid")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("ssid")
        batch_op.add_column(
            sa.Column("segment_list", sa.String(length=64), nullable=False, server_default="")
        )
        batch_op.add_column(
            sa.Column(
                "return_segment_list", sa.String(length=64), nullable=False, server_default=""
            )
        )
        batch_op.add_column(sa.Column("profile", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("liveness", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("histogram_edges_us", sa.JSON(), nullable=True))
        batch_op.alter_column("delay_interval_ms", existing_type=sa.Integer(), nullable=True)
        batch_op.create_foreign_key(
            batch_op.f("fk_sessions_profile_profiles"), "profiles", ["profile"], ["name"]
        )
        batch_op.create_index(batch_op.f("ix_sessions_policy"), ["policy"], unique=False)
        batch_op.create_index(batch_op.f("ix_sessions_profile"), ["profile"], unique=False)
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.alter_column("segment_list", server_default=None)
        batch_op.alter_column("return_segment_list", server_default=None)


def downgrade() -> None:
    raise NotImplementedError(
        "policies with several segment lists and sessions sharing a policy have no 0001 form"
    )
