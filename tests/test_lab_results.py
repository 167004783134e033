"""Results leave the node and lose nothing: a real lab whose node managers journal their records
and publish them to a real Kafka broker, a real collector, a real InfluxDB. Every block must be
in InfluxDB exactly once per direction, with exactly the injected loss, and every node's count of
each flow (the per-hop view), across crashes and outages of every part."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from conftest import PERIOD_S, running_lab
from prometheus_client.parser import text_string_to_metric_families
from srv6pm.dashboards import generate
from srv6pm.dashboards.queries import panel_queries, variable_queries
from srv6pm.lab import scenario
from srv6pm.lab.pipeline import DLQ_TOPIC, TOPIC, ResultsPipeline
from srv6pm.lab.scenario import FORWARD, FORWARD_SIDS, H1, H2, REVERSE, REVERSE_SIDS, SESSION
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2
from srv6pm.twamp.sender import NOT_RUNNING

pytestmark = [pytest.mark.root, pytest.mark.slow]
WAIT_S = 20.0


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    with ResultsPipeline(tmp_path_factory.mktemp("pipeline")) as running:
        yield running


@pytest.fixture(scope="module")
def results_lab(request, pipeline):
    settings = {**pipeline.node_manager_settings, "publish_probes": "true"}
    with running_lab(request, pb.MARKING_MODE_ALTMARK, settings) as lab:
        scenario.apply_states(lab, scenario.stamp_states(lab))
        time.sleep(3 * PERIOD_S)  # every flow and session has a block of history
        yield lab


def rows(pipeline, query: str) -> dict[tuple, list[dict]]:
    """Points of an InfluxQL query grouped by tags: {tag values: [{column: value}]}."""
    out = {}
    for series in pipeline.query(query):
        key = tuple(sorted((series.get("tags") or {}).items()))
        out[key] = [dict(zip(series["columns"], v, strict=True)) for v in series["values"]]
    return out


def wait_rows(pipeline, query: str, groups: int, timeout: float = WAIT_S) -> dict[tuple, list]:
    deadline = time.monotonic() + timeout
    while True:
        found = rows(pipeline, query)
        if len(found) >= groups or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def inject_loss(lab, blocks) -> int:
    """5 of 100 packets h1 -> h2 and 3 of 60 h2 -> h1 dropped on r2 in one block; that block."""
    blocks.next()
    block = blocks.next()  # the session has probed at least one block before
    lab.drop("r2", "r3", 5, dst=FORWARD_SIDS[1])
    lab.drop("r2", "r1", 3, dst=REVERSE_SIDS[1])
    lab.send_udp("h1", H2, 100, interval=0.0005)
    lab.send_udp("h2", H1, 60, interval=0.0005)
    time.sleep(max(0.0, blocks.start(block) + 0.5 - time.time()))
    lab.clear_drops("r2")
    return block


def by(found: dict[tuple, list], tag: str) -> dict[str, list]:
    return {dict(k)[tag]: v for k, v in found.items()}


def test_loss_delay_and_flow_counts_reach_influxdb_exactly_once(results_lab, pipeline, blocks):
    block = inject_loss(results_lab, blocks)
    loss = by(
        wait_rows(
            pipeline,
            f"SELECT tx, rx, lost, loss_ratio, valid, reason FROM loss "
            f"WHERE session = '{SESSION}' AND block = {block} GROUP BY *",
            groups=2,
        ),
        "direction",
    )
    # +1 each way: the probe of the block before and its reply, counted like any packet
    assert [(p["tx"], p["rx"], p["lost"], p["valid"]) for p in loss["forward"]] == [
        (101, 96, 5, True)
    ]
    assert [(p["tx"], p["rx"], p["lost"], p["valid"]) for p in loss["reverse"]] == [
        (61, 58, 3, True)
    ]
    assert loss["forward"][0]["time"] == int(block * PERIOD_S * 1e9)
    (tags,) = [
        dict(k)
        for k in wait_rows(
            pipeline,
            f"SELECT lost FROM loss WHERE block = {block} AND direction = 'forward' GROUP BY *",
            1,
        )
    ]
    assert tags == {
        "session": SESSION,
        "policy": "to-h2",
        "direction": "forward",
        "src_node": "r1",
        "dst_node": "r3",
    }

    # every node's own count of each flow: lost between r2 and r3 = r2 - r3
    flows = wait_rows(
        pipeline,
        f"SELECT packets, valid FROM flow WHERE block = {block} GROUP BY flow, node",
        groups=6,
    )
    counts = {
        (dict(k)["flow"], dict(k)["node"]): [p["packets"] for p in v] for k, v in flows.items()
    }
    assert counts == {
        (FORWARD, "r1"): [101],
        (FORWARD, "r2"): [101],
        (FORWARD, "r3"): [96],
        (REVERSE, "r3"): [61],
        (REVERSE, "r2"): [61],
        (REVERSE, "r1"): [58],
    }

    delay = by(
        wait_rows(
            pipeline,
            f"SELECT samples, probes_sent, p50_ns, valid FROM delay "
            f"WHERE session = '{SESSION}' AND block = {block} GROUP BY direction",
            groups=3,
        ),
        "direction",
    )
    assert set(delay) == {"two_way", "forward", "reverse"}
    for direction, points in delay.items():
        assert len(points) == 1, direction
        assert points[0]["valid"] and points[0]["samples"] == points[0]["probes_sent"] == 1
        assert 0 < points[0]["p50_ns"] < 50_000_000


def metrics(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if not sample.labels or sample.labels.get("outcome") == "written"
    }


def test_node_managers_and_the_collector_export_metrics_and_health(results_lab, pipeline):
    r1 = metrics(results_lab.metrics_port("r1"))
    assert r1["srv6pm_stamp_sender_sent_total"] > 0
    assert r1["srv6pm_kafka_published_total"] > 0
    assert r1["srv6pm_journal_appended_total"] >= r1["srv6pm_kafka_published_total"]
    assert r1["srv6pm_apply_seconds_count"] >= 1
    assert "srv6pm_journal_depth" in r1 and r1["srv6pm_journal_dropped_total"] == 0
    r3 = metrics(results_lab.metrics_port("r3"))
    # the in-kernel reflector answers what it can, the userspace one the rest (either may be 0)
    kernel, userspace = "srv6pm_stamp_kernel_reflector", "srv6pm_stamp_reflector"
    assert r3[f"{kernel}_reflected_total"] + r3[f"{userspace}_reflected_total"] > 0
    collector = metrics(pipeline.collector.http_port)
    assert collector["srv6pm_collector_points_written_total"] > 0
    assert collector["srv6pm_collector_records_total"] > 0
    assert collector["srv6pm_collector_record_age_seconds_count"] > 0
    assert "srv6pm_collector_consumer_lag" in collector
    status, body = pipeline.collector.get("/healthz")
    health = json.loads(body)
    assert status == 200 and health["influxdb"] == "ok" and health["partitions"] == [0, 1, 2]


# ---- faults: each during a run of blocks with traffic both ways and a known loss ------------

FORWARD_PACKETS, REVERSE_PACKETS, DROPPED = 50, 30, 2
WINDOW = 7  # blocks
FAULT_AT, RECOVER_AT, LOSS_AT = 1, 4, 3  # indexes into the window


def run_window(lab, blocks, fault, recover, loss_at: int = LOSS_AT) -> list[int]:
    """Traffic in every block of a window, `DROPPED` packets lost each way in block `loss_at`,
    `fault()` in block FAULT_AT and `recover()` in block RECOVER_AT; the window's blocks."""
    window = []
    for i in range(WINDOW):
        window.append(blocks.next())
        if i == FAULT_AT:
            fault()
        if i == RECOVER_AT:
            recover()
        if i == loss_at:
            lab.drop("r2", "r3", DROPPED, dst=FORWARD_SIDS[1])
            lab.drop("r2", "r1", DROPPED, dst=REVERSE_SIDS[1])
        lab.send_udp("h1", H2, FORWARD_PACKETS, interval=0.0005)
        lab.send_udp("h2", H1, REVERSE_PACKETS, interval=0.0005)
        if i == loss_at:
            lab.clear_drops("r2")
    return window


