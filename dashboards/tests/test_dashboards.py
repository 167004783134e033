"""The dashboards: committed JSON is current, every panel queries srv6pm data that exists."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard
from srv6pm.dashboards import (
    DASHBOARDS,
    MissingVariable,
    generate,
    panel_queries,
    substitute,
    to_json,
    variable_queries,
)
from srv6pm.dashboards.__main__ import main, stale
from srv6pm.dashboards.influxql import InfluxQLQuery
from srv6pm.dashboards.panels import DATASOURCE_UID
from srv6pm.dashboards.schema import SCHEMA, unknown_references

GENERATED = Path(__file__).resolve().parents[1] / "generated"
PROVISIONING = Path(__file__).resolve().parents[1] / "provisioning"
# Values containing regex metacharacters, as real policy names may.
VALUES = {"policy": "color.100/blue", "session": "s1", "flow": "flow-7", "direction": "forward"}
DASHBOARD_IDS = sorted(DASHBOARDS)
# A macro or variable reference; a "$" before "/" or ")" is a regex's end anchor, which stays.
LEFTOVER = re.compile(r"\$[\w{]|\[\[")


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict[str, Any]]:
    return generate()


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found += panel.get("panels", [])
    return [p for p in found if p["type"] != "row"]


def all_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    names = {v["name"] for v in dashboard["templating"]["list"]}
    return panel_queries(dashboard, {k: v for k, v in VALUES.items() if k in names})


def test_committed_files_equal_generated_output(dashboards: dict[str, dict[str, Any]]) -> None:
    committed = {p.name for p in GENERATED.glob("*.json")}
    assert committed == {f"{uid}.json" for uid in dashboards}
    for uid, model in dashboards.items():
        text = (GENERATED / f"{uid}.json").read_text(encoding="utf-8")
        assert text == to_json(model), f"{uid}.json is stale: run python -m srv6pm.dashboards"
    assert stale(GENERATED) == []


def test_check_names_the_file_that_differs(tmp_path: Path, capsys: Any) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--check", "--out", str(tmp_path)]) == 0
    edited = tmp_path / "srv6pm-flows.json"
    edited.write_text(edited.read_text().replace("Per-node", "Per node"), encoding="utf-8")
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert "srv6pm-flows.json" in capsys.readouterr().err


def test_generation_is_deterministic() -> None:
    assert generate() == generate()


def test_expected_dashboards_exist(dashboards: dict[str, dict[str, Any]]) -> None:
    assert set(dashboards) == {"srv6pm-fleet", "srv6pm-session", "srv6pm-flows"}
    for uid, model in dashboards.items():
        assert model["uid"] == uid
        assert "srv6pm" in model["tags"]


@pytest.mark.parametrize("uid", DASHBOARD_IDS)
def test_every_panel_has_a_query_on_the_srv6pm_datasource(
    dashboards: dict[str, dict[str, Any]], uid: str
) -> None:
    for panel in panels(dashboards[uid]):
        assert panel["datasource"]["uid"] == DATASOURCE_UID, panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "influxdb", "uid": DATASOURCE_UID}
            assert target["rawQuery"] is True
            # Every panel follows the dashboard's time range.
            assert "$timeFilter" in target["query"], panel["title"]


@pytest.mark.parametrize("uid", DASHBOARD_IDS)
def test_panel_ids_are_unique(dashboards: dict[str, dict[str, Any]], uid: str) -> None:
    ids = [p["id"] for p in dashboards[uid]["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("uid", DASHBOARD_IDS)
def test_no_macro_or_variable_is_left_after_substitution(
    dashboards: dict[str, dict[str, Any]], uid: str
) -> None:
    queries = all_queries(dashboards[uid])
    assert len(queries) == sum(len(p["targets"]) for p in panels(dashboards[uid]))
    for title, query in queries:
        assert not LEFTOVER.search(query), f"{title}: {query}"
    for name, query in variable_queries(dashboards[uid], VALUES):
        assert not LEFTOVER.search(query), f"variable {name}: {query}"


@pytest.mark.parametrize("uid", DASHBOARD_IDS)
def test_queries_name_only_measurements_tags_and_fields_of_the_schema(
    dashboards: dict[str, dict[str, Any]], uid: str
) -> None:
    for title, query in all_queries(dashboards[uid]):
        assert unknown_references(query) == [], f"{title}: {query}"
    for name, query in variable_queries(dashboards[uid], VALUES):
        assert unknown_references(query) == [], f"variable {name}: {query}"


def test_every_required_measurement_is_shown(dashboards: dict[str, dict[str, Any]]) -> None:
    used = {
        m
        for model in dashboards.values()
        for _, q in all_queries(model)
        for m in re.findall(r'FROM "(\w+)"', q)
    }
    assert used == set(SCHEMA)


def test_units_follow_the_fields(dashboards: dict[str, dict[str, Any]]) -> None:
    for model in dashboards.values():
        for panel in panels(model):
            unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
            queries = " ".join(t["query"] for t in panel["targets"])
            if panel["type"] != "timeseries":
                continue
            if "_ns" in queries:
                assert unit == "ns", panel["title"]
            elif "loss_ratio" in queries or 'sum("lost") / sum("tx")' in queries:
                assert unit == "percentunit", panel["title"]


def test_template_variables_list_tag_values(dashboards: dict[str, dict[str, Any]]) -> None:
    names = {
        uid: [name for name, _ in variable_queries(model)] for uid, model in dashboards.items()
    }
    assert names == {
        "srv6pm-fleet": ["policy", "segment_list"],
        "srv6pm-session": ["policy", "session", "segment_list"],
        "srv6pm-flows": ["flow"],
    }
    for model in dashboards.values():
        for _, query in variable_queries(model):
            assert query.startswith("SHOW TAG VALUES FROM ")


def test_targets_decode_as_influxql_queries(dashboards: dict[str, dict[str, Any]]) -> None:
    decoded = Dashboard.from_json(dashboards["srv6pm-session"])
    targets = [t for p in decoded.panels or [] for t in getattr(p, "targets", None) or []]
    assert targets
    assert all(isinstance(t, InfluxQLQuery) for t in targets)
    assert json.loads(json.dumps(targets[0].to_json(), default=lambda o: o.to_json()))["rawQuery"]


def test_time_filter_is_written_as_grafana_writes_it() -> None:
    query = 'SELECT "lost" FROM "loss" WHERE $timeFilter GROUP BY time($__interval)'
    assert substitute(query, {}) == (
        'SELECT "lost" FROM "loss" WHERE time >= 0ms and time <= now() GROUP BY time(10s)'
    )
    assert substitute(query, {}, time_from="now-6h", interval="1m") == (
        'SELECT "lost" FROM "loss" WHERE time >= now() - 6h and time <= now() GROUP BY time(1m)'
    )
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert "time >= 1767225600000ms and time <= 1767225660000ms" in substitute(
        query, {}, time_from=start, time_to=1767225660000
    )
    with pytest.raises(ValueError, match="interval"):
        substitute(query, {}, interval="10 seconds")


def test_variables_are_escaped_for_where_they_stand() -> None:
    query = """SELECT "lost" FROM "loss" WHERE "policy" =~ /^$policy$/ AND "session" = '$session'"""
    assert substitute(query, {"policy": "a.b/c", "session": "it's"}) == (
        """SELECT "lost" FROM "loss" WHERE "policy" =~ /^a\\.b\\/c$/ AND "session" = 'it\\'s'"""
    )
    assert 'AS "x-1"' in substitute('SELECT "lost" AS "${v}" FROM "loss"', {"v": "x-1"})


