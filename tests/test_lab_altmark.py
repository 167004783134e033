"""RFC 9343 AltMark on real Linux SRv6 routers: the option the ingress inserts crosses End,
End.X and plain IPv6 forwarding untouched, is gone after End.DT6 decapsulation, and flows of
every SRv6 shape (H.Encaps, H.Encaps.Red with one SID and no SRH, End.X) are counted exactly.
Packets arriving from outside the domain already marked are never counted as ours."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import block_packets
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting
from scapy.utils import rdpcap
from srv6pm.lab import scenario
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import FORWARD, H2
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

pytestmark = [pytest.mark.root, pytest.mark.slow]
ROUTERS = ("r1", "r2", "r3")
ALTMARK = 0x12
END_X = "fc00:0:2::e1"  # r2: End.X toward r3
H2_VIA_END_X, H2_REDUCED = "fd00:2::3", "fd00:2::4"
SHAPES = {  # flow -> (h2 address, SID list, mode, FlowMonID)
    "end-x": (H2_VIA_END_X, (END_X, "fc00:0:3::d6"), pb.ENCAP_MODE_ENCAP, 11),
    "reduced-one-sid": (H2_REDUCED, ("fc00:0:3::d6",), pb.ENCAP_MODE_ENCAP_RED, 12),
}


@contextlib.contextmanager
def capture(lab: Lab, node: str, peer: str, path: Path, count: int) -> Iterator[list]:
    """The first `count` IPv6 packets `node` receives from `peer` (tshark), read at exit."""
    argv = ["tshark", "-q", "-i", lab.kernel_interface(node, peer), "-f", "ip6 and not icmp6"]
    proc = lab.popen(
        node, [*argv, "-c", str(count), "-w", str(path)], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # tshark says when the capture is open
        if "Capturing on" in line:
            break
    packets: list = []
    try:
        yield packets
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    packets.extend(rdpcap(str(path)))


def altmark_words(packet) -> list[int]:
    """The AltMark option data of the Destination Options headers before the SRH."""
    words, layer = [], packet[IPv6].payload
    while isinstance(layer, IPv6ExtHdrDestOpt):
        words += [int.from_bytes(o.optdata, "big") for o in layer.options if o.otype == ALTMARK]
        layer = layer.payload
    return words


@pytest.mark.parametrize("tclass", [0x00, 0xB8, 0x05])  # best effort, EF, DSCP 1 with ECT(1)
def test_the_option_crosses_end_and_is_gone_after_end_dt6(lab, blocks, tmp_path, tclass):
    block = blocks.next()
    with (
        capture(lab, "r3", "r2", tmp_path / "r2-r3.pcap", 5) as core,
        capture(lab, "h2", "r3", tmp_path / "h2.pcap", 5) as delivered,
    ):
        lab.send_udp("h1", H2, 5, interval=0.01, tclass=tclass)
    blocks.wait_readable(block)
    assert [block_packets(lab, router, block)[FORWARD] for router in ROUTERS] == [5, 5, 5]
    assert len(core) == len(delivered) == 5
    for packet in core:  # after r2's End: the next SID is active, the option still first
        assert packet[IPv6].dst == scenario.FORWARD_SIDS[1]
        assert packet[IPv6].tc == tclass  # H.Encaps copied it; marking left it alone
        assert isinstance(packet[IPv6].payload, IPv6ExtHdrDestOpt)
        assert isinstance(packet[IPv6].payload.payload, IPv6ExtHdrSegmentRouting)
        (word,) = altmark_words(packet)
        assert word >> 12 == scenario.FLOWMON_IDS[FORWARD] and word & 0x3FF == 0
    for packet in delivered:  # the customer's packet, as h1 sent it
        assert packet[IPv6].nh == 17 and isinstance(packet[IPv6].payload, UDP)
        assert packet[IPv6].tc == tclass


@pytest.fixture(scope="module")
def more_shapes(lab: Lab) -> Iterator[None]:
    """h2 addresses reached over End.X and over a one-SID H.Encaps.Red policy, monitored."""
    states = scenario.desired_states(lab)
    states["r2"].local_sids.add(sid=END_X, behaviour=pb.BEHAVIOUR_END_X, nexthop="fcf0:23::3")
    roles = {
        "r1": records_pb2.ROLE_INGRESS,
        "r2": records_pb2.ROLE_TRANSIT,
        "r3": records_pb2.ROLE_EGRESS,
    }
    peers = {"r1": "r2", "r2": "r1", "r3": "r2"}
    for name, (address, sids, mode, flowmon) in SHAPES.items():
        states["r1"].policies.add(name=name, prefix=f"{address}/128", segments=sids, mode=mode)
        for router, role in roles.items():
            states[router].flows.add(
                name=name,
                segments=sids,
                role=role,
                interfaces=[lab.interface(router, peers[router])],
                flow_mon_id=flowmon,
            )
    for address, *_ in SHAPES.values():
        h2_if = lab.kernel_interface("h2", "r3")
        lab.exec("h2", ["ip", "-6", "addr", "add", f"{address}/128", "dev", h2_if], check=True)
    scenario.apply_states(lab, states)
    try:
        yield
    finally:
        scenario.apply(lab)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_srv6_shape_is_counted_exactly_on_every_router(lab, blocks, more_shapes, shape):
    address = SHAPES[shape][0]
    block = blocks.next()
    with lab.receive_udp("h2", port=9001, idle=1.0) as receiver:
        lab.send_udp("h1", address, 150, port=9001, interval=0.001)
        received = receiver.result()
    blocks.wait_readable(block)
    assert received.received == 150
    for router in ROUTERS:
        assert block_packets(lab, router, block)[shape] == 150, router


def test_marks_from_outside_the_domain_never_make_a_node_count_more_than_the_ingress(lab, blocks):
    """h1 sends its own SRv6 packets with our SID list and our FlowMonID, as a spoofer would.
    At r1's boundary interface the option is neutralised: r2 and r3 count only what r1 marked
    itself (here r1 takes them for traffic of its policy, which they follow), never the
    spoofed mark."""
    states = scenario.desired_states(lab)
    states["r1"].marking.boundary_interfaces.append(lab.interface("r1", "h1"))
    scenario.apply_states(lab, states)
    flowmon = scenario.FLOWMON_IDS[FORWARD]
    spoof = (
        "from scapy.all import send\n"
        "from scapy.layers.inet import UDP\n"
        "from scapy.layers.inet6 import *\n"
        f"opt = HBHOptUnknown(otype=0x12, optlen=4, optdata=({flowmon} << 12).to_bytes(4, 'big'))\n"
        f"p = IPv6(dst='{scenario.FORWARD_SIDS[0]}') / IPv6ExtHdrDestOpt(options=[opt]) / "
        f"IPv6ExtHdrSegmentRouting(addresses={list(reversed(scenario.FORWARD_SIDS))!r}, "
        f"segleft=1) / IPv6(dst='{H2}') / UDP(dport=9000)\n"
        "send(p, count=40, verbose=False)\n"
    )
    try:
        before = scenario.stub(lab, "r1").ReadCounters(pb.ReadCountersRequest()).stats
        block = blocks.next()
        lab.exec("h1", [sys.executable, "-c", spoof], check=True)
        blocks.wait_readable(block)
        after = scenario.stub(lab, "r1").ReadCounters(pb.ReadCountersRequest()).stats
    finally:
        scenario.apply(lab)
    assert after.foreign_mark - before.foreign_mark == 40
    counts = [block_packets(lab, router, block)[FORWARD] for router in ROUTERS]
    assert counts == [40, 40, 40]