def window_points(pipeline, measurement: str, fields: str, window: list[int], group: str):
    """{group tag values: {block: [points]}} of the window, once every group has every block."""
    query = (
        f"SELECT block, {fields} FROM {measurement} WHERE block >= {window[0]} "
        f"AND block <= {window[-1]} GROUP BY {group}"
    )
    deadline = time.monotonic() + WAIT_S + 2 * PERIOD_S * WINDOW
    while True:
        found = rows(pipeline, query)
        per_block = {
            k: {b: [p for p in v if p["block"] == b] for b in window} for k, v in found.items()
        }
        complete = per_block and all(all(v.values()) for v in per_block.values())
        if complete or time.monotonic() > deadline:
            return per_block
        time.sleep(0.5)


def assert_every_block_once_with_exact_loss(pipeline, window, not_measured=(), loss_at=LOSS_AT):
    """Loss: one point per block and direction, `DROPPED` lost in block `loss_at`, none elsewhere;
    blocks in `not_measured` may instead say why. Flows: one point per block, node and flow;
    what r2 counted minus what the next node counted is exactly what was dropped there."""
    loss = window_points(pipeline, "loss", "tx, rx, lost, valid, reason", window, "direction")
    assert len(loss) == 2, loss.keys()
    for key, per_block in loss.items():
        for block, points in per_block.items():
            assert len(points) == 1, (key, block, points)
            (p,) = points
            if block in not_measured and not p["valid"]:
                continue
            assert p["valid"], (key, block, p["reason"])
            expected = DROPPED if block == window[loss_at] else 0
            assert p["lost"] == expected, (key, block, p)
    flows = window_points(pipeline, "flow", "packets, valid, reason", window, "flow, node")
    assert len(flows) == 6, flows.keys()
    count = {
        (dict(k)["flow"], dict(k)["node"], b): v[0]
        for k, pb_ in flows.items()
        for b, v in pb_.items()
    }
    assert all(len(v) == 1 for pb_ in flows.values() for v in pb_.values())
    for block in window:
        if block in not_measured:
            continue
        dropped = DROPPED if block == window[loss_at] else 0
        for flow, after in ((FORWARD, "r3"), (REVERSE, "r1")):
            r2, nxt = count[(flow, "r2", block)], count[(flow, after, block)]
            assert r2["valid"] and nxt["valid"], (flow, block, r2, nxt)
            assert r2["packets"] - nxt["packets"] == dropped, (flow, block)
    return loss


