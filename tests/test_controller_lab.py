"""The product end to end, through the controller's REST API only: a real lab whose node managers
serve mutual TLS only, real Kafka, InfluxDB and collector, and the controller as its own process.
The operator registers the routers, creates policies and two sessions, and reads back the exact
injected loss, localised to the segment it was injected on; kill -9 of the controller or of a node
manager changes nothing an operator sees."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from datetime import UTC, datetime

import pytest
import yaml
from conftest import (
    FORWARD_DROPS,
    REVERSE_DROPS,
    block_packets,
    controller_settings,
    inject_drops,
    running_lab,
)
from srv6pm.lab.fleet import Api, add_sessions, register, session_hops, session_loss, wait_applied
from srv6pm.lab.pipeline import ResultsPipeline
from srv6pm.lab.servers import ControllerProcess

pytestmark = [pytest.mark.root, pytest.mark.slow]
WAIT_S = 30.0


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    with ResultsPipeline(tmp_path_factory.mktemp("pipeline")) as running:
        yield running


@pytest.fixture(scope="module")
def product_lab(request, pipeline, marking_mode):
    with running_lab(
        request, marking_mode, pipeline.node_manager_settings, tls=True, apply_scenario=False
    ) as lab:
        yield lab


@pytest.fixture(scope="module")
def controller(tmp_path_factory, product_lab, pipeline):
    process = ControllerProcess(
        tmp_path_factory.mktemp("controller"),
        controller_settings(product_lab, pipeline.influx.url, thresholds_every_s="1"),
    )
    with process:
        yield process


@pytest.fixture(scope="module")
def api(controller, product_lab):
    client = Api(controller.url, controller.token)
    register(client, product_lab)
    add_sessions(client, ("h1-h2", "h2-h1"))
    wait_applied(client)
    yield client
    client.close()


def inject_loss(lab, blocks) -> int:
    """5 packets h1 -> h2 lost on r2 -> r3 and 3 h2 -> h1 on r2 -> r1, in one block."""
    blocks.next()
    return inject_drops(lab, blocks)


def apply_count(lab, router: str) -> float:
    """ApplyState calls the node manager carried out (its apply histogram's count)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{lab.metrics_port(router)}/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith("srv6pm_apply_seconds_count"):
                return float(line.split()[-1])
    return 0.0


def test_the_controller_derives_paths_identifiers_and_applies_them_over_mtls(api):
    sessions = {s["name"]: s for s in api.get("/v1/sessions")["items"]}
    assert sessions["h1-h2"]["path"] == {
        "forward": ["r1", "r2", "r3"],
        "reverse": ["r3", "r2", "r1"],
    }
    assert (sessions["h1-h2"]["sender_node"], sessions["h1-h2"]["reflector_node"]) == ("r1", "r3")
    assert (sessions["h2-h1"]["sender_node"], sessions["h2-h1"]["reflector_node"]) == ("r3", "r1")
    assert sessions["h1-h2"]["ssid"] != sessions["h2-h1"]["ssid"]
    assert sessions["h1-h2"]["flow_mon_ids"] == {
        "forward": sessions["h2-h1"]["flow_mon_ids"]["reverse"],
        "reverse": sessions["h2-h1"]["flow_mon_ids"]["forward"],
    }
    assert all(s["status"]["state"] == "applied" for s in sessions.values())
    assert sessions["h1-h2"]["period_s"] == 2.0
    nodes = {n["name"]: n for n in api.get("/v1/nodes")["items"]}
    assert all(n["reachable"] for n in nodes.values())
    assert nodes["r1"]["info"]["driver"] == "linux"


def test_node_managers_serving_mtls_answer_plain_http_health_probes(product_lab):
    # container and kubelet probes cannot present a client certificate
    for router in ("r1", "r2", "r3"):
        url = f"http://127.0.0.1:{product_lab.metrics_port(router)}/healthz"
        with urllib.request.urlopen(url) as r:
            assert r.status == 200
            health = json.load(r)
        assert (health["node"], health["grpc"]) == (router, "serving")
        assert health["journal_depth"] >= 0


def test_injected_loss_is_read_back_exactly_and_localised_to_its_segment(api, product_lab, blocks):
    block = inject_loss(product_lab, blocks)
    blocks.wait_readable(block)
    counted = {r: block_packets(product_lab, r, block) for r in ("r1", "r2", "r3")}

    forward = session_loss(api, "h1-h2", block)
    assert forward["forward"]["tx"] == counted["r1"]["to-h2"]
    assert forward["forward"]["rx"] == counted["r3"]["to-h2"]
    assert forward["forward"]["lost"] == FORWARD_DROPS
    assert forward["reverse"]["lost"] == REVERSE_DROPS
    other = session_loss(api, "h2-h1", block)  # the same flows, measured from r3
    assert (other["forward"]["lost"], other["reverse"]["lost"]) == (REVERSE_DROPS, FORWARD_DROPS)

    hops = session_hops(api, "h1-h2", block)
    assert hops["forward"]["path"] == ["r1", "r2", "r3"]
    assert [(s["src"], s["dst"], s["lost"]) for s in hops["forward"]["segments"]] == [
        ("r1", "r2", 0),
        ("r2", "r3", FORWARD_DROPS),
    ]
    assert [(s["src"], s["dst"], s["lost"]) for s in hops["reverse"]["segments"]] == [
        ("r3", "r2", 0),
        ("r2", "r1", REVERSE_DROPS),
    ]
    assert [c["packets"] for c in hops["forward"]["counts"]] == [
        counted[r]["to-h2"] for r in ("r1", "r2", "r3")
    ]
    assert hops["forward"]["end_to_end"] == FORWARD_DROPS


def test_a_threshold_is_violated_by_the_injected_loss_and_exported(
    api, controller, product_lab, blocks
):
    api.call(
        "PUT", "/v1/sessions/h1-h2/threshold", json={"loss_ratio_max": 0.01, "window_blocks": 3}
    )
    inject_loss(product_lab, blocks)
    deadline = time.monotonic() + WAIT_S
    while (state := api.get("/v1/sessions/h1-h2/threshold"))["state"] != "violated":
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    assert "forward loss ratio" in state["detail"]
    assert state["since"]
    _, body = controller.get("/metrics")
    assert 'srv6pm_threshold_violated{session="h1-h2"} 1.0' in body.decode()
    rules = yaml.safe_load(api.http.get("/v1/thresholds/grafana-alert-rules").text)
    titles = [r["title"] for g in rules["groups"] for r in g["rules"]]
    assert "srv6pm h1-h2: loss ratio above 1% over the last 3 blocks" in titles
    api.call("DELETE", "/v1/sessions/h1-h2/threshold")


def test_a_controller_killed_and_restarted_disturbs_no_measurement(
    api, controller, product_lab, blocks
):
    applies = {r: apply_count(product_lab, r) for r in ("r1", "r2", "r3")}
    controller.kill()
    block = inject_loss(product_lab, blocks)  # measured while the controller is down
    controller.start()
    before = time.time()
    deadline = time.monotonic() + WAIT_S
    while True:  # the restarted controller has checked every node
        nodes = api.get("/v1/nodes")["items"]
        if all(n["last_attempt"] and _epoch(n["last_attempt"]) > before for n in nodes):
            break
        assert time.monotonic() < deadline, nodes
        time.sleep(0.5)
    assert {r: apply_count(product_lab, r) for r in applies} == applies  # nothing re-applied
    assert all(s["status"]["state"] == "applied" for s in api.get("/v1/sessions")["items"])
    blocks.wait_readable(block)
    loss = session_loss(api, "h1-h2", block)
    assert (loss["forward"]["lost"], loss["reverse"]["lost"]) == (FORWARD_DROPS, REVERSE_DROPS)


def test_a_node_manager_restarted_empty_is_reapplied_and_measures_again(api, product_lab, blocks):
    product_lab.stop_node_manager("r2", kill=True)
    shutil.rmtree(product_lab.state_dir / "r2")  # a new machine: no desired state kept
    deadline = time.monotonic() + WAIT_S
    while api.get("/v1/nodes/r2")["reachable"]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    product_lab.start_node_manager("r2")
    wait_applied(api)
    deadline = time.monotonic() + WAIT_S
    while apply_count(product_lab, "r2") < 1:  # the controller re-applied its state
        assert time.monotonic() < deadline
        time.sleep(0.3)
    block = inject_loss(product_lab, blocks)
    blocks.wait_readable(block)
    hops = session_hops(api, "h1-h2", block)
    assert [s["lost"] for s in hops["forward"]["segments"]] == [0, FORWARD_DROPS]
    assert [s["lost"] for s in hops["reverse"]["segments"]] == [0, REVERSE_DROPS]


def _epoch(timestamp: str) -> float:
    parsed = datetime.fromisoformat(timestamp)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
