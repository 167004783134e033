"""The alert rules (srv6pm.common.alert_rules, shipped from srv6pm.dashboards.alerts): committed
YAML is current and in Grafana's provisioning shape, every rule's condition is reachable, the
panels they link to are the session dashboard's, and every InfluxDB rule separates a session over
its objective from one under it when its query runs on a real InfluxDB, with the verdict the
controller reaches on the same data (Grafana's reduce and threshold stages are evaluated here in
Python: no Grafana runs in the tests)."""

from __future__ import annotations

import hashlib
import operator
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from srv6pm.common.alert_rules import (
    EXPRESSION_UID,
    PROMETHEUS_UID,
    SESSION_PANELS,
    AlertSettings,
    lookback_s,
)
from srv6pm.common.objectives import (
    MAXIMUM_FIELD,
    InvalidObjective,
    Objective,
    queries,
    violations,
)
from srv6pm.dashboards import alert_rules, default_alert_rules, to_yaml
from srv6pm.dashboards import session as session_dashboard
from srv6pm.dashboards.__main__ import ALERT_RULES, main, stale
from srv6pm.dashboards.alerts import StalePanelLink, panel_link_problems
from srv6pm.dashboards.panels import DATASOURCE_UID
from srv6pm.dashboards.queries import substitute
from srv6pm.dashboards.render import to_dict
from srv6pm.dashboards.schema import unknown_references

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "generated"
PROVISIONING = ROOT / "provisioning"
# Grafana's rule uid limits, and the states the file format accepts.
UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
NO_DATA_STATES = {"NoData", "Alerting", "OK", "KeepLast"}
EXEC_ERR_STATES = {"Error", "Alerting", "OK", "KeepLast"}
DURATION = re.compile(r"^\d+[smhd]$")


# Per-session objectives opposite to the defaults' verdicts: "lossy" is within its own (looser)
# maxima, "clean" breaks its own (stricter) ones.
OBJECTIVES = {
    "lossy": Objective(0.1, 100.0, 2, 6),
    "clean": Objective(0.0005, 5.0, 0, 6),
}


def rules(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in document["groups"] for rule in group["rules"]]


def rule_by_uid(document: dict[str, Any], uid: str) -> dict[str, Any]:
    (rule,) = [r for r in rules(document) if r["uid"] == uid]
    return rule


def documents() -> list[dict[str, Any]]:
    return [
        yaml.safe_load((GENERATED / ALERT_RULES).read_text(encoding="utf-8")),
        alert_rules(OBJECTIVES),
        alert_rules({"a.very.long.session-name-with-dots.0123456789": Objective(0.01)}),
    ]


# ---- the file -----------------------------------------------------------------------------------


def test_committed_alert_rules_equal_generated_output() -> None:
    text = (GENERATED / ALERT_RULES).read_text(encoding="utf-8")
    assert text == to_yaml(default_alert_rules()), "stale: run python -m srv6pm.dashboards"
    assert stale(GENERATED) == []
    assert main(["--check"]) == 0


def test_check_names_the_alert_rules_when_they_differ(tmp_path: Path, capsys: Any) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    path = tmp_path / ALERT_RULES
    path.write_text(path.read_text().replace("for: 0s", "for: 5m"), encoding="utf-8")
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert ALERT_RULES in capsys.readouterr().err


def test_thresholds_given_to_the_generator_land_in_the_rules(tmp_path: Path) -> None:
    args = ["--out", str(tmp_path), "--loss-ratio-max", "0.02", "--window-blocks", "3"]
    assert main(args) == 0
    assert main(["--check", *args[2:], "--out", str(tmp_path)]) == 0
    assert main(["--check", "--out", str(tmp_path)]) == 1  # the defaults differ
    document = yaml.safe_load((tmp_path / ALERT_RULES).read_text(encoding="utf-8"))
    loss = rule_by_uid(document, "srv6pm-loss")
    assert threshold_of(loss) == 0.02
    assert "LIMIT 3)" in query_of(loss)
    assert "2%" in loss["title"]


