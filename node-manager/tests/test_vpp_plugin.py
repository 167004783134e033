"""srv6pm's VPP plugin on a real VPP, through its binary API, with packets on the wire.

h1 - r (VPP) - h2: r steers h2's loopback address into an SR policy toward h2's End.DT6 SID (a
Linux seg6local route), so packets from h1 leave r encapsulated. The plugin marks them at r's
ip6-output (ingress role) and counts what h1 sends already encapsulated at r's ip6-unicast
(transit role). What h2 receives is decoded from the wire.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

import pytest
from srv6pm.lab import Lab, Topology
from srv6pm.lab.vpp import VPP_API_FILES, VppProcess, srv6pm_plugin_dir
from srv6pm.node_manager.drivers.base import PacketStats
from vpp_papi import VPPApiClient

pytestmark = pytest.mark.root

SID = "fc00:2::e"
TARGET = "fd00:3::2"  # h2's loopback, steered into the policy
PERIOD_NS = 2_000_000_000
SEGMENTS = [SID] + ["::"] * 15  # the API's fixed array of 16
SEND = r"""
import sys
from scapy.all import Ether, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting, UDP, Raw, sendp
from scapy.layers.inet6 import HBHOptUnknown, PadN
iface, dst_mac, kind = sys.argv[1:4]
count, word = int(sys.argv[4]), int(sys.argv[5])
inner = IPv6(src="fd00:1::2", dst="fd00:3::2") / UDP(sport=4000, dport=5000) / Raw(b"x" * 100)
srh = IPv6ExtHdrSegmentRouting(addresses=["fc00:2::e"], segleft=0, lastentry=0)
outer = IPv6(src="fd00:1::2", dst="fc00:2::e")
opt = HBHOptUnknown(otype=0x12, optdata=word.to_bytes(4, "big"))
if kind == "plain":
    pkt = IPv6(src="fd00:1::2", dst="fd00:3::2") / UDP(sport=4000, dport=5000) / Raw(b"x" * 100)
elif kind == "marked":
    pkt = outer / IPv6ExtHdrDestOpt(options=[opt]) / srh / inner
elif kind == "unmarked":
    pkt = outer / srh / inner
elif kind == "long":  # DSCP-marked (Traffic Class `word`), a 5-SID list, the first SID active
    sids = ["fc00:2::1", "fc00:2::2", "fc00:2::3", "fc00:2::4", "fc00:2::5"]  # travel order
    srh = IPv6ExtHdrSegmentRouting(addresses=sids[::-1], segleft=4, lastentry=4)
    pkt = IPv6(src="fd00:1::2", dst=sids[0], tc=word) / srh / inner
elif kind == "truncated":
    srh_of_24_octets_cut_at_16 = bytes([41, 2, 4, 0, 0, 0, 0, 0]) + bytes(8)
    pkt = IPv6(src="fd00:1::2", dst="fc00:2::e", nh=43) / Raw(srh_of_24_octets_cut_at_16)
sendp([Ether(dst=dst_mac) / pkt] * count, iface=iface, verbose=False)
"""
SNIFF = r"""
import sys, json
from scapy.all import sniff
frames = sniff(iface=sys.argv[1], timeout=float(sys.argv[2]),
               lfilter=lambda p: p.haslayer("IPv6") and p["IPv6"].nh not in (0, 58))  # ND, MLD
print(json.dumps([bytes(f).hex() for f in frames]))
"""


# The project's lab builds the namespaces, veths and VPP (af_packet, addresses, neighbours).
TOPOLOGY = """
name: vpp-plugin
routers:
  r: {grpc_port: 1, driver: vpp}
hosts:
  h1: {}
  h2: {}
links:
  - ends: {h1: "fd00:1::2/64", r: "fd00:1::1/64"}
  - ends: {r: "fd00:2::1/64", h2: "fd00:2::2/64"}
