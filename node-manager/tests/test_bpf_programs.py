"""The compiled tc programs on crafted packets (BPF_PROG_TEST_RUN, real maps): every SRv6 shape,
GSO skbs counted as their segments, AltMark insertion, foreign marks, unattributed packets."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bpf_harness import PASS, NoHooks, Programs
from pyroute2 import IPRoute
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import (
    HBHOptUnknown,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrSegmentRouting,
)
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Raw
from srv6pm.common.srv6 import MarkingMode, Role
from srv6pm.node_manager.domain.model import Marking, MonitoredFlow
from srv6pm.node_manager.drivers.linux import maps
from srv6pm.node_manager.drivers.linux.bpftool import lookup
from srv6pm.node_manager.drivers.linux.monitor import Monitor

pytestmark = pytest.mark.root

PERIOD_NS = 10**18  # one block for decades: the colour cannot change during a test
R1, H1, H2 = "fcf0:12::1", "fd00:1::2", "fd00:2::2"
SIDS = ("fc00:0:2::e", "fc00:0:3::d6")  # travel order
FLOWMON = 0x5A5A5
SIXTEEN = tuple(f"fc00:0:{i:x}::e" for i in range(1, 17))


def colour() -> int:
    return (time.time_ns() // PERIOD_NS) % 2


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Programs]:
    root = Path("/run") / f"srv6pm-test-{secrets.token_hex(3)}" / "fs"
    instance = Programs(root, PERIOD_NS)
    try:
        yield instance
    finally:
        instance.close()


def flow(segments=SIDS, role=Role.INGRESS, flowmon=FLOWMON, name="f") -> MonitoredFlow:
    return MonitoredFlow(name, tuple(segments), role, ("x",), flowmon)


def srh(segments=SIDS, segleft=None, reduced=False) -> IPv6ExtHdrSegmentRouting:
    """SRH as a head-end writes it (RFC 8754: reversed); H.Encaps.Red leaves out the first SID."""
    listed = list(reversed(segments[1:] if reduced else segments))
    left = len(segments) - 1 if segleft is None else segleft
    return IPv6ExtHdrSegmentRouting(addresses=listed, segleft=left, lastentry=len(listed) - 1)


def inner(payload: int = 100) -> Packet:
    return IPv6(src=H1, dst=H2) / UDP(sport=1000, dport=9000) / Raw(bytes(payload))


def frame(*layers: Packet) -> Packet:
    """Built once and parsed back, so every length field is filled in."""
    packet: Packet = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    for layer in layers:
        packet = packet / layer
    return Ether(bytes(packet))


def encap(*ext: Packet, dst: str = SIDS[0], tc: int = 0) -> Packet:
    return frame(IPv6(src=R1, dst=dst, tc=tc), *ext, inner())


def altmark(flowmon: int, l_bit: int) -> IPv6ExtHdrDestOpt:
    data = (flowmon << 12 | l_bit << 11).to_bytes(4, "big")
    return IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x12, optlen=4, optdata=data)])


def delta(programs: Programs, before, name="f"):
    after = programs.counts(name)
    return tuple((a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True))


def stats_delta(programs: Programs, before) -> dict[str, int]:
    after = vars(programs.stats())
    return {k: v - vars(before)[k] for k, v in after.items() if v != vars(before)[k]}


def run_counted(programs: Programs, program: str, packet: Packet, **gso):
    before, stats = programs.counts("f"), programs.stats()
    run = programs.run(program, bytes(packet), **gso)
    return run, delta(programs, before), stats_delta(programs, stats)


# ---- ingress: AltMark insertion ---------------------------------------------------------------


def test_altmark_is_inserted_before_the_srh_and_the_packet_counted_once(programs):
    programs.configure(Marking(), [flow()])
    packet = encap(srh())
    run, counted, stats = run_counted(programs, "srv6pm_mark", packet)
    assert run.verdict == PASS
    out = Ether(run.packet)
    doh = out[IPv6].payload
    assert isinstance(doh, IPv6ExtHdrDestOpt) and doh.len == 0
    opt = doh.options[0]
    assert (opt.otype, opt.optlen) == (0x12, 4)
    word = int.from_bytes(opt.optdata, "big")
    assert (word >> 12, (word >> 11) & 1, (word >> 10) & 1, word & 0x3FF) == (
        FLOWMON,
        colour(),
        0,
        0,
    )
    assert out[IPv6].plen == packet[IPv6].plen + 8 and out[IPv6].tc == 0  # DSCP untouched
    assert bytes(doh.payload) == bytes(packet[IPv6].payload)  # SRH and customer packet intact
    expect = [(0, 0), (0, 0)]
    expect[colour()] = (1, len(packet) + 8)
    assert counted == tuple(expect)
    assert stats == {"counted": 1}


@pytest.mark.parametrize("tclass", [0x00, 0xB8, 0x04, 0x0B])  # BE, EF, DSCP 1, ECN bits set
def test_altmark_mode_never_changes_the_traffic_class(programs, tclass):
    programs.configure(Marking(), [flow()])
    run = programs.run("srv6pm_mark", bytes(encap(srh(), tc=tclass)))
    assert Ether(run.packet)[IPv6].tc == tclass


def test_a_hop_by_hop_header_stays_first_and_altmark_follows_it(programs):
    programs.configure(Marking(), [flow()])
    hbh = IPv6ExtHdrHopByHop(options=[HBHOptUnknown(otype=0x31, optlen=12, optdata=bytes(12))])
    packet = encap(hbh, srh())
    run, counted, _ = run_counted(programs, "srv6pm_mark", packet)
    out = Ether(run.packet)
    assert isinstance(out[IPv6].payload, IPv6ExtHdrHopByHop)
    assert bytes(out[IPv6ExtHdrHopByHop].options[0].optdata) == bytes(12)
    doh = out[IPv6ExtHdrHopByHop].payload
    assert isinstance(doh, IPv6ExtHdrDestOpt) and doh.options[0].otype == 0x12
    assert isinstance(doh.payload, IPv6ExtHdrSegmentRouting)
    assert counted[colour()][0] == 1


def test_single_sid_reduced_encapsulation_without_srh_is_marked(programs):
    programs.configure(Marking(), [flow(segments=(SIDS[1],))])
    packet = frame(IPv6(src=R1, dst=SIDS[1]), inner())
    run, counted, _ = run_counted(programs, "srv6pm_mark", packet)
    doh = Ether(run.packet)[IPv6].payload
    assert isinstance(doh, IPv6ExtHdrDestOpt) and isinstance(doh.payload, IPv6)
    assert counted[colour()][0] == 1


def test_reduced_encapsulation_matches_with_the_first_sid_in_the_destination(programs):
    programs.configure(Marking(), [flow(segments=SIDS)])
    packet = encap(srh(reduced=True))
    _, counted, _ = run_counted(programs, "srv6pm_mark", packet)
    assert counted[colour()][0] == 1


def test_sixteen_sids_are_matched_and_seventeen_are_a_parse_error(programs):
    programs.configure(Marking(), [flow(segments=SIXTEEN)])
    _, counted, _ = run_counted(programs, "srv6pm_mark", encap(srh(SIXTEEN), dst=SIXTEEN[0]))
    assert counted[colour()][0] == 1
    seventeen = (*SIXTEEN, "fc00:0:99::e")
    _, counted, stats = run_counted(programs, "srv6pm_mark", encap(srh(seventeen)))
    assert counted == ((0, 0), (0, 0)) and stats == {"parse_error": 1}


def test_a_packet_already_carrying_altmark_is_foreign_and_not_counted(programs):
    programs.configure(Marking(), [flow()])
    packet = encap(altmark(77, 1), srh())
    run, counted, stats = run_counted(programs, "srv6pm_mark", packet)
    assert run.packet == bytes(packet)
    assert counted == ((0, 0), (0, 0)) and stats == {"foreign_mark": 1}


def test_another_sid_list_is_left_alone_and_counted_as_no_flow(programs):
    programs.configure(Marking(), [flow()])
    packet = encap(srh(("fc00:0:2::e", "fc00:0:9::d6")))
    run, counted, stats = run_counted(programs, "srv6pm_mark", packet)
    assert run.packet == bytes(packet) and counted == ((0, 0), (0, 0))
    assert stats == {"no_flow": 1}


def test_gso_packets_cannot_be_marked_in_test_run_and_say_so(programs):
    # BPF_PROG_TEST_RUN cannot give an skb a TCP GSO type, so the kernel refuses to resize it:
    # the program must leave it unmarked and uncounted, and count the failure.
    programs.configure(Marking(), [flow()])
    run, counted, stats = run_counted(
        programs, "srv6pm_mark", encap(srh()), gso_segs=10, gso_size=100
    )
    assert run.verdict == PASS and counted == ((0, 0), (0, 0))
    assert stats == {"mark_failed": 10}


@pytest.fixture
def small_mtu_device() -> Iterator[int]:
    """A veth whose MTU is 1280, to run the programs as if sending on it; its ifindex."""
    name = f"sm{secrets.token_hex(4)}"
    with IPRoute() as ipr:
        ipr.link("add", ifname=name, kind="veth", peer=f"{name}p")
        index = ipr.link_lookup(ifname=name)[0]
        try:
            ipr.link("set", index=index, mtu=1280)
            yield index
        finally:
            ipr.link("del", index=index)


def test_a_packet_the_option_would_take_over_the_mtu_goes_out_unmarked(programs, small_mtu_device):
    programs.configure(Marking(), [flow()])
    base = len(encap(srh())) - 14  # IPv6 packet without payload growth
    fits = encap(srh())  # the inner payload is small
    run, counted, stats = run_counted(programs, "srv6pm_mark", fits, ifindex=small_mtu_device)
    assert len(run.packet) == len(fits) + 8 and stats == {"counted": 1}
    pad = 1280 - 8 - base + 1  # one octet too many once the option is in
    too_big = frame(IPv6(src=R1, dst=SIDS[0]), srh(), inner(100 + pad))
    assert len(too_big) - 14 == 1280 - 8 + 1
    run, counted, stats = run_counted(programs, "srv6pm_mark", too_big, ifindex=small_mtu_device)
    assert run.packet == bytes(too_big) and counted == ((0, 0), (0, 0))
    assert stats == {"mark_failed": 1}


# ---- ingress: DSCP mode ----------------------------------------------------------------------


def test_dscp_mode_sets_the_two_traffic_class_bits_and_counts_gso_segments(programs):
    programs.configure(Marking(mode=MarkingMode.DSCP), [flow()])
    packet = encap(srh(), tc=0x80 | 0x08)  # CS4 with the colour bit already set
    run, counted, _ = run_counted(programs, "srv6pm_mark", packet, gso_segs=7, gso_size=60)
    out = Ether(run.packet)
    assert out[IPv6].tc == 0x80 | 0x04 | (0x08 if colour() else 0)
    assert len(run.packet) == len(packet)
    assert counted[colour()][0] == 7


# ---- transit and egress ----------------------------------------------------------------------


def transit(**kw):
    return flow(role=Role.TRANSIT, **kw)


def test_transit_counts_by_flowmon_id_and_the_l_flag(programs):
    programs.configure(Marking(), [transit()])
    for l_bit in (0, 1, 1):
        packet = encap(altmark(FLOWMON, l_bit), srh())
        before = programs.counts("f")
        assert programs.run("srv6pm_count", bytes(packet)).packet == bytes(packet)
        got = delta(programs, before)
        assert got[l_bit] == (1, len(packet)) and got[1 - l_bit] == (0, 0)


def test_transit_counts_a_gso_skb_as_its_segments_with_their_headers(programs):
    programs.configure(Marking(), [transit()])
    payload = 100 * 30 - 1  # 30 segments, the last one shorter (test runs take < 4 KiB)
    packet = frame(
        IPv6(src=R1, dst=SIDS[0]),
        altmark(FLOWMON, 0),
        srh(),
        IPv6(src=H1, dst=H2),
        TCP(sport=1, dport=2, flags="A", options=[("NOP", None)] * 12),
        Raw(bytes(payload)),
    )
    headers = len(packet) - payload  # Ethernet .. TCP with its 12 octets of options
    _, counted, stats = run_counted(programs, "srv6pm_count", packet, gso_segs=30, gso_size=100)
    assert counted[0] == (30, len(packet) + 29 * headers)
    assert stats == {"counted": 30}


def test_a_gso_skb_left_without_a_segment_count_is_counted_from_its_size(programs):
    programs.configure(Marking(), [transit()])
    payload = 1000 * 3 + 1
    packet = frame(
        IPv6(src=R1, dst=SIDS[0]),
        altmark(FLOWMON, 1),
        srh(),
        IPv6(src=H1, dst=H2),
        UDP(),
        Raw(bytes(payload)),
    )
    _, counted, _ = run_counted(programs, "srv6pm_count", packet, gso_segs=0, gso_size=1000)
    assert counted[1][0] == 4


def test_marks_are_found_behind_other_extension_headers(programs):
    programs.configure(Marking(), [transit()])
    hbh = IPv6ExtHdrHopByHop(options=[HBHOptUnknown(otype=0x31, optlen=4, optdata=bytes(4))])
    ioam_like = IPv6ExtHdrDestOpt(
        options=[
            HBHOptUnknown(otype=0x11, optlen=6, optdata=bytes(6)),
            HBHOptUnknown(
                otype=0x12, optlen=4, optdata=(FLOWMON << 12 | 1 << 11).to_bytes(4, "big")
            ),
        ]
    )
    _, counted, _ = run_counted(programs, "srv6pm_count", encap(hbh, ioam_like, srh()))
    assert counted[1][0] == 1


def test_what_transit_cannot_attribute_is_counted_by_reason(programs):
    programs.configure(Marking(), [transit()])
    cases = {
        "no_flow": encap(altmark(FLOWMON + 1, 0), srh()),
        "unmarked": encap(srh()),
        "not_srv6": frame(ARP()),
        "parse_error": Ether(bytes(encap(srh()))[:70]),
    }
    for reason, packet in cases.items():
        _, counted, stats = run_counted(programs, "srv6pm_count", packet)
        assert counted == ((0, 0), (0, 0)) and stats == {reason: 1}, reason


def test_an_ingress_flowmon_id_is_not_counted_downstream(programs):
    programs.configure(Marking(), [flow()])
    _, counted, stats = run_counted(programs, "srv6pm_count", encap(altmark(FLOWMON, 0), srh()))
    assert counted == ((0, 0), (0, 0)) and stats == {"no_flow": 1}


def test_dscp_mode_transit_counts_by_sid_list_and_colour_bit(programs):
    programs.configure(Marking(mode=MarkingMode.DSCP), [transit(flowmon=0)])
    _, counted, _ = run_counted(programs, "srv6pm_count", encap(srh(), tc=0x04 | 0x08))
    assert counted[1][0] == 1
    _, counted, stats = run_counted(programs, "srv6pm_count", encap(srh(), tc=0xB8))
    assert counted == ((0, 0), (0, 0)) and stats == {"unmarked": 1}


def test_dscp_mode_transit_counts_a_single_sid_policy_without_srh(programs):
    """VPP's H.Encaps of one SID, like H.Encaps.Red, carries no SRH: the SID is the
    destination."""
    programs.configure(Marking(mode=MarkingMode.DSCP), [transit(flowmon=0, segments=(SIDS[1],))])
    packet = frame(IPv6(src=R1, dst=SIDS[1], tc=0x04), inner())
    _, counted, _ = run_counted(programs, "srv6pm_count", packet)
    assert counted[0][0] == 1
    guarded = programs.run("srv6pm_guard", bytes(packet))
    assert Ether(guarded.packet)[IPv6].tc == 0


# ---- domain boundary -------------------------------------------------------------------------


def test_the_guard_turns_a_foreign_altmark_into_padding(programs):
    programs.configure(Marking(boundary_interfaces=("x",)), [transit()])
    packet = encap(altmark(FLOWMON, 1), srh())
    run = programs.run("srv6pm_guard", bytes(packet))
    out = Ether(run.packet)
    opt = out[IPv6ExtHdrDestOpt].options[0]
    assert (opt.otype, opt.optlen, bytes(opt.optdata)) == (0x01, 4, bytes(4))
    assert len(run.packet) == len(packet)
    # downstream, the neutralised packet is not ours
    _, counted, stats = run_counted(programs, "srv6pm_count", out)
    assert counted == ((0, 0), (0, 0)) and stats == {"unmarked": 1}


def test_the_guard_clears_foreign_dscp_marks_of_srv6_packets_only(programs):
    programs.configure(Marking(mode=MarkingMode.DSCP), [transit(flowmon=0)])
    marked = programs.run("srv6pm_guard", bytes(encap(srh(), tc=0x80 | 0x04 | 0x08)))
    assert Ether(marked.packet)[IPv6].tc == 0x80
    plain = frame(IPv6(src=H1, dst=H2, tc=0x04), UDP())
    assert programs.run("srv6pm_guard", bytes(plain)).packet == bytes(plain)


# ---- restart ---------------------------------------------------------------------------------


def test_a_restarted_monitor_finds_its_marking_and_leaves_the_config_as_it_was(programs):
    marking = Marking(mode=MarkingMode.DSCP, monitored_bit=0x10, colour_bit=0x20)
    programs.configure(marking, [transit(flowmon=0)])
    config = programs.root / "bpf" / f"maps-v{maps.LAYOUT}" / maps.CONFIG
    written = lookup(config, maps.INDEX.pack(0), maps.CONFIG_VALUE.size)
    assert written is not None
    assert maps.parse_config(written)[3:] == (0x10, 0x20, maps.Mode.DSCP)
    again = Monitor(programs.root / "bpf", programs.root.parent / "state", NoHooks(), PERIOD_NS)  # type: ignore[arg-type]
    assert again.marking() == marking
    assert lookup(config, maps.INDEX.pack(0), maps.CONFIG_VALUE.size) == written  # not rewritten