def test_file_has_grafana_provisioning_shape() -> None:
    document = yaml.safe_load((GENERATED / ALERT_RULES).read_text(encoding="utf-8"))
    assert document["apiVersion"] == 1
    assert [g["name"] for g in document["groups"]] == [
        "srv6pm objectives (controller)",
        "srv6pm objectives (InfluxDB)",
    ]
    for group in document["groups"]:
        assert group["orgId"] == 1
        assert group["folder"] == "srv6pm"
        assert DURATION.match(group["interval"])
        assert group["rules"]
    assert [r["uid"] for r in rules(document)] == [
        "srv6pm-objective-violated",
        "srv6pm-loss",
        "srv6pm-delay",
        "srv6pm-unmeasured",
    ]
    for rule in rules(document):
        assert {"uid", "title", "condition", "data", "for", "labels", "annotations"} <= set(rule)
        assert rule["noDataState"] in NO_DATA_STATES
        assert rule["execErrState"] in EXEC_ERR_STATES
        assert DURATION.match(rule["for"])
        assert not {"folderUID", "ruleGroup", "orgID"} & set(rule), "API fields in a file rule"


@pytest.mark.parametrize("document", documents(), ids=["file", "per-session", "long-name"])
def test_uids_are_unique_and_titles_too(document: dict[str, Any]) -> None:
    uids = [r["uid"] for r in rules(document)]
    assert len(uids) == len(set(uids))
    assert all(UID.match(uid) for uid in uids), uids
    titles = [r["title"] for r in rules(document)]
    assert len(titles) == len(set(titles))


@pytest.mark.parametrize("document", documents(), ids=["file", "per-session", "long-name"])
def test_condition_names_a_ref_id_and_expressions_read_earlier_ones(
    document: dict[str, Any],
) -> None:
    for rule in rules(document):
        ref_ids = [q["refId"] for q in rule["data"]]
        assert len(ref_ids) == len(set(ref_ids)), rule["uid"]
        assert rule["condition"] in ref_ids, rule["uid"]
        for position, query in enumerate(rule["data"]):
            assert query["model"]["refId"] == query["refId"]
            if query["datasourceUid"] == EXPRESSION_UID:
                assert query["model"]["type"] in {"reduce", "threshold", "math"}
                assert query["model"]["expression"] in ref_ids[:position], rule["uid"]
            else:
                assert query["relativeTimeRange"]["from"] > 0
                assert query["model"]["datasource"]["uid"] == query["datasourceUid"]


def test_rules_query_the_provisioned_data_sources() -> None:
    provisioned = yaml.safe_load((PROVISIONING / "datasources" / "srv6pm.yaml").read_text())
    uids = {source["uid"]: source["type"] for source in provisioned["datasources"]}
    assert uids == {DATASOURCE_UID: "influxdb", PROMETHEUS_UID: "prometheus"}
    for rule in rules(default_alert_rules()):
        for query in rule["data"]:
            if query["datasourceUid"] != EXPRESSION_UID:
                assert uids[query["datasourceUid"]] == query["model"]["datasource"]["type"]


def test_provisioning_alerting_folder_links_the_generated_file() -> None:
    folder = PROVISIONING / "alerting"
    # Grafana fails to start on a file it cannot read or parse in this folder.
    assert sorted(p.name for p in folder.iterdir()) == ["srv6pm.yaml"]
    link = folder / "srv6pm.yaml"
    assert link.is_symlink()
    # Relative, so that it resolves wherever provisioning/ and generated/ sit side by side.
    assert str(link.readlink()) == "../../generated/alert-rules.yaml"
    assert link.resolve() == (GENERATED / ALERT_RULES).resolve()


def test_controller_rule_reads_the_violated_gauge_per_session() -> None:
    rule = rule_by_uid(default_alert_rules(), "srv6pm-objective-violated")
    assert rule["title"] == "srv6pm objective violated"
    (query,) = [q for q in rule["data"] if q["refId"] == "A"]
    assert query["datasourceUid"] == PROMETHEUS_UID
    assert query["model"]["expr"] == "max by (session) (srv6pm_threshold_violated)"
    assert query["model"]["instant"] is True
    assert threshold_of(rule) == 0
    assert "{{ $labels.session }}" in rule["annotations"]["summary"]
    assert "{{ $labels.session }}" in rule["annotations"]["description"]
    assert rule["annotations"]["dashboard_url"] == (
        "/d/srv6pm-session?var-session={{ $labels.session | urlquery }}"
    )


