"""STAMP with VPP routers, through the node managers' gRPC API: r1 sends, r3 answers, probes on
h1-h2's SID list and replies on h2-h1's (the declared Return Path), with a VPP at either end
and at both. A VPP reflector answers in its plugin's srv6pm-reflect, a VPP sender's probes leave
from VPP into the session's SR policy; loss per block equals the injected drops exactly in both
directions, with each node's own counters in the Direct Measurement TLV."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from conftest import PERIOD_S, loss_of, loss_with_injected_drops, running_lab, stamp_results
from prometheus_client.parser import text_string_to_metric_families
from srv6pm.lab import scenario
from srv6pm.lab.lab import Lab
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]


# the VPP router(s) of each: the reflector (r3), the sender (r1), both
TOPOLOGIES = {
    "linux-to-vpp": "vpp-egress",
    "vpp-to-linux": "vpp-ingress",
    "vpp-to-vpp": "vpp-chain",
}


@pytest.fixture(scope="module", params=list(TOPOLOGIES))
def lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    with running_lab(
        request,
        pb.MARKING_MODE_ALTMARK,
        topology_name=TOPOLOGIES[request.param],
        prefix_start="ts",
    ) as instance:
        scenario.apply_states(instance, scenario.stamp_states(instance))
        yield instance


def vpp_routers(lab: Lab) -> list[str]:
    return [r for r in ("r1", "r3") if lab.topology.is_vpp(r)]


def reflector_stats(lab: Lab) -> pb.KernelReflectorStats:
    return scenario.stub(lab, "r3").ReadResults(pb.ReadResultsRequest()).kernel_reflector


def test_loss_per_block_equals_injected_drops_in_each_direction(lab, blocks):
    blocks.next()  # the session has probed at least one block before
    block, result = loss_with_injected_drops(lab, blocks)
    assert result.valid, result.reason
    # +1 each way: the previous block's probe and its reply, counted like any packet
    assert (result.forward.tx, result.forward.rx, result.forward.lost) == (101, 96, 5)
    assert (result.reverse.tx, result.reverse.rx, result.reverse.lost) == (61, 58, 3)
    for other in (block - 1, block + 1):
        r = loss_of(lab, other, blocks)
        assert r.valid, r.reason
        assert (r.forward.lost, r.reverse.lost) == (0, 0), other
    if lab.topology.routers["r3"].driver == "vpp":
        stats = reflector_stats(lab)
        assert stats.reflected > 0 and stats.received == stats.reflected
    assert stamp_results(lab).senders[0].received > 0


def test_the_reflector_is_in_the_node_managers_metrics(lab):
    """A VPP reflector's statistics as the node manager exports the data plane's reflector's;
    no userspace reflector runs beside it."""
    url = f"http://127.0.0.1:{lab.metrics_port('r3')}/metrics"
    deadline = time.monotonic() + 3 * PERIOD_S  # a probe a block
    while True:
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        values = {s.name: s.value for f in text_string_to_metric_families(body) for s in f.samples}
        data_plane = values["srv6pm_stamp_kernel_reflector_reflected_total"]
        userspace = values["srv6pm_stamp_reflector_reflected_total"]
        if data_plane + userspace > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert data_plane + userspace > 0
    if lab.topology.is_vpp("r3"):
        assert userspace == 0 and data_plane > 0
        assert values["srv6pm_stamp_kernel_reflector_received_total"] >= data_plane


def test_a_restarted_vpp_answers_and_sends_again(lab, blocks):
    """VPP restarted under a running session (its reflector, its sender, or both): the blocks
    around the restart are invalid or lost, the ones after it exact again."""
    for router in vpp_routers(lab):
        lab.restart_vpp(router)
    deadline = time.monotonic() + 20 * PERIOD_S
    while True:
        blocks.next()
        _, result = loss_with_injected_drops(lab, blocks)
        if result.valid:
            break
        assert time.monotonic() < deadline, f"no valid block since the restart: {result.reason}"
    assert (result.forward.lost, result.reverse.lost) == (5, 3)


def test_the_reflector_reads_back_as_applied(lab):
    """GetState gives the reflector as applied, whichever data plane answers (the controller
    compares it with what it wants)."""
    applied = scenario.stamp_states(lab)["r3"].reflector
    held = scenario.stub(lab, "r3").GetState(pb.GetStateRequest()).reflector
    assert (held.enabled, held.address, held.stateful) == (True, applied.address, True)
    assert [s.ssid for s in held.sessions] == [s.ssid for s in applied.sessions]
