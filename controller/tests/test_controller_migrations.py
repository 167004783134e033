"""The Alembic migrations build exactly the tables the models describe, on SQLite and PostgreSQL,
running them again changes nothing, and rows written under an older schema read as before
(0001 -> head, 0002 -> head)."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from srv6pm.common.srv6 import MarkingMode
from srv6pm.controller.adapters.sql import store as sql
from srv6pm.controller.adapters.sql.store import MIGRATIONS, Store, engine_for, migrate
from srv6pm.controller.adapters.sql.tables import Base, SessionRow
from srv6pm.controller.domain.derive import node_states
from srv6pm.controller.domain.model import (
    DelayThresholds,
    LivenessSettings,
    Measurement,
    Probed,
    Profile,
    SegmentList,
)


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


def test_rows_of_0001_become_policies_with_one_segment_list_and_sessions_with_one_ssid(
    database_url,
):
    """A controller upgraded in place: its policy keeps its SID list and FlowMonID (segment list
    sl0), its session its SSID; foreign keys still hold (SQLite copies the altered tables)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = engine_for(database_url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        for statement in (
            "INSERT INTO nodes (name, endpoint, probe_address, core_interfaces, "
            "boundary_interfaces, revision, applied_revision, apply_error) VALUES "
            "('r1', 'h:1', 'fcf0::1', '[]', '[]', 1, 0, ''), "
            "('r3', 'h:3', 'fcf0::3', '[]', '[]', 2, 0, '')",
            "INSERT INTO local_sids (sid, node, behaviour, nexthop, lookup_table, device, "
            '"table", revision) VALUES '
            "('fc00:0:3::d6', 'r3', 'End.DT6', '', 0, '', 0, 3), "
            "('fc00:0:1::d6', 'r1', 'End.DT6', '', 0, '', 0, 4)",
            "INSERT INTO policies (name, head_node, tail_node, segments, segments_key, prefix, "
            'encap_mode, device, "table", flow_mon_id, revision) VALUES '
            """('to-h2', 'r1', 'r3', '["fc00:0:3::d6"]', 'fc00:0:3::d6', 'fd00:2::/64', """
            "'encap', '', 0, 7, 5), "
            """('to-h1', 'r3', 'r1', '["fc00:0:1::d6"]', 'fc00:0:1::d6', 'fd00:1::/64', """
            "'encap', '', 0, 8, 6)",
            "INSERT INTO sessions (name, policy, return_policy, delay_interval_ms, hmac_key, "
            "ssid, revision) VALUES ('s1', 'to-h2', 'to-h1', 100, '', 42, 7)",
        ):
            connection.execute(text(statement))
    engine.dispose()
    store = Store(database_url)
    try:
        assert differences(store) == []
        with store.read() as db:
            fleet = sql.fleet(db, MarkingMode.ALTMARK)
        assert fleet.policies["to-h2"].segment_lists == (
            SegmentList(("fc00:0:3::d6",), "sl0", 1, 7),
        )
        assert not fleet.policies["to-h2"].protection
        session = fleet.sessions["s1"]
        assert (session.ssids, session.delay_interval_ms, session.segment_list) == (
            (Probed("sl0", 42),),
            100,
            "",
        )
        # a second session on the same policy is no longer refused by the schema
        with store.write() as db:
            db.add(SessionRow(name="s2", policy="to-h2", return_policy="to-h1", revision=8))
    finally:
        store.close()


def test_profiles_and_sessions_of_0002_measure_as_before_after_0003(database_url):
    """A profile gets the defaults (one probe per burst, per block only, no thresholds, loss); a
    session none of its own, so it keeps following its profile; the fleet derives the same."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = engine_for(database_url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
        for statement in (
            "INSERT INTO nodes (name, endpoint, probe_address, core_interfaces, "
            "boundary_interfaces, revision, applied_revision, apply_error) VALUES "
            "('r1', 'h:1', 'fcf0::1', '[\"eth0\"]', '[]', 1, 0, ''), "
            "('r3', 'h:3', 'fcf0::3', '[\"eth0\"]', '[]', 2, 0, '')",
            "INSERT INTO local_sids (sid, node, behaviour, nexthop, lookup_table, device, "
            '"table", revision) VALUES '
            "('fc00:0:3::d6', 'r3', 'End.DT6', '', 0, '', 0, 3), "
            "('fc00:0:1::d6', 'r1', 'End.DT6', '', 0, '', 0, 4)",
            "INSERT INTO policies (name, head_node, tail_node, prefix, encap_mode, device, "
            '"table", protection, revision) VALUES '
            "('to-h2', 'r1', 'r3', 'fd00:2::/64', 'encap', '', 0, false, 5), "
            "('to-h1', 'r3', 'r1', 'fd00:1::/64', 'encap', '', 0, false, 6)",
            "INSERT INTO segment_lists (policy, name, position, segments, segments_key, weight, "
            "flow_mon_id) VALUES "
            """('to-h2', 'sl0', 0, '["fc00:0:3::d6"]', 'fc00:0:3::d6', 1, 7), """
            """('to-h1', 'sl0', 0, '["fc00:0:1::d6"]', 'fc00:0:1::d6', 1, 8)""",
            "INSERT INTO profiles (name, delay_interval_ms, liveness, histogram_edges_us, "
            "revision) VALUES ('fast', 100, "
            """'{"enabled": true, "down_after": 3, "up_after": 1, "timeout_ms": 0}', """
            "'[100, 1000]', 7)",
            "INSERT INTO sessions (name, policy, return_policy, segment_list, "
            "return_segment_list, profile, delay_interval_ms, hmac_key, revision) VALUES "
            "('s1', 'to-h2', 'to-h1', '', '', 'fast', 200, '', 8)",
            "INSERT INTO session_ssids (session, segment_list, ssid) VALUES ('s1', 'sl0', 42)",
        ):
            connection.execute(text(statement))
    engine.dispose()
    store = Store(database_url)
    try:
        assert differences(store) == []
        with store.read() as db:
            fleet = sql.fleet(db, MarkingMode.ALTMARK)
        assert fleet.profiles["fast"] == Profile(
            "fast", Measurement(100, LivenessSettings(enabled=True), (100, 1000))
        )
        session = fleet.sessions["s1"]
        assert (session.delay_interval_ms, session.ssids) == (200, (Probed("sl0", 42),))
        assert (session.burst_size, session.computation_interval_ms) == (None, None)
        assert (session.thresholds, session.loss) == (None, None)
        (sender,) = node_states(fleet).states["r1"].sessions
        assert (sender.delay_interval_ms, sender.burst_size, sender.computation_interval_ms) == (
            200,
            1,
            0,
        )
        assert (sender.thresholds, sender.forward_flow) == (DelayThresholds(), "to-h2")
        # the new columns take values
        with store.write() as db:
            row = db.get(SessionRow, "s1")
            assert row is not None
            row.loss = False
            row.thresholds = {"percent": 10.0, "metrics": ["jitter"]}
        with store.read() as db:
            changed = sql.fleet(db, MarkingMode.ALTMARK).sessions["s1"]
        assert (changed.loss, changed.thresholds) == (
            False,
            DelayThresholds(percent=10.0, metrics=("jitter",)),
        )
    finally:
        store.close()