def test_influxdb_rules_link_the_session_dashboard_panels() -> None:
    panels = {
        r["uid"]: (r["dashboardUid"], r["panelId"])
        for r in rules(default_alert_rules())
        if "dashboardUid" in r
    }
    assert panels == {
        "srv6pm-loss": ("srv6pm-session", 2),
        "srv6pm-delay": ("srv6pm-session", 6),
        "srv6pm-unmeasured": ("srv6pm-session", 11),
    }
    settings = AlertSettings(grafana_url="https://grafana.example/")
    for rule in rules(default_alert_rules(settings=settings)):
        assert rule["annotations"]["dashboard_url"].startswith(
            "https://grafana.example/d/srv6pm-session?var-session="
        )


@pytest.mark.parametrize("document", documents(), ids=["file", "per-session", "long-name"])
def test_influxql_names_only_what_the_collector_writes(document: dict[str, Any]) -> None:
    for rule in rules(document):
        if rule["uid"] == "srv6pm-objective-violated":
            continue
        query = query_of(rule)
        assert "$timeFilter" in query
        assert unknown_references(query) == [], f"{rule['uid']}: {query}"


def test_per_session_rules_hold_each_session_to_its_own_maxima() -> None:
    document = alert_rules(
        {
            "s1": Objective(loss_ratio_max=0.02, window_blocks=3),
            "s2": Objective(delay_p99_max_ms=20.0, invalid_blocks_max=0, window_blocks=12),
            "s3": Objective(),  # no maximum: no rule
        }
    )
    found = {
        r["uid"]: (r["title"], threshold_of(r), query_of(r))
        for r in rules(document)
        if r["uid"] != "srv6pm-objective-violated"
    }
    s1, s2 = digest("s1"), digest("s2")
    assert sorted(found) == sorted(
        [f"srv6pm-loss-s1-{s1}", f"srv6pm-delay-s2-{s2}", f"srv6pm-unmeasured-s2-{s2}"]
    )
    title, threshold, query = found["srv6pm-loss-s1-" + digest("s1")]
    assert (title, threshold) == ("srv6pm s1: loss ratio above 2% over the last 3 blocks", 0.02)
    assert "\"session\" = 's1'" in query and "LIMIT 3)" in query
    _, threshold, query = found["srv6pm-delay-s2-" + digest("s2")]
    assert threshold == 20.0 and "\"session\" = 's2'" in query and "LIMIT 12)" in query
    _, threshold, _ = found["srv6pm-unmeasured-s2-" + digest("s2")]
    assert threshold == 0
    # Each window reads its own span of blocks.
    lookbacks = {r["uid"]: r["data"][0]["relativeTimeRange"]["from"] for r in rules(document)}
    assert lookbacks["srv6pm-loss-s1-" + digest("s1")] == lookback_s(3)
    assert lookbacks["srv6pm-delay-s2-" + digest("s2")] == lookback_s(12)


def test_the_linked_panels_are_the_session_dashboards_with_those_titles() -> None:
    assert panel_link_problems() == []
    dashboard = to_dict(session_dashboard.build())
    panels = list(dashboard["panels"])
    panels += [inner for panel in dashboard["panels"] for inner in panel.get("panels", [])]
    titles = {panel["id"]: panel["title"] for panel in panels}
    for title, panel_id in SESSION_PANELS.values():
        assert titles[panel_id] == title


def test_a_link_to_a_panel_that_moved_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    moved = {**SESSION_PANELS, "loss": ("Loss ratio per block", 99)}
    monkeypatch.setattr("srv6pm.dashboards.alerts.SESSION_PANELS", moved)
    assert panel_link_problems() == ["loss rule: panel 'Loss ratio per block' is 2, not 99"]
    with pytest.raises(StalePanelLink):
        default_alert_rules()


def test_names_that_grafana_or_influxql_would_misread_are_escaped() -> None:
    document = alert_rules({"it's $HOME": Objective(loss_ratio_max=0.01)})
    rule = rules(document)[1]
    # "$$" is Grafana's literal "$" in provisioned titles (it expands $NAME from the environment).
    assert rule["title"] == "srv6pm it's $$HOME: loss ratio above 1% over the last 6 blocks"
    assert "\"session\" = 'it\\'s $HOME'" in query_of(rule)
    assert UID.match(rule["uid"])


@pytest.mark.parametrize(
    "objective",
    [
        Objective(loss_ratio_max=-0.1),
        Objective(delay_p99_max_ms=float("nan")),
        Objective(invalid_blocks_max=-1),
        Objective(window_blocks=0),
    ],
)
def test_objectives_no_rule_can_express_are_refused(objective: Objective) -> None:
    with pytest.raises(InvalidObjective):
        alert_rules({"s1": objective})


# ---- against InfluxDB ---------------------------------------------------------------------------

