"""The in-kernel STAMP reflector in a real lab: r3's node manager hooks it when its reflector is
enabled and unauthenticated. A third-party sender's base probes (stamp-suite on r1, no TLVs)
are answered in the kernel, decapsulated from the SRv6 policy and sent back along the declared
return path, counted at r3 as packets of both flows; our own sender's probes carry TLVs and
are still answered by the userspace reflector; an authenticated reflector takes the kernel's
hooks away."""

from __future__ import annotations

import pytest
from conftest import block_packets, run_sender
from srv6pm.lab import scenario
from srv6pm.lab.scenario import FORWARD, H1, H2, REVERSE, SESSION
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]

PROBES = 10


@pytest.fixture(scope="module")
def stamp_lab(lab):
    scenario.apply_states(lab, scenario.stamp_states(lab))
    yield lab
    scenario.apply(lab)


def reflector_stats(lab) -> pb.ReadResultsResponse:
    return scenario.stub(lab, "r3").ReadResults(pb.ReadResultsRequest(session=""))


def test_base_probes_are_answered_in_the_kernel_along_the_return_path(
    stamp_lab, blocks, stamp_suite
):
    lab = stamp_lab
    before = reflector_stats(lab)
    block = blocks.next()
    lab.send_udp("h1", H2, 50, interval=0.0005)
    lab.send_udp("h2", H1, 30, interval=0.0005)
    summary = run_sender(lab, stamp_suite, ["--count", str(PROBES), "--send-delay", "20ms"])
    assert (summary["packets_sent"], summary["packets_received"]) == (PROBES, PROBES)
    blocks.wait_readable(block)
    after = reflector_stats(lab)
    assert after.kernel_reflector.reflected - before.kernel_reflector.reflected == PROBES
    assert after.kernel_reflector.failed == 0
    # each probe and its reply are packets of the flows, counted where the data is: + our own
    # sender's probe of the block before, answered in userspace
    counted = block_packets(lab, "r3", block)
    assert (counted[FORWARD], counted[REVERSE]) == (50 + PROBES + 1, 30 + PROBES + 1)


def test_our_senders_probes_carry_tlvs_and_go_up_to_userspace(stamp_lab, blocks):
    lab = stamp_lab
    before = reflector_stats(lab)
    block = blocks.next()
    blocks.wait_readable(block + 1)  # the loss probe of `block` went out in block + 1
    after = reflector_stats(lab)
    answered = after.reflector.reflected - before.reflector.reflected
    assert answered >= 1
    assert after.kernel_reflector.passed_length - before.kernel_reflector.passed_length == answered
    loss = scenario.stub(lab, "r1").ReadResults(
        pb.ReadResultsRequest(session=SESSION, since_block=block)
    )
    assert any(r.block == block and r.valid for r in loss.loss)


R3_PEERS = ("r2", "h2")


def reflect_hooks(lab) -> list[str]:
    """r3's interfaces whose ingress holds the in-kernel reflector."""
    found = []
    for peer in R3_PEERS:
        interface = lab.interface("r3", peer)
        argv = ["tc", "filter", "show", "dev", interface, "ingress"]
        if "srv6pm_reflect" in lab.exec("r3", argv, capture_output=True, text=True).stdout:
            found.append(interface)
    return found


def test_an_authenticated_reflector_takes_the_kernel_out(stamp_lab, blocks):
    lab = stamp_lab
    every = [lab.interface("r3", peer) for peer in R3_PEERS]
    assert reflect_hooks(lab) == every
    key = bytes(range(32))
    scenario.apply_states(lab, scenario.stamp_states(lab, key, key))
    try:
        assert reflect_hooks(lab) == []
        before = reflector_stats(lab)
        block = blocks.next()
        blocks.wait_readable(block + 1)
        after = reflector_stats(lab)
        assert after.reflector.reflected > before.reflector.reflected  # by userspace, with HMAC
        assert after.kernel_reflector == before.kernel_reflector
    finally:
        scenario.apply_states(lab, scenario.stamp_states(lab))
    assert reflect_hooks(lab) == every
