"""The Alembic migrations build exactly the tables the models describe, on SQLite and PostgreSQL,
and running them again changes nothing."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from srv6pm.controller.adapters.sql.store import MIGRATIONS, Store, migrate
from srv6pm.controller.adapters.sql.tables import Base


def differences(store: Store) -> list:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


def schema(store: Store) -> dict:
    """Every table's columns, indexes, keys and constraints as the database reports them."""
    found = inspect(store.engine)
    return {
        table: (
            [(c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table)],
            sorted(
                (i["name"], tuple(i["column_names"]), i["unique"]) for i in found.get_indexes(table)
            ),
            found.get_pk_constraint(table)["constrained_columns"],
            sorted(
                (tuple(f["constrained_columns"]), f["referred_table"])
                for f in found.get_foreign_keys(table)
            ),
            sorted(tuple(u["column_names"]) for u in found.get_unique_constraints(table)),
        )
        for table in sorted(found.get_table_names())
    }


def test_the_migrated_schema_equals_the_models(database_url):
    store = Store(database_url)
    try:
        assert differences(store) == []
        assert set(inspect(store.engine).get_table_names()) == {
            *Base.metadata.tables,
            "alembic_version",
        }
    finally:
        store.close()


def test_migrating_again_is_a_no_op(database_url):
    store = Store(database_url)
    try:
        with store.engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO api_tokens (name, scope, sha256, created_at) "
                    "VALUES ('t', 'read', 'x', CURRENT_TIMESTAMP)"
                )
            )
        before = schema(store)
        migrate(store.engine)
        migrate(store.engine)
        assert schema(store) == before
        with store.engine.connect() as connection:
            head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
            assert connection.execute(text("SELECT version_num FROM alembic_version")).all() == [
                (head,)
            ]
            assert connection.execute(text("SELECT name FROM api_tokens")).all() == [("t",)]
    finally:
        store.close()
    again = Store(database_url)  # a restarted controller
    try:
        assert schema(again) == before
        assert differences(again) == []
    finally:
        again.close()