PERIOD_NS = 10 * 10**9


def loss_line(session: str, direction: str, age: int, now: int, ratio: float | None) -> str:
    """A loss point ``age`` blocks old; ``ratio`` None: an invalid (not measured) block."""
    tags = f"loss,session={session},policy=p1,direction={direction}"
    block = 1000 - age
    if ratio is None:
        return f'{tags} block={block}i,valid=false,reason="node down" {now - age * PERIOD_NS}'
    fields = f"block={block}i,tx=1000i,rx=1000i,lost=0i,loss_ratio={ratio},valid=true"
    return f"{tags} {fields} {now - age * PERIOD_NS}"


def delay_line(session: str, direction: str, age: int, now: int, p99_ms: float) -> str:
    tags = f"delay,session={session},policy=p1,direction={direction}"
    fields = f"block={1000 - age}i,samples=10i,p99_ns={int(p99_ms * 1e6)}i,valid=true"
    return f"{tags} {fields} {now - age * PERIOD_NS}"


def points(now: int) -> list[str]:
    """Blocks 1..7 old (block 0 is still open). "lossy": 5% lost 2 blocks ago, p99 80 ms, blocks
    3 and 4 not measured in both directions. "clean": 0.1% and p99 10 ms, one block not measured
    in one direction; worse values only where the rules must not look: 7 blocks old (beyond
    the last 6), an hour old (beyond the rules' time range), one-way delay."""
    lines = []
    for direction in ("forward", "reverse"):
        for age in range(1, 8):
            lossy = None if age in (3, 4) else (0.05 if age == 2 else 0.0)
            lines.append(loss_line("lossy", direction, age, now, lossy))
            clean: float | None = 0.5 if age == 7 else 0.001
            if age == 5 and direction == "forward":
                clean = None
            lines.append(loss_line("clean", direction, age, now, clean))
        lines.append(loss_line("clean", direction, 360, now, 0.9))
    for age in range(1, 8):
        lines.append(delay_line("lossy", "two_way", age, now, 80.0 if age == 1 else 20.0))
        lines.append(delay_line("clean", "two_way", age, now, 900.0 if age == 7 else 10.0))
        lines.append(delay_line("clean", "forward", age, now, 900.0))
    return lines


