"""Every policy and segment list between the same two routers, end to end through the
controller's REST API only: the diamond lab (r1 - r2 - r4, r1 - r3 - r4) whose node managers
serve mutual TLS only, real Kafka, InfluxDB and collector, the controller as its own process.
The operator creates three policies between r1 and r4 (one of two weighted segment lists, with
protection), a measurement profile and a session per policy, and reads back per segment list:
exact loss, delay apart per path, and the liveness changes of a cut, also in Prometheus."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Blocks, controller_settings, running_lab
from srv6pm.lab import diamond, drops
from srv6pm.lab.diamond import HASHED_SL1, VIA_R2, VIA_R3
from srv6pm.lab.fleet import Api, wait_applied
from srv6pm.lab.lab import Lab
from srv6pm.lab.pipeline import ResultsPipeline
from srv6pm.lab.servers import ControllerProcess
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]
WAIT_S = 30.0
DATA_SIZE, DATA_MIN_LENGTH = 400, 300  # data packets told from probes by length


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResultsPipeline]:
    with ResultsPipeline(tmp_path_factory.mktemp("pipeline")) as running:
        yield running


# Linux routers only, and r2 a VPP router (what `make demo` runs): the same results
@pytest.fixture(scope="module", params=["diamond", "diamond-vpp"])
def lab(request: pytest.FixtureRequest, pipeline: ResultsPipeline) -> Iterator[Lab]:
    with running_lab(
        request,
        pb.MARKING_MODE_ALTMARK,
        pipeline.node_manager_settings,
        tls=True,
        apply_scenario=False,
        topology_name=request.param,
    ) as instance:
        diamond.host_addresses(instance)
        instance.network.sysctl("r1", {"net.ipv6.fib_multipath_hash_policy": 1})
        yield instance


@pytest.fixture(scope="module")
def api(
    tmp_path_factory: pytest.TempPathFactory, lab: Lab, pipeline: ResultsPipeline
) -> Iterator[Api]:
    settings = controller_settings(lab, pipeline.influx.url)
    with ControllerProcess(tmp_path_factory.mktemp("controller"), settings) as controller:
        client = Api(controller.url, controller.token)
        diamond.register(client, lab)
        diamond.add_sessions(client)
        wait_applied(client)
        time.sleep(1.0)  # the sessions' first replies
        yield client
        client.close()


def waited(fetch: Any, ready: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = fetch()
        if ready(found):
            return found
        assert time.monotonic() < deadline, f"{what}: {found}"
        time.sleep(0.5)


def policy_loss(api: Api, policy: str, block: int, lists: int = 1) -> dict[str, Any]:
    """The policy's loss of `block` once each of its `lists` segment lists' records is in (each
    session's loss probe of a block comes at its own time)."""

    def complete(page: dict[str, Any]) -> bool:
        items = page["items"]
        return (
            bool(items)
            and items[0]["block"] == block
            and not any(t["not_measured"] for t in items[0]["total"].values())
            and len(items[0]["segment_lists"]) >= lists
        )

    page = waited(
        lambda: api.get(f"/v1/policies/{policy}/loss", after_block=block - 1, limit=1),
        complete,
        f"loss of {policy} in block {block}",
    )
    return dict(page["items"][0])


def test_the_controller_places_a_flow_and_a_session_per_segment_list(api: Api) -> None:
    sessions = {s["name"]: s for s in api.get("/v1/sessions", limit=100)["items"]}
    assert set(sessions) == {"via-r2", "via-r3", "hashed"}
    policies = {p["name"]: p for p in api.get("/v1/policies", limit=100)["items"]}
    lists = policies["hashed"]["segment_lists"]
    assert [(sl["name"], sl["segments"]) for sl in lists] == [
        ("sl0", list(diamond.HASHED_SL0.segments)),
        ("sl1", list(diamond.HASHED_SL1.segments)),
    ]
    # every policy's segment list its own FlowMonID, unique in the domain
    ids = [sl["flow_mon_id"] for p in policies.values() for sl in p["segment_lists"]]
    assert len(ids) == len(set(ids)) == 5


def test_loss_and_delay_per_segment_list_are_exact_and_apart(api: Api, lab: Lab) -> None:
    with lab.delay("r3", "r4", 20):
        block = Blocks.next()
        lab.drop("r2", "r4", 5, dst=VIA_R2.segments[-1], min_length=DATA_MIN_LENGTH)
        lab.drop("r3", "r4", 4, dst=HASHED_SL1.segments[-1], min_length=DATA_MIN_LENGTH)
        for address in (diamond.VIA_R2_ADDRESS, diamond.VIA_R3_ADDRESS):
            lab.send_udp("h1", address, 100, size=DATA_SIZE, interval=0.001)
        for _ in range(16):  # flows hashed by their ports over the two segment lists
            lab.send_udp("h1", diamond.HASHED_ADDRESS, 10, size=DATA_SIZE, interval=0.0005)
        time.sleep(max(0.0, Blocks.start(block + 1) - time.time()))
    lab.clear_drops("r2")
    lab.clear_drops("r3")
    lost = {p: policy_loss(api, p, block)["total"]["forward"]["lost"] for p in ("via-r2", "via-r3")}
    assert lost == {"via-r2": 5, "via-r3": 0}
    # on the segment they were dropped on, whichever data plane its routers have
    hops = api.get("/v1/sessions/via-r2/hops", block=block)
    forward = next(d for d in hops["directions"] if d["direction"] == "forward")
    lost_on = [(s["src"], s["dst"], s["lost"]) for s in forward["segments"]]
    assert lost_on == [("r1", "r2", 0), ("r2", "r4", 5)]
    hashed = policy_loss(api, "hashed", block, lists=2)
    per_list = {sl["segment_list"]: sl["forward"]["lost"] for sl in hashed["segment_lists"]}
    assert per_list == {"sl0": 0, "sl1": 4}
    assert (
        hashed["total"]["forward"]["lost"] == 4 and hashed["total"]["forward"]["segment_lists"] == 2
    )
    delays = {}
    for policy in ("via-r2", "via-r3"):
        page = waited(
            lambda p=policy: api.get(f"/v1/sessions/{p}/delay", after_block=block - 1, limit=1),
            lambda page: bool(page["items"]) and page["items"][0]["block"] == block,
            f"delay of {policy}",
        )
        delays[policy] = page["items"][0]["two_way"]
    assert delays["via-r3"]["p50_ns"] >= 20_000_000 > delays["via-r2"]["p99_ns"]
    # the profile's bins (1, 5, 20 ms): the delayed path's replies all at or above 20 ms
    histogram = delays["via-r3"]["histogram"]
    assert histogram["edges_ns"] == [1_000_000, 5_000_000, 20_000_000]
    assert histogram["counts"][-1] == delays["via-r3"]["samples"] > 0


def liveness_metric(lab: Lab, segment_list: str) -> float | None:
    url = f"http://127.0.0.1:{lab.metrics_port('r1')}/metrics"
    with urllib.request.urlopen(url) as reply:
        for line in reply.read().decode().splitlines():
            if (
                line.startswith("srv6pm_stamp_liveness_up{")
                and f'segment_list="{segment_list}"' in line
            ):
                return float(line.split()[-1])
    return None


def test_a_cut_is_a_liveness_change_of_exactly_its_segment_lists(api: Api, lab: Lab) -> None:
    since = time.time_ns()
    lab.drop("r3", "r4", drops.MAX_COUNT)
    try:
        waited(lambda: liveness_metric(lab, "sl1"), lambda v: v == 0.0, "sl1 down in /metrics")
        # the current state and the change as journaled (through Kafka to InfluxDB): both
        down = waited(
            lambda: api.get("/v1/policies/hashed/liveness", start=since),
            lambda page: (
                {c["segment_list"]: c["state"] for c in page["current"]}.get("sl1") == "down"
                and bool(page["changes"])
            ),
            "sl1 down through REST",
        )
        assert {c["segment_list"]: c["state"] for c in down["current"]} == {
            "sl0": "up",
            "sl1": "down",
        }
        assert [(c["segment_list"], c["state"]) for c in down["changes"]] == [("sl1", "down")]
    finally:
        lab.clear_drops("r3")
    changes = waited(
        lambda: api.get(f"/v1/sessions/{VIA_R3.policy}/liveness", start=since),
        lambda page: [c["state"] for c in page["changes"]] == ["down", "up"],
        "via-r3 down and up again",
    )["changes"]
    assert changes[0]["consecutive"] == diamond.DOWN_AFTER and changes[1]["previous"] == "down"
    waited(lambda: liveness_metric(lab, "sl1"), lambda v: v == 1.0, "sl1 up in /metrics")