"""


@dataclass
class Bench:
    lab: Lab
    api: Any
    r_mac: str

    @property
    def vpp(self) -> VppProcess:
        return self.lab.vpp("r")

    def run(self, node: str, argv: list[str]) -> str:
        r = self.lab.network.exec(node, argv, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return str(r.stdout)

    def send(self, kind: str, count: int, word: int = 0) -> None:
        iface = self.lab.kernel_interface("h1", "r")
        self.run("h1", [sys.executable, "-c", SEND, iface, self.r_mac, kind, str(count), str(word)])

    def sniff(self, seconds: float) -> subprocess.Popen[str]:
        iface = self.lab.kernel_interface("h2", "r")
        argv = [sys.executable, "-c", SNIFF, iface, str(seconds)]
        proc = self.lab.network.popen("h2", argv, stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)  # scapy's socket is open
        return proc

    def captured(self, sniffer: subprocess.Popen[str]) -> list[bytes]:
        return [bytes.fromhex(h) for h in json.loads(sniffer.communicate()[0])]

    def configure(self, mode: int = 1, monitored_bit: int = 0, colour_bit: int = 0) -> None:
        reply = self.api.srv6pm_config_set(
            period_ns=PERIOD_NS, mode=mode, monitored_bit=monitored_bit, colour_bit=colour_bit
        )
        self.check(reply)

    def add_flow(self, slot: int, role: int, flowmon_id: int) -> None:
        reply = self.api.srv6pm_flow_add_del(
            is_add=True, slot=slot, role=role, flowmon_id=flowmon_id, n_segments=1,
            segments=SEGMENTS,
        )  # fmt: skip
        self.check(reply)

    def hook(self, peer: str, hook: int) -> int:
        """Enable `hook` on r's interface toward `peer`; its sw_if_index."""
        name = self.lab.interface("r", peer)
        index = next(
            i.sw_if_index for i in self.api.sw_interface_dump() if i.interface_name == name
        )
        self.check(
            self.api.srv6pm_interface_enable_disable(sw_if_index=index, hook=hook, enable=True)
        )
        return int(index)

    def counters(self, slot: int) -> tuple[tuple[int, int], tuple[int, int]]:
        rows = self.api.srv6pm_counters_dump(slot=slot)
        assert len(rows) == 1
        return (rows[0].packets[0], rows[0].bytes[0]), (rows[0].packets[1], rows[0].bytes[1])

    def stats(self) -> dict[str, int]:
        r = self.api.srv6pm_stats_get()
        return {f.name: getattr(r, f.name) for f in fields(PacketStats)}

    def check(self, reply: Any) -> None:
        assert reply.retval == 0, reply


@pytest.fixture
def bench() -> Iterator[Bench]:
    lab = Lab(Topology.parse(TOPOLOGY), prefix=f"vp{secrets.token_hex(3)}")
    api = None
    try:
        lab.up(start_node_managers=False)
        h2 = lab.kernel_interface("h2", "r")
        for argv in (
            ["ip", "-6", "addr", "add", f"{TARGET}/128", "dev", "lo"],
            ["sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1"],
            ["sysctl", "-qw", f"net.ipv6.conf.{h2}.seg6_enabled=1"],
            ["ip", "-6", "route", "add", f"{SID}/128", "encap", "seg6local", "action", "End.DT6",
             "table", "254", "dev", h2],
        ):  # fmt: skip
            lab.network.exec("h2", argv, check=True, capture_output=True)
        vpp = lab.vpp("r")
        toward_h2 = lab.interface("r", "h2")
        vpp.cli(
            f"ip route add fc00:2::/48 via fd00:2::2 {toward_h2}",
            f"ip route add fd00:3::/64 via fd00:2::2 {toward_h2}",
            f"sr policy add bsid fc00:ff::1 next {SID} encap",
            f"sr steer l3 {TARGET}/128 via bsid fc00:ff::1",
        )
        files = [*glob.glob(f"{VPP_API_FILES}/**/*.api.json", recursive=True)]
        files.append(str(srv6pm_plugin_dir() / "srv6pm.api.json"))
        api = VPPApiClient(apifiles=files, server_address=str(vpp.sockets.api))
        api.connect("srv6pm-test")
        hw = vpp.cli(f"show hardware-interfaces {lab.interface('r', 'h1')}")
        r_mac = next(
            w for line in hw.splitlines() if "Ethernet address" in line for w in line.split()[-1:]
        )
        yield Bench(lab, api.api, r_mac)
    finally:
        if api is not None:
            api.disconnect()
        lab.down()


def wait_block_start(margin_s: float = 1.2) -> None:
    """Sleep until at least `margin_s` of the current block is left."""
    left = (PERIOD_NS - time.time_ns() % PERIOD_NS) / 1e9
    if left < margin_s:
        time.sleep(left + 0.05)


