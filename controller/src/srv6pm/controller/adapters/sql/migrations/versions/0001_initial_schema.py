"""initial schema

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
        sa.UniqueConstraint("sha256"),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=8), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_log_kind"), ["kind"], unique=False)

    op.create_table(
        "nodes",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=300), nullable=False),
        sa.Column("probe_address", sa.String(length=45), nullable=False),
        sa.Column("core_interfaces", sa.JSON(), nullable=False),
        sa.Column("boundary_interfaces", sa.JSON(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("info", sa.JSON(), nullable=True),
        sa.Column("reachable", sa.Boolean(), nullable=True),
        sa.Column("applied_revision", sa.Integer(), nullable=False),
        sa.Column("apply_error", sa.Text(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "local_sids",
        sa.Column("sid", sa.String(length=45), nullable=False),
        sa.Column("node", sa.String(length=64), nullable=False),
        sa.Column("behaviour", sa.String(length=16), nullable=False),
        sa.Column("nexthop", sa.String(length=45), nullable=False),
        sa.Column("lookup_table", sa.Integer(), nullable=False),
        sa.Column("device", sa.String(length=15), nullable=False),
        sa.Column("table", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node"],
            ["nodes.name"],
        ),
        sa.PrimaryKeyConstraint("sid"),
    )
    with op.batch_alter_table("local_sids", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_local_sids_node"), ["node"], unique=False)

    op.create_table(
        "policies",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("head_node", sa.String(length=64), nullable=False),
        sa.Column("tail_node", sa.String(length=64), nullable=False),
        sa.Column("segments", sa.JSON(), nullable=False),
        sa.Column("segments_key", sa.String(length=800), nullable=False),
        sa.Column("prefix", sa.String(length=50), nullable=False),
        sa.Column("encap_mode", sa.String(length=16), nullable=False),
        sa.Column("device", sa.String(length=15), nullable=False),
        sa.Column("table", sa.Integer(), nullable=False),
        sa.Column("flow_mon_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["head_node"],
            ["nodes.name"],
        ),
        sa.ForeignKeyConstraint(
            ["tail_node"],
            ["nodes.name"],
        ),
        sa.PrimaryKeyConstraint("name"),
        sa.UniqueConstraint("flow_mon_id"),
    )
    with op.batch_alter_table("policies", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_policies_head_node"), ["head_node"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_policies_segments_key"), ["segments_key"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_policies_tail_node"), ["tail_node"], unique=False)

    op.create_table(
        "sessions",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("policy", sa.String(length=64), nullable=False),
        sa.Column("return_policy", sa.String(length=64), nullable=False),
        sa.Column("delay_interval_ms", sa.Integer(), nullable=False),
        sa.Column("hmac_key", sa.LargeBinary(), nullable=False),
        sa.Column("ssid", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["policy"],
            ["policies.name"],
        ),
        sa.ForeignKeyConstraint(
            ["return_policy"],
            ["policies.name"],
        ),
        sa.PrimaryKeyConstraint("name"),
        sa.UniqueConstraint("policy"),
        sa.UniqueConstraint("ssid"),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_sessions_return_policy"), ["return_policy"], unique=False
        )

    op.create_table(
        "thresholds",
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("loss_ratio_max", sa.Double(), nullable=True),
        sa.Column("delay_p99_max_ms", sa.Double(), nullable=True),
        sa.Column("invalid_blocks_max", sa.Integer(), nullable=True),
        sa.Column("window_blocks", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["session"], ["sessions.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session"),
    )


def downgrade() -> None:
    op.drop_table("thresholds")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_return_policy"))

    op.drop_table("sessions")
    with op.batch_alter_table("policies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_policies_tail_node"))
        batch_op.drop_index(batch_op.f("ix_policies_segments_key"))
        batch_op.drop_index(batch_op.f("ix_policies_head_node"))

    op.drop_table("policies")
    with op.batch_alter_table("local_sids", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_local_sids_node"))

    op.drop_table("local_sids")
    op.drop_table("nodes")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_kind"))
        batch_op.drop_index(batch_op.f("ix_audit_log_at"))

    op.drop_table("audit_log")
    op.drop_table("api_tokens")
