"""STAMP with VPP routers, through the node managers' gRPC API: r1 sends, r3 answers, probes on
h1-h2's SID list and replies on h2-h1's (the declared Return Path), with a VPP at either end
and at both. A VPP reflector answers in its plugin's srv6pm-reflect, a VPP sender's probes leave
from VPP into the session's SR policy; loss per block equals the injected drops exactly in both
directions, with each node's own counters in the Direct Measurement TLV."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import loss_of, loss_with_injected_drops, running_lab, stamp_results
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