def test_ingress_marks_exactly_like_the_kernel_path_and_counts(bench: Bench) -> None:
    b = bench
    b.configure()
    b.add_flow(7, role=1, flowmon_id=0xABCDE)
    b.hook("h2", 1)
    sniffer = b.sniff(4.0)
    wait_block_start()
    colour = (time.time_ns() // PERIOD_NS) % 2
    b.send("plain", 25)
    frames = b.captured(sniffer)
    assert len(frames) == 25
    for f in frames:
        ip = f[14:]
        assert ip[6] == 60  # Destination Options right after the IPv6 header
        doh = ip[40:48]
        word = (0xABCDE << 12) | (colour << 11)
        # VPP's H.Encaps of a single SID has no SRH: the inner packet follows
        assert doh == bytes([41, 0, 0x12, 4]) + word.to_bytes(4, "big")
        assert ip[48] >> 4 == 6
        assert int.from_bytes(ip[4:6], "big") == len(ip) - 40
    counts = b.counters(7)
    frame_len = len(frames[0])
    assert counts[colour] == (25, 25 * frame_len)
    assert counts[1 - colour] == (0, 0)
    assert b.stats()["counted"] == 25
    # the same flow again: slot reused, counters from zero; removed: no longer counted
    b.add_flow(7, role=1, flowmon_id=0xABCDE)
    assert b.counters(7) == ((0, 0), (0, 0))
    b.check(b.api.srv6pm_flow_add_del(is_add=False, slot=7, segments=SEGMENTS))
    b.send("plain", 3)
    time.sleep(0.5)
    assert b.stats()["no_flow"] == 3
    assert b.api.srv6pm_counters_dump(slot=7) == []


def test_dscp_mode_marks_the_traffic_class(bench: Bench) -> None:
    b = bench
    b.configure(mode=2, monitored_bit=4, colour_bit=8)
    b.add_flow(0, role=1, flowmon_id=5)
    b.hook("h2", 1)
    sniffer = b.sniff(3.0)
    wait_block_start()
    colour = (time.time_ns() // PERIOD_NS) % 2
    b.send("plain", 10)
    frames = b.captured(sniffer)
    assert len(frames) == 10
    for f in frames:
        ip = f[14:]
        tc = ((ip[0] & 0x0F) << 4) | (ip[1] >> 4)
        assert tc == 4 | (8 if colour else 0)
        assert ip[6] == 41  # no option in DSCP mode (and no SRH for one SID)
    assert b.counters(0)[colour][0] == 10


def test_transit_counts_by_flowmon_id_and_colour_and_reasons(bench: Bench) -> None:
    b = bench
    b.configure()
    b.add_flow(3, role=2, flowmon_id=99)
    b.hook("h1", 2)
    b.send("marked", 11, word=(99 << 12) | (1 << 11))
    b.send("marked", 4, word=(99 << 12))
    b.send("marked", 2, word=(98 << 12))  # no such flow
    b.send("unmarked", 3)
    b.send("truncated", 1)
    time.sleep(0.5)
    (p0, b0), (p1, b1) = b.counters(3)
    assert (p0, p1) == (4, 11)
    frame = 14 + 40 + 8 + 24 + 40 + 8 + 100
    assert (b0, b1) == (4 * frame, 11 * frame)
    stats = b.stats()
    assert stats["counted"] == 15
    assert stats["no_flow"] == 2
    assert stats["unmarked"] == 3
    assert stats["parse_error"] == 1


def test_dscp_transit_finds_a_long_sid_list_by_the_whole_list(bench: Bench) -> None:
    b = bench
    sids = ["fc00:2::1", "fc00:2::2", "fc00:2::3", "fc00:2::4", "fc00:2::5"]
    other = ["fc00:2::99", *sids[1:]]  # differs in a SID the first cache line does not hold
    # added in AltMark mode, where transit flows are found by FlowMonID: DSCP mode indexes them
    b.configure()
    for slot, flowmon_id, travel in ((4, 40, sids), (5, 50, other)):
        b.check(b.api.srv6pm_flow_add_del(is_add=True, slot=slot, role=2, flowmon_id=flowmon_id,
                                          n_segments=5, segments=travel + ["::"] * 11))  # fmt: skip
    dump = {f.slot: [str(a) for a in f.segments[: f.n_segments]] for f in b.api.srv6pm_flow_dump()}
    assert dump == {4: sids, 5: other}
    b.configure(mode=2, monitored_bit=4, colour_bit=8)
    b.hook("h1", 2)
    b.send("long", 7, word=4 | 8)
    b.send("long", 2, word=4)
    b.send("long", 3, word=0)
    time.sleep(0.5)
    assert [p for p, _ in b.counters(4)] == [2, 7]
    assert b.counters(5) == ((0, 0), (0, 0))
    stats = b.stats()
    assert stats["counted"] == 9 and stats["unmarked"] == 3
    b.check(b.api.srv6pm_flow_add_del(is_add=False, slot=4, segments=SEGMENTS))
    b.send("long", 1, word=4)
    time.sleep(0.5)
    assert b.stats()["no_flow"] == 1


def test_guard_neutralises_foreign_marks(bench: Bench) -> None:
    b = bench
    b.configure()
    b.add_flow(1, role=3, flowmon_id=99)
    rh1 = b.hook("h1", 3)
    b.hook("h1", 2)
    sniffer = b.sniff(3.0)
    b.send("marked", 6, word=(99 << 12) | (1 << 11))
    frames = b.captured(sniffer)
    assert len(frames) == 6
    for f in frames:  # forwarded, with the option turned into PadN of the same length
        assert f[14 + 40 : 14 + 48] == bytes([43, 0, 1, 4, 0, 0, 0, 0])
    assert b.counters(1) == ((0, 0), (0, 0))
    stats = b.stats()
    assert stats["foreign_mark"] == 6 and stats["unmarked"] == 6 and stats["counted"] == 0
    dump = {(i.sw_if_index, int(i.hook)) for i in b.api.srv6pm_interface_dump()}
    assert dump == {(rh1, 2), (rh1, 3)}


def test_refuses_bad_flows(bench: Bench) -> None:
    b = bench
    seg = SEGMENTS
    ok = b.api.srv6pm_flow_add_del(
        is_add=True, slot=1, role=2, flowmon_id=9, n_segments=1, segments=seg
    )
    b.check(ok)
    for kwargs in (
        {"slot": 70000, "role": 2, "flowmon_id": 10, "n_segments": 1},  # slot out of range
        {"slot": 2, "role": 9, "flowmon_id": 10, "n_segments": 1},  # no such role
        {"slot": 2, "role": 2, "flowmon_id": 1 << 20, "n_segments": 1},  # FlowMonID > 20 bits
        {"slot": 2, "role": 2, "flowmon_id": 10, "n_segments": 0},
        {"slot": 2, "role": 2, "flowmon_id": 9, "n_segments": 1},  # FlowMonID of slot 1
    ):
        assert b.api.srv6pm_flow_add_del(is_add=True, segments=seg, **kwargs).retval != 0, kwargs
    assert (
        b.api.srv6pm_flow_add_del(is_add=False, slot=2, segments=seg).retval != 0
    )  # nothing there
    assert [f.slot for f in b.api.srv6pm_flow_dump()] == [1]
    assert b.api.srv6pm_config_set(period_ns=1, mode=2, monitored_bit=4, colour_bit=4).retval != 0
    assert os.path.exists(b.vpp.sockets.stats)


def test_many_flows_in_one_message_stop_at_the_first_refused(bench: Bench) -> None:
    b = bench

    def flow(slot: int, flowmon_id: int) -> dict[str, object]:
        sid = f"fc00:9:{slot // 256:x}::{slot % 256 + 1:x}"
        return {"slot": slot, "role": 2, "flowmon_id": flowmon_id, "n_segments": 1,
                "segments": [sid] + ["::"] * 15}  # fmt: skip

    flows = [flow(i, 100 + i) for i in range(1000)]
    reply = b.api.srv6pm_flows_add_del(is_add=True, n_flows=len(flows), flows=flows)
    assert (reply.retval, reply.n_done) == (0, 1000)
    assert len(b.api.srv6pm_flow_dump()) == 1000
    counters = b.api.srv6pm_counters_read(first_slot=0)
    assert counters.next_slot == 0xFFFFFFFF and [c.slot for c in counters.counters] == list(
        range(1000)
    )
    assert [c.slot for c in b.api.srv6pm_counters_read(first_slot=990).counters] == list(
        range(990, 1000)
    )
    # the third reuses flow 0's FlowMonID: two are added, then it stops
    clash = [flow(2000, 5000), flow(2001, 5001), flow(2002, 100), flow(2003, 5003)]
    reply = b.api.srv6pm_flows_add_del(is_add=True, n_flows=len(clash), flows=clash)
    assert reply.retval != 0 and reply.n_done == 2
    assert {f.slot for f in b.api.srv6pm_flow_dump()} >= {2000, 2001}
    gone = [flow(i, 0) for i in range(1000)]
    reply = b.api.srv6pm_flows_add_del(is_add=False, n_flows=len(gone), flows=gone)
    assert (reply.retval, reply.n_done) == (0, 1000)
    assert sorted(f.slot for f in b.api.srv6pm_flow_dump()) == [2000, 2001]
