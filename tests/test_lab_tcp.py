"""TCP bulk transfers through the lab, counted per packet on the wire: whether segmentation
happens at the sending host, at any router's egress, or not at all (GSO skbs cross the whole
path), and whether a router merges segments again (GRO), every router counts what each host's
kernel sent, segment for segment, and loss is exactly what was dropped."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from conftest import Blocks, block_counts
from srv6pm.lab import scenario
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import FORWARD, H2, REVERSE
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]
ROUTERS = ("r1", "r2", "r3")
NBYTES = 20 << 20  # ~15,600 segments of 1,340 octets (h1's MTU is 1,400)
NO_SEGMENTATION = {"tso": False, "gso": False}


@pytest.fixture(
    scope="module", params=[pb.MARKING_MODE_ALTMARK, pb.MARKING_MODE_DSCP], ids=["altmark", "dscp"]
)
def marking_mode(request: pytest.FixtureRequest) -> pb.MarkingMode:
    return request.param


def totals(lab: Lab, router: str, first: int, last: int) -> dict[str, tuple[int, int]]:
    """Packets and bytes per flow over blocks first..last."""
    sums = {FORWARD: (0, 0), REVERSE: (0, 0)}
    for block in range(first, last + 1):
        for flow, (packets, octets) in block_counts(lab, router, block).items():
            sums[flow] = (sums[flow][0] + packets, sums[flow][1] + octets)
    return sums


@contextlib.contextmanager
def transfer_blocks(blocks: type[Blocks]) -> Iterator[list[int]]:
    """The blocks a transfer spans; readable once the block ends."""
    span = [blocks.next()]
    yield span
    span.append(blocks.current())
    blocks.wait_readable(span[-1])


# (node, peer, features): where segmentation is moved, or where GRO merges segments again
LINK_CASES = {
    "offloads-as-they-are": [],
    "segmented-by-h1": [("h1", "r1", NO_SEGMENTATION)],
    "segmented-at-r1-egress": [("r1", "r2", NO_SEGMENTATION)],
    "segmented-at-r2-egress": [("r2", "r3", NO_SEGMENTATION)],
    "segmented-at-r3-egress": [("r3", "h2", NO_SEGMENTATION)],
    "segmented-by-r1-merged-by-r2-gro": [
        ("r1", "r2", NO_SEGMENTATION),
        ("r2", "r1", {"gro": True}),
    ],
}


@pytest.mark.parametrize("case", LINK_CASES)
def test_tcp_is_counted_per_segment_wherever_it_is_segmented(lab, blocks, case):
    with contextlib.ExitStack() as stack:
        for node, peer, features in LINK_CASES[case]:
            stack.enter_context(lab.offloads(node, peer, **features))
        with transfer_blocks(blocks) as span:
            sent, received = lab.tcp_transfer("h1", "h2", H2, NBYTES)
    assert received.bytes == NBYTES
    counts = {router: totals(lab, router, *span) for router in ROUTERS}
    assert sent.segments > NBYTES // 1400  # every data segment, however the kernel batched them
    for router in ROUTERS:
        assert counts[router][FORWARD][0] == sent.segments, router
        assert counts[router][REVERSE][0] == received.segments, router
        # bytes as on the wire: each segment with its own headers, equal on every router
        assert counts[router][FORWARD][1] == counts["r1"][FORWARD][1], router
        assert counts[router][REVERSE][1] == counts["r1"][REVERSE][1], router
    assert counts["r1"][FORWARD][1] > NBYTES


def test_tcp_loss_is_exactly_the_segments_dropped(lab, blocks):
    # r1 cuts the GSO skbs it marked, so r2 forwards (and the drop rule sees) single segments.
    with lab.offloads("r1", "r2", **NO_SEGMENTATION), transfer_blocks(blocks) as span:
        # data segments only, spread out: a dropped SYN or a burst would stall TCP for seconds
        rule = lab.drop("r2", "r3", 25, dst=scenario.FORWARD_SIDS[1], min_length=1000, every=200)
        try:
            sent, received = lab.tcp_transfer("h1", "h2", H2, NBYTES)
            dropped = lab.drop_counters("r2")[rule.handle].dropped
        finally:
            lab.clear_drops("r2")
    assert received.bytes == NBYTES and dropped == 25
    r1, r2, r3 = (totals(lab, router, *span)[FORWARD][0] for router in ROUTERS)
    # every retransmission is a packet too: r1 counted all that h1 sent
    assert (r1, r1 - r2, r1 - r3) == (sent.segments, 0, 25)
    for block in range(span[0], span[1] + 1):
        per_router = [block_counts(lab, router, block)[FORWARD][0] for router in ROUTERS]
        assert per_router[0] == per_router[1] >= per_router[2], block
