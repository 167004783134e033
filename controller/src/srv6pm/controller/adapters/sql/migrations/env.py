"""Alembic environment: migrations run on the connection the store hands over (online only)."""

from __future__ import annotations

from alembic import context
from srv6pm.controller.adapters.sql.tables import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=True,  # SQLite alters tables by copy
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