def test_a_collector_killed_mid_run_loses_and_duplicates_nothing(results_lab, pipeline, blocks):
    window = run_window(results_lab, blocks, pipeline.collector.kill, pipeline.collector.start)
    assert_every_block_once_with_exact_loss(pipeline, window)


def test_a_broker_stopped_for_several_blocks_loses_nothing(results_lab, pipeline, blocks):
    window = run_window(results_lab, blocks, pipeline.kafka.stop, pipeline.kafka.start)
    assert_every_block_once_with_exact_loss(pipeline, window)


def test_influxdb_stopped_for_several_blocks_loses_nothing(results_lab, pipeline, blocks):
    window = run_window(results_lab, blocks, pipeline.influx.stop, pipeline.influx.start)
    assert_every_block_once_with_exact_loss(pipeline, window)
    status, body = pipeline.collector.get("/metrics")
    assert status == 200 and b"srv6pm_collector_write_errors_total" in body


def test_a_node_manager_killed_and_restarted_at_once_loses_no_block(results_lab, pipeline, blocks):
    lab = results_lab

    def crash() -> None:
        lab.stop_node_manager("r1", kill=True)
        time.sleep(0.3)
        lab.start_node_manager("r1")

    # Back within the block: the block before is still readable at both ends (its colour
    # returns only in the next block) and is probed late; only a slow start misses it.
    window = run_window(lab, blocks, crash, lambda: None)
    loss = assert_every_block_once_with_exact_loss(
        pipeline, window, not_measured={window[FAULT_AT - 1]}
    )
    reasons = {p["reason"] for v in loss.values() for ps in v.values() for p in ps}
    assert reasons <= {"", NOT_RUNNING}, reasons