@dataclass
class Influx:
    query: Callable[[str], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Influx]:
    servers = pytest.importorskip("srv6pm.lab.servers")
    with servers.InfluxServer(tmp_path_factory.mktemp("alerts") / "influxdb") as server:
        server.create_database("srv6pm")
        now = time.time_ns() // PERIOD_NS * PERIOD_NS
        request = urllib.request.Request(
            f"{server.url}/write?db=srv6pm&precision=ns",
            data="\n".join(points(now)).encode(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert reply.status == 204
        yield Influx(lambda q: server.query(q, "srv6pm"))


REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "max": max,
    "min": min,
    "last": lambda values: values[-1],
}
EVALUATORS: dict[str, Callable[[float, float], bool]] = {
    "gt": operator.gt,
    "lt": operator.lt,
    "gte": operator.ge,
    "lte": operator.le,
}


def evaluate(rule: dict[str, Any], influx: Influx) -> dict[tuple[str, ...], tuple[float, bool]]:
    """Per series (session[, direction]): (reduced value, firing), as Grafana would evaluate the
    rule: query A over its relative time range, reduce B, threshold C (the condition)."""
    data = {q["refId"]: q for q in rule["data"]}
    query, reduce, condition = data["A"], data["B"]["model"], data[rule["condition"]]["model"]
    assert (reduce["type"], reduce["expression"]) == ("reduce", "A")
    assert (condition["type"], condition["expression"]) == ("threshold", "B")
    since = f"now-{query['relativeTimeRange']['from']}s"
    influxql = substitute(query["model"]["query"], {}, time_from=since)
    evaluator = condition["conditions"][0]["evaluator"]
    found = {}
    for series in influx.query(influxql):
        tags = series.get("tags", {})
        key = tuple(tags[k] for k in ("session", "direction") if k in tags)
        values = [v for row in series["values"] for v in row[1:] if v is not None]
        value = REDUCERS[reduce["reducer"]](values)
        found[key] = (value, EVALUATORS[evaluator["type"]](value, evaluator["params"][0]))
    return found


@pytest.mark.slow
def test_default_rules_fire_for_the_session_over_the_objective_only(influx: Influx) -> None:
    document = default_alert_rules()
    loss = evaluate(rule_by_uid(document, "srv6pm-loss"), influx)
    assert loss == {
        ("lossy", "forward"): (0.05, True),
        ("lossy", "reverse"): (0.05, True),
        ("clean", "forward"): (0.001, False),
        ("clean", "reverse"): (0.001, False),
    }
    delay = evaluate(rule_by_uid(document, "srv6pm-delay"), influx)
    assert delay == {("lossy",): (80.0, True), ("clean",): (10.0, False)}
    unmeasured = evaluate(rule_by_uid(document, "srv6pm-unmeasured"), influx)
    # lossy: 2 blocks (each lost in both directions, counted once) > 1; clean: 1, not > 1.
    assert unmeasured == {("lossy",): (2, True), ("clean",): (1, False)}


@pytest.mark.slow
def test_per_session_rules_fire_by_each_sessions_own_maxima(influx: Influx) -> None:
    document = alert_rules(OBJECTIVES)
    verdicts = {}
    for rule in rules(document)[1:]:
        for key, (_, firing) in evaluate(rule, influx).items():
            session = rule["title"].split(":")[0].removeprefix("srv6pm ")
            assert key[0] == session, "a per-session rule read another session"
            verdicts[(rule["labels"]["objective"], *key)] = firing
    assert verdicts == {
        ("loss_ratio_max", "lossy", "forward"): False,  # 5% <= 10%
        ("loss_ratio_max", "lossy", "reverse"): False,
        ("delay_p99_max_ms", "lossy"): False,  # 80 ms <= 100 ms
        ("invalid_blocks_max", "lossy"): False,  # 2 <= 2
        ("loss_ratio_max", "clean", "forward"): True,  # 0.1% > 0.05%
        ("loss_ratio_max", "clean", "reverse"): True,
        ("delay_p99_max_ms", "clean"): True,  # 10 ms > 5 ms
        ("invalid_blocks_max", "clean"): True,  # 1 > 0
    }
    assert controller_verdicts(OBJECTIVES, influx) == verdicts


@pytest.mark.slow
def test_the_controller_reaches_the_default_rules_verdicts(influx: Influx) -> None:
    document = default_alert_rules()
    fleet_wide = {}
    for rule in rules(document)[1:]:
        for key, (_, firing) in evaluate(rule, influx).items():
            fleet_wide[(rule["labels"]["objective"], *key)] = firing
    objective = Objective(0.01, 50.0, 1, 6)
    assert controller_verdicts({"lossy": objective, "clean": objective}, influx) == fleet_wide


@pytest.mark.slow
def test_the_window_is_the_last_blocks_of_each_series(influx: Influx) -> None:
    # The 5% block is 2 blocks old: a 1-block window misses it, a 2-block one sees it.
    for window, firing in ((1, False), (2, True)):
        document = alert_rules({"lossy": Objective(loss_ratio_max=0.01, window_blocks=window)})
        found = evaluate(rules(document)[1], influx)
        assert {key: verdict for key, (_, verdict) in found.items()} == {
            ("lossy", "forward"): firing,
            ("lossy", "reverse"): firing,
        }


# ---- helpers ------------------------------------------------------------------------------------


def controller_verdicts(
    objectives: dict[str, Objective], influx: Influx
) -> dict[tuple[str, ...], bool]:
    """Per (objective field, session[, direction]): does the controller find it broken? It runs
    the same queries without Grafana's time filter and compares with the same ``exceeds``."""
    verdicts = {}
    for session, objective in objectives.items():
        for kind, query in queries(objective, session, time_filter=None).items():
            for series in influx.query(query):
                tags = series.get("tags", {})
                key = (
                    MAXIMUM_FIELD[kind],
                    *(tags[k] for k in ("session", "direction") if k in tags),
                )
                found = [
                    {**tags, **dict(zip(series["columns"], v, strict=True))}
                    for v in series["values"]
                ]
                verdicts[key] = bool(violations(objective, {kind: found}))
    return verdicts


def query_of(rule: dict[str, Any]) -> str:
    (query,) = [q for q in rule["data"] if q["refId"] == "A"]
    text: str = query["model"]["query"]
    return text


def threshold_of(rule: dict[str, Any]) -> float:
    (condition,) = [q for q in rule["data"] if q["refId"] == rule["condition"]]
    value: float = condition["model"]["conditions"][0]["evaluator"]["params"][0]
    return value


def digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()[:8]