def test_missing_variable_takes_the_all_value_or_fails(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    fleet = dict(panel_queries(dashboards["srv6pm-fleet"], {}))
    assert '"policy" =~ /^.*$/' in fleet["Lost packets per policy and direction"]
    with pytest.raises(MissingVariable, match="session"):
        panel_queries(dashboards["srv6pm-session"], {})


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ('SELECT "lost" FROM "losses" WHERE $timeFilter', "unknown measurement"),
        ('SELECT "lost_packets" FROM "loss"', "neither a tag nor a field"),
        ('SELECT "packets" FROM "flow" GROUP BY "block"', "GROUP BY 'block'"),
        ('SELECT mean("reason") FROM "delay"', "not a numeric field"),
        ('SELECT "lost" FROM "loss" WHERE "lost" = true', "not a boolean field"),
        ("""SELECT "lost" FROM "loss" WHERE "direction" = 'two_way'""", "not one of"),
        ('SHOW TAG VALUES FROM "flow" WITH KEY = "packets"', "WITH KEY 'packets'"),
    ],
)
def test_schema_check_catches_what_does_not_exist(query: str, problem: str) -> None:
    problems = unknown_references(query)
    assert any(problem in p for p in problems), problems


def test_provisioning_points_at_the_datasource_and_the_generated_folder() -> None:
    datasource = (PROVISIONING / "datasources" / "srv6pm.yaml").read_text(encoding="utf-8")
    for expected in (
        f"uid: {DATASOURCE_UID}",
        "type: influxdb",
        "url: http://influxdb:8086",
        "dbName: srv6pm",
        "version: InfluxQL",
    ):
        assert expected in datasource
    provider = (PROVISIONING / "dashboards" / "srv6pm.yaml").read_text(encoding="utf-8")
    assert "type: file" in provider
    assert "path: /var/lib/grafana/dashboards/srv6pm" in provider
