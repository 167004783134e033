"""The in-kernel STAMP reflector (bpf/reflector.c) run with BPF_PROG_TEST_RUN on crafted probes,
its replies held byte for byte against the userspace reflector's (timestamps aside), and what it
passes up unchanged."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import HBHOptUnknown, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from srv6pm.node_manager.drivers.linux.bpftool import lookup, obj_get, prog_test_run
from srv6pm.node_manager.drivers.linux.kernel_reflector import (
    CONFIG_VALUE,
    KernelReflector,
    KernelReflectorConfig,
)
from srv6pm.node_manager.drivers.linux.monitor import tai_offset_ns
from srv6pm.twamp import codec
from srv6pm.twamp.error_estimate import Z_BIT
from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig
from srv6pm.twamp.timestamps import from_unix_ns, unix_ns_from_ntp, unix_ns_from_ptp
from srv6pm.twamp.tlv import (
    FLAG_U,
    ClassOfService,
    DirectMeasurement,
    ExtraPadding,
    Location,
    LocationSubType,
    ReturnPath,
    SubTlv,
    encode_tlv,
)
from srv6pm.twamp.transport import Datagram

pytestmark = pytest.mark.root

TC_ACT_UNSPEC = 0xFFFFFFFF  # -1: the next filter, then the stack
TC_ACT_SHOT = 2
REFLECTOR = "fc00:0:3::862"
SENDER = "fc00:0:1::1"
DECAP_SID = "fc00:0:3::d6"
OTHER_SID = "fc00:0:3::e"
EE = 0x8001  # S bit, 1 ms: the reflector's own Error Estimate
SENDER_EE = 0x8002
SSID = 7
PERIOD_NS = 2_000_000_000
RETURN_SIDS = ("fc00:0:2::e", "fc00:0:1::d6")


@pytest.fixture(scope="module")
def bpffs() -> Iterator[Path]:
    root = Path("/run") / f"srv6pm-test-{secrets.token_hex(3)}"
    (root / "fs").mkdir(parents=True)
    subprocess.run(["mount", "-t", "bpf", "bpf", str(root / "fs")], check=True)
    try:
        yield root / "fs"
    finally:
        subprocess.run(["umount", str(root / "fs")], check=True)
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def reflector(bpffs: Path) -> KernelReflector:
    return KernelReflector(bpffs / "bpf")


@pytest.fixture
def configured(reflector: KernelReflector) -> Iterator[KernelReflector]:
    reflector.configure(
        KernelReflectorConfig(
            REFLECTOR, error_estimate=EE, tai_offset_ns=tai_offset_ns(), period_ns=PERIOD_NS
        )
    )
    reflector.set_decap_sids([DECAP_SID])
    reflector.set_return_paths({(SENDER, SSID): return_path_value(RETURN_SIDS)})
    yield reflector
    reflector.configure(KernelReflectorConfig(REFLECTOR, enabled=False))


def return_path_value(segments: tuple[str, ...]) -> bytes:
    return encode_tlv(ReturnPath(segments=segments))[4:]


def probe(
    seq: int = 41,
    ssid: int = SSID,
    tlvs: tuple = (),
    key: bytes | None = None,
    ptp: bool = False,
    timestamp: int | None = None,
) -> bytes:
    packet = codec.SenderPacket(
        seq=seq,
        timestamp=timestamp if timestamp is not None else from_unix_ns(time.time_ns(), ptp),
        error_estimate=SENDER_EE | (Z_BIT if ptp else 0),
        ssid=ssid,
        tlvs=tlvs,
    )
    return codec.encode_sender(packet, key)


def ether() -> Ether:
    # addresses given: scapy would otherwise resolve them on this host's network
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def plain(payload: bytes, dport: int = 862, hlim: int = 61, tc: int = 0) -> bytes:
    return bytes(
        ether()
        / IPv6(src=SENDER, dst=REFLECTOR, hlim=hlim, tc=tc, fl=0x12345)
        / UDP(sport=40000, dport=dport)
        / Raw(payload)
    )


def encapsulated(
    payload: bytes,
    sid: str = DECAP_SID,
    segments_left: int = 0,
    altmark: bool = False,
    tc: int = 0,
) -> bytes:
    inner = IPv6(src=SENDER, dst=REFLECTOR, hlim=61, tc=tc) / UDP(sport=40000, dport=862)
    inner = inner / Raw(payload)
    srh = IPv6ExtHdrSegmentRouting(addresses=[sid, "fc00:0:2::e"], segleft=segments_left, nh=41)
    outer = ether() / IPv6(src="fc00:0:1::a", dst=sid, hlim=62)
    if altmark:  # RFC 9343 option in a Destination Options header before the SRH, as marked
        option = HBHOptUnknown(otype=0x12, optlen=4, optdata=b"\x00\x01\x08\x00")
        outer = outer / IPv6ExtHdrDestOpt(options=[option])
    return bytes(outer / srh / inner)


def run(reflector: KernelReflector, packet: bytes) -> tuple[int, bytes]:
    fd = obj_get(reflector.program)
    try:
        verdict, out, _ = prog_test_run(fd, packet)
    finally:
        os.close(fd)
    return verdict, out


class TableCounters:
    """Block counts the userspace reflector reads: block -> (forward, reverse)."""

    def __init__(self, blocks: dict[int, tuple[int, int]]) -> None:
        self.blocks = blocks

    def block_packets(self, flow: str, block: int) -> int | None:
        found = self.blocks.get(block)
        return None if found is None else found[0 if flow == "f" else 1]


def userspace_reply(
    payload: bytes,
    stateful: bool = False,
    times: int = 1,
    blocks: dict[int, tuple[int, int]] | None = None,
    tc: int = 0,
    allowed_dscp: frozenset[int] | None = None,
) -> tuple[bytes, int]:
    """The userspace reflector's answer to the same probe (the last of `times`) and the
    traffic class it leaves with (its socket's 0 unless Class of Service asks)."""
    sent: list[tuple[bytes, int]] = []

    def send(
        data: bytes, _to: object, traffic_class: int | None, _ifindex: object, _mark: object = None
    ) -> bool:
        sent.append((data, traffic_class or 0))
        return True

    flows = ReflectedFlows("f", "r", frozenset({(SENDER, RETURN_SIDS)}))
    config = ReflectorConfig(
        stateful=stateful,
        error_estimate=EE,
        period_ns=PERIOD_NS,
        sessions={SSID: flows},
        allowed_dscp=allowed_dscp,
    )
    engine = Reflector(config, TableCounters(blocks or {}), send)
    for _ in range(times):
        engine.handle(Datagram(payload, (SENDER, 40000), time.time_ns(), 61, tc))
    return sent[-1]


def checksum_ok(frame: bytes) -> bool:
    """The UDP checksum is what scapy computes for the packet as it is."""
    ip6 = Ether(frame)[IPv6]
    fresh = ip6.copy()
    del fresh[UDP].chksum
    return bool(IPv6(bytes(fresh))[UDP].chksum == ip6[UDP].chksum)


def without_timestamps(reply: bytes) -> bytes:
    return reply[:4] + bytes(8) + reply[12:16] + bytes(8) + reply[24:]


def same_as_userspace(out: bytes, payload: bytes, **userspace: Any) -> bytes:
    """Checks the kernel's reply `out` against the userspace reflector's for the same probe:
    the same octets (timestamps aside), the same traffic class, a right checksum. Its STAMP
    octets."""
    expected, traffic_class = userspace_reply(payload, **userspace)
    reply = Ether(out)
    data = bytes(reply[UDP].payload)
    assert without_timestamps(data) == without_timestamps(expected)
    assert reply[IPv6].tc == traffic_class
    assert checksum_ok(out)
    return data


def test_a_plain_probe_becomes_the_userspace_reflectors_reply_in_place(configured):
    payload = probe()
    before = time.time_ns()
    verdict, out = run(configured, plain(payload))
    after = time.time_ns()
    assert verdict == TC_ACT_UNSPEC  # on into routing: the sender's route is the return path
    reply = Ether(out)
    ip6, udp = reply[IPv6], reply[UDP]
    assert (ip6.src, ip6.dst, ip6.hlim) == (REFLECTOR, SENDER, 64)
    assert (udp.sport, udp.dport, udp.len) == (862, 40000, 8 + 44)
    assert ip6.fl == 0x12345  # the flow label as received
    data = same_as_userspace(out, payload)
    decoded = codec.decode_reflector(data)
    t2, t3 = unix_ns_from_ntp(decoded.receive_timestamp), unix_ns_from_ntp(decoded.timestamp)
    assert before - 1_000_000 <= t2 <= t3 <= after + 1_000_000
    assert (decoded.sender_ttl, decoded.error_estimate, decoded.seq) == (61, EE, 41)


def test_stateful_replies_count_per_sender_and_session_as_userspace_does(reflector):
    reflector.configure(
        KernelReflectorConfig(
            REFLECTOR, error_estimate=EE, stateful=True, tai_offset_ns=tai_offset_ns()
        )
    )
    try:
        payload = probe(seq=1000, ssid=91)
        replies = [run(reflector, plain(payload))[1] for _ in range(3)]
        seqs = [codec.decode_reflector(bytes(Ether(r)[UDP].payload)).seq for r in replies]
        assert seqs == [0, 1, 2]
        same_as_userspace(replies[-1], payload, stateful=True, times=3)
        other = Ether(run(reflector, plain(probe(seq=1000, ssid=92)))[1])[UDP].payload
        assert codec.decode_reflector(bytes(other)).seq == 0
        # the userspace reflector answers from the same counters: one sequence for the sender
        assert reflector.next_sequence(SENDER, 91) == 3
        again = Ether(run(reflector, plain(payload))[1])[UDP].payload
        assert codec.decode_reflector(bytes(again)).seq == 4
    finally:
        reflector.configure(KernelReflectorConfig(REFLECTOR, enabled=False))


@pytest.mark.parametrize("altmark", [False, True], ids=["dscp", "altmark"])
def test_a_probe_inside_a_decapsulating_sid_is_decapsulated_then_answered(configured, altmark):
    payload = probe()
    verdict, out = run(configured, encapsulated(payload, altmark=altmark))
    assert verdict == TC_ACT_UNSPEC
    assert len(out) == 14 + 40 + 8 + 44  # the outer IPv6 header and the SRH are gone
    reply = Ether(out)
    assert (reply[IPv6].src, reply[IPv6].dst, reply[IPv6].nh) == (REFLECTOR, SENDER, 17)
    same_as_userspace(out, payload)


def passed_unchanged(reflector: KernelReflector, packet: bytes) -> dict[str, int]:
    """Runs `packet`, checks it went on untouched; the statistics that moved."""
    before = reflector.stats()
    verdict, out = run(reflector, packet)
    assert (verdict, out) == (TC_ACT_UNSPEC, packet)
    after = reflector.stats()
    return {name: after[name] - before[name] for name in after if after[name] != before[name]}


def test_what_the_kernel_does_not_answer_goes_up_unchanged_and_is_counted(configured):
    tlv = probe(tlvs=(Location(sub_tlvs=(SubTlv(LocationSubType.SOURCE_IP, bytes(16)),)),))
    assert passed_unchanged(configured, plain(tlv)) == {"passed_tlv": 1}
    twice = probe(tlvs=(ClassOfService(dscp1=46), ClassOfService(dscp1=10)))
    assert passed_unchanged(configured, plain(twice)) == {"passed_tlv": 1}
    authenticated = probe(key=b"k" * 32)  # 112 octets of base: its MBZ read as a bad TLV
    assert passed_unchanged(configured, plain(authenticated)) == {"passed_tlv": 1}
    twamp_light = probe()[:41]
    assert passed_unchanged(configured, plain(twamp_light)) == {"passed_length": 1}


def test_packets_that_are_not_probes_for_it_pass_untouched_and_uncounted(configured):
    payload = probe()
    assert passed_unchanged(configured, plain(payload, dport=863)) == {}
    assert passed_unchanged(configured, encapsulated(payload, sid=OTHER_SID)) == {}
    assert passed_unchanged(configured, encapsulated(payload, segments_left=1)) == {}
    elsewhere = bytes(ether() / IPv6(src=SENDER, dst="fc00:0:3::9") / UDP(dport=862) / Raw(payload))
    assert passed_unchanged(configured, elsewhere) == {}
    truncated = plain(payload)[: 14 + 40 + 4]
    assert passed_unchanged(configured, truncated) == {}


def test_a_udp_length_that_disagrees_with_the_packet_is_passed_up(configured):
    frame = bytearray(plain(probe()))
    frame[14 + 40 + 4 : 14 + 40 + 6] = (8 + 40).to_bytes(2, "big")  # UDP length 48, 52 there
    assert passed_unchanged(configured, bytes(frame)) == {"passed_length": 1}


def test_a_disabled_reflector_passes_every_probe_up(reflector):
    reflector.configure(KernelReflectorConfig(REFLECTOR, enabled=False))
    assert passed_unchanged(reflector, plain(probe())) == {"passed_disabled": 1}


def current_block() -> int:
    return time.time_ns() // PERIOD_NS


@pytest.mark.parametrize("padding", [0, 3], ids=["aligned", "odd-offsets"])
def test_our_senders_loss_probe_is_answered_in_the_kernel_as_in_userspace(configured, padding):
    block = current_block() - 1  # the probe's timestamp is in block + 1
    configured.publish_block(block, {SSID: (1234, 567)})
    tlvs = (ExtraPadding(padding, flags=FLAG_U),) if padding else ()
    tlvs += (
        DirectMeasurement(s_txc=1300, flags=FLAG_U),
        ReturnPath(segments=RETURN_SIDS, flags=FLAG_U),
    )
    payload = probe(tlvs=tlvs)
    before = configured.stats()
    verdict, out = run(configured, encapsulated(payload, altmark=True))
    assert verdict == TC_ACT_UNSPEC and configured.stats()["reflected"] == before["reflected"] + 1
    data = same_as_userspace(out, payload, blocks={block: (1234, 567)})
    dm = next(t for t in codec.decode_reflector(data).tlvs if isinstance(t, DirectMeasurement))
    assert (dm.s_txc, dm.r_rxc, dm.r_txc, dm.flags) == (1300, 1234, 567, 0)


def test_a_block_not_published_or_a_path_not_declared_goes_up(configured):
    block = current_block() - 1
    configured.publish_block(block - 2, {SSID: (1, 2)})  # same slot, older block
    dm = probe(tlvs=(DirectMeasurement(s_txc=1, flags=FLAG_U),))
    assert passed_unchanged(configured, plain(dm)) == {"passed_counts": 1}
    other_ssid = probe(ssid=SSID + 1, tlvs=(DirectMeasurement(s_txc=1, flags=FLAG_U),))
    assert passed_unchanged(configured, plain(other_ssid)) == {"passed_counts": 1}
    elsewhere = probe(tlvs=(ReturnPath(segments=("fc00:0:9::e",), flags=FLAG_U),))
    assert passed_unchanged(configured, plain(elsewhere)) == {"passed_return_path": 1}
    longer = probe(tlvs=(ReturnPath(segments=(*RETURN_SIDS, "fc00:0:9::e"), flags=FLAG_U),))
    assert passed_unchanged(configured, plain(longer)) == {"passed_return_path": 1}


def test_a_tlv_longer_than_the_packet_goes_up_as_malformed(configured):
    payload = bytearray(probe(tlvs=(ExtraPadding(8),)))
    payload[44 + 2 : 44 + 4] = (9).to_bytes(2, "big")  # one octet more than there is
    assert passed_unchanged(configured, plain(bytes(payload))) == {"passed_tlv": 1}


def test_a_moved_tai_offset_is_written_into_the_configuration(configured):
    config_map = configured.program.parents[2] / "maps" / "srv6pm_reflector_config"
    offset = tai_offset_ns()
    configured.refresh_offset(offset)  # unchanged: nothing to write
    configured.refresh_offset(offset + 1_000_000_000)  # a leap second
    held = lookup(config_map, bytes(4), CONFIG_VALUE.size)
    assert held is not None and CONFIG_VALUE.unpack(held)[1] == offset + 1_000_000_000
    _, out = run(configured, plain(probe()))
    t2 = unix_ns_from_ntp(codec.decode_reflector(bytes(Ether(out)[UDP].payload)).receive_timestamp)
    assert abs(time.time_ns() - 1_000_000_000 - t2) < 100_000_000  # one second earlier


def test_a_ptp_probe_gets_t2_and_t3_in_ptp_as_userspace_gives_them(configured):
    payload = probe(ptp=True)
    before = time.time_ns()
    _, out = run(configured, plain(payload))
    after = time.time_ns()
    decoded = codec.decode_reflector(same_as_userspace(out, payload))
    assert decoded.error_estimate == EE | Z_BIT
    t2 = unix_ns_from_ptp(decoded.receive_timestamp)
    t3 = unix_ns_from_ptp(decoded.timestamp)
    assert before - 1_000_000 <= t2 <= t3 <= after + 1_000_000


def test_a_ptp_loss_probe_reads_its_block_and_an_unreadable_timestamp_goes_up(configured):
    block = current_block() - 1
    configured.publish_block(block, {SSID: (77, 66)})
    dm = (DirectMeasurement(s_txc=80, flags=FLAG_U),)
    payload = probe(tlvs=dm, ptp=True)
    _, out = run(configured, encapsulated(payload))
    data = same_as_userspace(out, payload, blocks={block: (77, 66)})
    assert codec.decode_reflector(data).tlvs == (DirectMeasurement(80, 77, 66),)
    unreadable = probe(tlvs=dm, ptp=True, timestamp=10**9)  # nanoseconds of 10^9
    assert passed_unchanged(configured, plain(unreadable)) == {"passed_timestamp": 1}


RECEIVED_CLASS = 34 << 2 | 1  # AF41, ECT(1)


@pytest.mark.parametrize("wrap", [plain, encapsulated], ids=["plain", "decapsulated"])
def test_class_of_service_reports_what_came_in_and_the_reply_takes_dscp1(configured, wrap):
    payload = probe(tlvs=(ExtraPadding(1, flags=FLAG_U), ClassOfService(dscp1=46, flags=FLAG_U)))
    _, out = run(configured, wrap(payload, tc=RECEIVED_CLASS))
    data = same_as_userspace(out, payload, tc=RECEIVED_CLASS)
    assert codec.decode_reflector(data).tlvs[1] == ClassOfService(46, 34, 1, 0)
    assert Ether(out)[IPv6].tc == 46 << 2


def test_without_class_of_service_the_reply_leaves_with_traffic_class_0(configured):
    payload = probe()
    _, out = run(configured, plain(payload, tc=46 << 2))
    same_as_userspace(out, payload, tc=46 << 2)
    assert Ether(out)[IPv6].tc == 0


def test_a_dscp1_the_operator_did_not_allow_is_refused_with_rp(reflector):
    reflector.configure(
        KernelReflectorConfig(
            REFLECTOR, error_estimate=EE, tai_offset_ns=tai_offset_ns(), allowed_dscp=(0, 10)
        )
    )
    try:
        for dscp1, rp, leaves in ((46, 1, 0), (10, 0, 10 << 2)):
            payload = probe(tlvs=(ClassOfService(dscp1=dscp1, flags=FLAG_U),))
            _, out = run(reflector, plain(payload, tc=RECEIVED_CLASS))
            data = same_as_userspace(
                out, payload, tc=RECEIVED_CLASS, allowed_dscp=frozenset({0, 10})
            )
            assert codec.decode_reflector(data).tlvs[0] == ClassOfService(dscp1, 34, 1, rp)
            assert Ether(out)[IPv6].tc == leaves
    finally:
        reflector.configure(KernelReflectorConfig(REFLECTOR, enabled=False))


def test_counts_at_an_odd_offset_at_the_very_end_of_the_packet(configured):
    # the last octet of R_TxC is the packet's last: the checksum must not read beyond it
    block = current_block() - 1
    configured.publish_block(block, {SSID: (5, 6)})
    payload = probe(tlvs=(ExtraPadding(3, flags=FLAG_U), DirectMeasurement(7, flags=FLAG_U)))
    _, out = run(configured, plain(payload))
    data = same_as_userspace(out, payload, blocks={block: (5, 6)})
    assert codec.decode_reflector(data).tlvs[1] == DirectMeasurement(7, 5, 6)