def test_a_node_manager_down_for_blocks_says_which_it_could_not_measure(
    results_lab, pipeline, blocks
):
    lab = results_lab
    window = run_window(
        lab,
        blocks,
        lambda: lab.stop_node_manager("r1", kill=True),
        lambda: lab.start_node_manager("r1"),
        loss_at=WINDOW - 1,
    )
    down = window[FAULT_AT - 1 : RECOVER_AT + 1]
    loss = assert_every_block_once_with_exact_loss(
        pipeline, window, not_measured=set(down), loss_at=WINDOW - 1
    )
    for per_block in loss.values():
        # no probe left r1 for these: said once each, not left as a gap
        for block in window[FAULT_AT : RECOVER_AT - 1]:
            assert per_block[block][0]["reason"] == NOT_RUNNING, block
        # its counters have no snapshot from the outage: no baseline on r1's side
        assert not per_block[window[RECOVER_AT]][0]["valid"]
    flows = rows(
        pipeline,
        f"SELECT block, valid, reason FROM flow WHERE node = 'r1' AND block >= {window[0]} "
        f"AND block <= {window[-1]} GROUP BY flow",
    )
    for points in flows.values():
        by_block = {p["block"]: p for p in points}
        assert sorted(by_block) == window and len(points) == len(window)
        assert (
            by_block[window[FAULT_AT + 1]]["reason"]
            == "not measured: the node manager was not running"
        )

    # the restarted node manager serves what it measured before the crash, from its journal
    r1 = scenario.stub(lab, "r1")
    kept = r1.ReadResults(pb.ReadResultsRequest(session=SESSION, since_block=window[0]))
    assert [r.block for r in kept.loss if r.block <= window[-1]] == window
    # a block older than its snapshots, read back as journaled (and as InfluxDB has it)
    before = window[0] - 1
    (old,) = r1.ReadBlock(pb.ReadBlockRequest(block=before, flows=[FORWARD])).flows
    (journaled,) = rows(
        pipeline,
        f"SELECT packets FROM flow WHERE node = 'r1' AND flow = '{FORWARD}' AND block = {before}",
    )[()]
    assert old.packets == journaled["packets"] > 0


