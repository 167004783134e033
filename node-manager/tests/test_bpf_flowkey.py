"""The flow key Python computes (domain.flowkey) is the one the compiled programs fold a packet's
SID list into. Flows are installed by the real Monitor under Python's keys, hundreds of random
SID lists of 1 to 16 segments at a time, and a packet of each runs through BPF_PROG_TEST_RUN:
the programs look a flow up by its 64-bit key before they compare the SID list, so a packet is
counted for its flow, and for no other, only when C and Python folded the list to the same key.
A change to either side's hash (seed, multiplier, word order, SID order) fails here."""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bpf_harness import PASS, Programs
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from srv6pm.common.srv6 import MarkingMode, Role
from srv6pm.node_manager.domain.model import Marking, MonitoredFlow

pytestmark = pytest.mark.root

PERIOD_NS = 10**18  # one block for decades: the colour cannot change during a test
MONITORED, COLOUR = 0x04, 0x08  # Marking()'s DSCP bits

sid = st.integers(0, (1 << 128) - 1).map(lambda i: str(ipaddress.IPv6Address(i)))
# a flow: its SID list (travel order) and whether the head-end reduces it (H.Encaps.Red: the
# first SID only in the destination address, which the programs hash by another path)
flow_shape = st.tuples(st.lists(sid, min_size=1, max_size=16).map(tuple), st.booleans())
flow_sets = st.lists(flow_shape, min_size=4, max_size=12, unique_by=lambda f: f[0])


@pytest.fixture(scope="module")
def programs() -> Iterator[Programs]:
    root = Path("/run") / f"srv6pm-test-{secrets.token_hex(3)}" / "fs"
    instance = Programs(root, PERIOD_NS)
    try:
        yield instance
    finally:
        instance.close()


def packet(segments: tuple[str, ...], reduced: bool) -> bytes:
    """An encapsulated packet as a head-end sends it (RFC 8754: the SRH lists the last segment
    first; RFC 8986 section 5.2: H.Encaps.Red leaves the first SID out, and a single SID needs
    no SRH), DSCP-marked as monitored with colour 0."""
    listed = list(reversed(segments[1:] if reduced else segments))
    outer: Packet = IPv6(src="fcf0:12::1", dst=segments[0], tc=MONITORED)
    if listed:
        outer = outer / IPv6ExtHdrSegmentRouting(
            addresses=listed, segleft=len(segments) - 1, lastentry=len(listed) - 1
        )
    inner = IPv6(src="fd00:1::2", dst="fd00:2::2") / UDP(sport=1000, dport=9000) / Raw(bytes(64))
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / outer / inner)


def packets_by_flow(programs: Programs, names: list[str]) -> dict[str, tuple[int, int]]:
    counters = programs.monitor.read_counters(names)
    return {n: (c[0].packets, c[1].packets) for n, c in counters.items()}


def each_packet_is_counted_for_its_own_flow_only(
    programs: Programs, program: str, marking: Marking, role: Role, flows, colour: int
) -> None:
    installed = [
        MonitoredFlow(f"f{i}", segments, role, ("x",), 1 + i)
        for i, (segments, _) in enumerate(flows)
    ]
    programs.configure(marking, installed)
    names = [f.name for f in installed]
    before = packets_by_flow(programs, names)
    for flow, (segments, reduced) in zip(installed, flows, strict=True):
        assert programs.run(program, packet(segments, reduced)).verdict == PASS
        after = packets_by_flow(programs, names)
        moved = {n: after[n] for n in names if after[n] != before[n]}
        counted = list(before[flow.name])
        counted[colour] += 1
        assert moved == {flow.name: tuple(counted)}, (segments, reduced)
        before = after


@settings(max_examples=40, deadline=None)
@given(flows=flow_sets)
def test_the_ingress_finds_each_flow_under_the_key_python_installed_it_with(programs, flows):
    colour = (time.time_ns() // PERIOD_NS) % 2
    each_packet_is_counted_for_its_own_flow_only(
        programs, "srv6pm_mark", Marking(), Role.INGRESS, flows, colour
    )


@settings(max_examples=40, deadline=None)
@given(flows=flow_sets)
def test_dscp_transit_finds_each_flow_under_the_key_python_installed_it_with(programs, flows):
    # a counting hook sees SRv6 packets only: a single reduced SID (no SRH) is not one
    flows = [(segments, reduced and len(segments) > 1) for segments, reduced in flows]
    each_packet_is_counted_for_its_own_flow_only(
        programs, "srv6pm_count", Marking(mode=MarkingMode.DSCP), Role.TRANSIT, flows, colour=0
    )
