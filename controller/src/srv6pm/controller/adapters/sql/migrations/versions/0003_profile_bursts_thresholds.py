"""bursts, computation intervals, delay thresholds and delay-only measurement in profiles and
sessions

A profile gets the defaults (one probe per burst, per block only, no thresholds, loss measured);
a session gets none of its own (null: its profile's), so existing rows derive the same senders.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"

NO_THRESHOLDS = {
    "percent": 0.0,
    "absolute_us": 0,
    "check_each_burst": False,
    "min_report_interval_ms": 0,
    "metrics": [],
}


def upgrade() -> None:
    with op.batch_alter_table("profiles", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("burst_size", sa.Integer(), nullable=False, server_default="1")
        )
        batch_op.add_column(
            sa.Column("computation_interval_ms", sa.Integer(), nullable=False, server_default="0")
        )
        # JSON has no portable literal default: filled below, then made NOT NULL
        batch_op.add_column(sa.Column("thresholds", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("loss", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.execute(
        sa.text("UPDATE profiles SET thresholds = :none").bindparams(
            sa.bindparam("none", NO_THRESHOLDS, type_=sa.JSON())
        )
    )
    with op.batch_alter_table("profiles", schema=None) as batch_op:
        batch_op.alter_column("thresholds", existing_type=sa.JSON(), nullable=False)
        batch_op.alter_column("burst_size", server_default=None)
        batch_op.alter_column("computation_interval_ms", server_default=None)
        batch_op.alter_column("loss", server_default=None)

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("burst_size", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("computation_interval_ms", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("thresholds", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("loss", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        for column in ("loss", "thresholds", "computation_interval_ms", "burst_size"):
            batch_op.drop_column(column)
    with op.batch_alter_table("profiles", schema=None) as batch_op:
        for column in ("loss", "thresholds", "computation_interval_ms", "burst_size"):
            batch_op.drop_column(column)