def test_malformed_records_go_to_the_dead_letter_topic_and_the_stream_goes_on(
    results_lab, pipeline, blocks
):
    inconsistent = records_pb2.MeasurementRecord(
        node="r9",
        loss=records_pb2.LossRecord(
            session="x",
            block=5,
            valid=True,
            block_info=records_pb2.Block(index=5, start_unix_ns=1, period_ns=2),
        ),
    ).SerializeToString()
    bad = [b"\xff\xff\xff", b"", inconsistent]
    producer = Producer({"bootstrap.servers": pipeline.kafka.bootstrap})
    for value in bad:
        producer.produce(TOPIC, value=value, key=b"r9/x")
    assert producer.flush(10) == 0
    block = blocks.next()
    written = wait_rows(
        pipeline, f"SELECT lost FROM loss WHERE session = '{SESSION}' AND block = {block}", 1
    )
    assert written, "the stream stopped after the malformed records"

    consumer = Consumer(
        {
            "bootstrap.servers": pipeline.kafka.bootstrap,
            "group.id": "dlq-reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([DLQ_TOPIC])
    letters = []
    deadline = time.monotonic() + WAIT_S
    while len(letters) < len(bad) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            letters.append(message)
    time.sleep(1)
    extra = consumer.poll(0.5)
    consumer.close()
    assert extra is None
    assert [m.value() or b"" for m in letters] == bad
    reasons = [dict(m.headers())["srv6pm.reason"].decode() for m in letters]
    assert "not a srv6pm.v1.MeasurementRecord" in reasons[0]
    assert reasons[1] == "empty record"
    assert "block_info" in reasons[2]


# ---- dashboards: every panel's query, run against what the lab measured ----------------------


NO_INTERVALS = "srv6pm-session: Two-way delay per computation interval"
# Panels of changes and events: the lab's session became UP, and reported each threshold
# metric's first value, when it started; later changes depend on the tests before. These are
# read over the whole run.
EVENT_PANELS = {
    "srv6pm-session: Liveness",
    "srv6pm-session: Liveness changes",
    "srv6pm-fleet: Liveness per segment list",
    "srv6pm-session: Threshold events",
    "srv6pm-fleet: Threshold events",
}


def test_every_dashboard_panel_shows_what_the_lab_measured(results_lab, pipeline, blocks):
    lab = results_lab
    first = blocks.next()
    # r2 down for a block: its counts of the block after are not measurable (no baseline)
    lab.stop_node_manager("r2", kill=True)
    time.sleep(PERIOD_S)
    lab.start_node_manager("r2")
    inject_loss(lab, blocks)
    probe_lost = blocks.next()
    lab.send_udp("h1", H2, FORWARD_PACKETS, interval=0.0005)
    # the block's loss probe leaves r1 in the middle of the next block: drop exactly that packet
    time.sleep(max(0.0, blocks.start(probe_lost + 1) + 0.2 - time.time()))
    lab.drop("r2", "r3", 1, dst=FORWARD_SIDS[1])
    time.sleep(max(0.0, blocks.start(probe_lost + 2) - time.time()))
    lab.clear_drops("r2")
    last = probe_lost + 1
    wait_rows(pipeline, f"SELECT * FROM delay WHERE block = {last} GROUP BY *", 3)
    wait_rows(pipeline, f"SELECT * FROM loss WHERE block = {probe_lost} GROUP BY *", 2)

    ms = int(PERIOD_S * 1000)
    window = {"time_from": first * ms, "time_to": (last + 1) * ms - 1}
    variables = {"policy": "to-h2", "session": SESSION, "flow": FORWARD}
    shown: dict[str, list] = {}
    for uid, dashboard in generate().items():
        for title, query in panel_queries(dashboard, variables, **window):
            if f"{uid}: {title}" not in EVENT_PANELS:
                shown.setdefault(f"{uid}: {title}", []).extend(pipeline.query(query))
        for title, query in panel_queries(dashboard, variables, time_from=0, time_to="now"):
            if f"{uid}: {title}" in EVENT_PANELS:
                shown.setdefault(f"{uid}: {title}", []).extend(pipeline.query(query))
        for name, query in variable_queries(dashboard, variables):
            # the lab's policy has only its unnamed segment list: no segment_list tag to list
            # (All still matches it, as every panel query above shows)
            assert pipeline.query(query) or name == "segment_list", (uid, name, query)
    empty = sorted(title for title, series in shown.items() if not series)
    # the lab's session probes once per block, and a computation interval needs a delay
    # interval: that panel's query runs on real points in dashboards/tests instead
    assert empty == [NO_INTERVALS], f"panels with nothing to show: {empty}"

    def values(title: str, column: str) -> dict[str, list]:
        out: dict[str, list] = {}
        for series in shown[title]:
            # a policy's only segment list groups as "": not part of the key
            tags = sorted((series.get("tags") or {}).items())
            key = ",".join(v for _, v in tags if v) or "-"
            i = series["columns"].index(column)
            out.setdefault(key, []).extend(v[i] for v in series["values"] if v[i] is not None)
        return out

    # forward: the 5 dropped, and the dropped probe itself (a packet of the flow, next block)
    lost = values("srv6pm-fleet: Top 10 lossy policies", "lost")
    assert lost == {"forward,to-h2": [6], "reverse,to-h2": [3]}
    per_block = values("srv6pm-session: Lost packets per block", "lost")
    assert sorted(per_block["forward"]) == [0] * (len(per_block["forward"]) - 2) + [1, 5]
    assert sorted(per_block["reverse"]) == [0] * (len(per_block["reverse"]) - 1) + [3]
    invalid = values("srv6pm-session: Invalid loss blocks", "block")
    assert invalid == {"-": [probe_lost, probe_lost]}  # both directions of the lost probe
    reasons = values("srv6pm-session: Invalid loss blocks", "reason")
    assert set(reasons["-"]) == {"probe lost"}
    probes = values("srv6pm-fleet: STAMP probes lost per policy", "probes_lost")
    assert sum(probes["to-h2"]) == 1
    path = values("srv6pm-flows: Path loss per block", "lost")
    assert sorted(path["-"])[-1] == 5 and sum(path["-"]) == 5 + 1  # + the dropped probe
    assert values("srv6pm-flows: Invalid flow counts", "node") == {"-": ["r2"]}
    assert values("srv6pm-flows: Invalid flow counts", "block") == {"-": [first + 1]}
    assert values("srv6pm-flows: Packets per node per block", "packets").keys() == {
        "r1,ingress",
        "r2,transit",
        "r3,egress",
    }
    # every two-way reply of the window in one histogram bin, the session's edges as bins
    histogram = shown["srv6pm-session: Two-way delay histogram"]
    bins = {c for s in histogram for c in s["columns"]} - {"time"}
    edges_ns = [e * 1000 for e in scenario.HISTOGRAM_EDGES_US]
    assert bins == {f"sum_hist_lt_{e}" for e in edges_ns} | {"sum_hist_lt_inf"}
    replies = sum(v for s in histogram for row in s["values"] for v in row[1:] if v is not None)
    assert replies == sum(values("srv6pm-session: Probes per block", "samples")["-"])
    assert values("srv6pm-session: Liveness", "state")["-"][-1] == 1  # up
    metrics = values("srv6pm-session: Threshold events", "metric")["-"]
    assert {"two_way_mean", "jitter"} <= set(metrics)
    first = values("srv6pm-session: Threshold events", "first")["-"]
    assert first.count(True) >= 2  # each metric's first report (again after a restart)
