"""srv6pm-reflect, the VPP plugin's STAMP Session-Reflector (RFC 8762, RFC 8972, RFC 9503), held
to the reference userspace reflector (srv6pm.twamp.reflector): every probe goes on the wire to
VPP and, the same octets, to a reference Reflector configured alike; the replies must be equal
field by field but for T2 and T3 (and the base HMAC over them, which must verify).

h1 - r (VPP) - h2: r answers at a loopback address the vpp driver makes local, configured as the
node manager configures it (VppReflector, a KernelReflection). h1 is the sender the session
declares; h2 is a host no session names.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import secrets
import select
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path
from typing import Protocol

import pytest
from srv6pm.lab import Lab, Topology
from srv6pm.lab.network import NETNS_DIR
from srv6pm.lab.vpp import VPP_API_FILES
from srv6pm.node_manager.domain.model import KernelReflection
from srv6pm.node_manager.drivers.vpp.driver import VppDriver
from srv6pm.node_manager.drivers.vpp.reflector import VppReflector
from srv6pm.twamp import codec
from srv6pm.twamp.codec import (
    AccessReport,
    ClassOfService,
    DestinationNodeAddress,
    DirectMeasurement,
    ExtraPadding,
    Location,
    MalformedTlv,
    ReflectorPacket,
    ReturnPath,
    SenderPacket,
    SubTlv,
    TimestampInformation,
    Tlv,
    UnknownTlv,
)
from srv6pm.twamp.error_estimate import Z_BIT, is_ptp
from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig
from srv6pm.twamp.timestamps import TAI_UTC_OFFSET_S, from_unix_ns, to_unix_ns
from srv6pm.twamp.tlv import encode_tlvs
from srv6pm.twamp.transport import Datagram

pytestmark = pytest.mark.root

TOPOLOGY = """
name: vpp-reflector
routers:
  r: {grpc_port: 1, driver: vpp}
hosts:
  h1: {}
  h2: {}
links:
  - ends: {h1: "fd00:1::2/64", r: "fd00:1::1/64"}
  - ends: {r: "fd00:2::1/64", h2: "fd00:2::2/64"}
"""
H1, H2 = "fd00:1::2", "fd00:2::2"
REFLECTOR = "fd00:53::1"  # on the driver's loopback
R_ON_H1_LINK = "fd00:1::1"  # another local address of VPP's
PORT = 20000 + secrets.randbelow(20000)
SENDER_PORT = PORT + 1
PERIOD_NS = 10_000_000_000
SSID, OTHER_SSID, UNDECLARED_SSID = 0x5A01, 0x5A02, 0x77
RETURN_SIDS = ("fc00:1::1", "fc00:1::d6")
KEY = b"srv6pm reflector conformance key"
ERROR_ESTIMATE = 0x8103  # S (synchronised), scale 1, multiplier 3: the reflector's own
HOP_LIMIT = 77  # the probes' (the reply reports it)
TLV_HLEN = 4
FLAG_U, FLAG_M, FLAG_I = codec.FLAG_U, codec.FLAG_M, codec.FLAG_I
REPLY_WAIT_S = 1.0
SILENCE_S = 0.3  # how long "no reply" is waited for
# types the reference processes and srv6pm-reflect returns with U (not processed in VPP)
NOT_PROCESSED_IN_VPP = (2, 3, 6, 7, 9, 11)

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """This thread in namespace `name` (a socket made there stays there)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"{NETNS_DIR}/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET):
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        _libc.setns(own, CLONE_NEWNET)
        os.close(own)
        os.close(target)


@dataclass(frozen=True)
class Received:
    data: bytes
    source: tuple[str, int]
    traffic_class: int


class Host:
    """A UDP socket of a host namespace: probes out with a Traffic Class and Hop Limit, replies
    in with the Traffic Class they came with (IPV6_RECVTCLASS)."""

    def __init__(self, netns: str, address: str) -> None:
        self.netns = netns
        self.address = address
        with in_netns(netns):
            self.sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
        self.sock.bind((address, SENDER_PORT))

    def close(self) -> None:
        self.sock.close()

    def send(
        self, data: bytes, dst: str = REFLECTOR, traffic_class: int = 0, dstopts: bytes = b""
    ) -> None:
        ancillary = [
            (socket.IPPROTO_IPV6, socket.IPV6_TCLASS, struct.pack("@i", traffic_class)),
            (socket.IPPROTO_IPV6, socket.IPV6_HOPLIMIT, struct.pack("@i", HOP_LIMIT)),
        ]
        if dstopts:
            ancillary.append((socket.IPPROTO_IPV6, socket.IPV6_DSTOPTS, dstopts))
        self.sock.sendmsg([data], ancillary, 0, (dst, PORT))

    def send_raw_udp(self, udp_length: int, payload: bytes, dst: str = REFLECTOR) -> None:
        """A UDP datagram whose Length field says `udp_length` (the IPv6 payload stays header +
        payload), its checksum over the whole IPv6 payload, as VPP checks it."""
        with in_netns(self.netns):
            raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP)
        with raw:
            raw.bind((self.address, 0))
            segment = bytearray(struct.pack("!HHHH", SENDER_PORT, PORT, udp_length, 0) + payload)
            pseudo = (
                IPv6Address(self.address).packed
                + IPv6Address(dst).packed
                + struct.pack("!IxxxB", len(segment), socket.IPPROTO_UDP)
            )
            struct.pack_into("!H", segment, 6, checksum(pseudo + segment))
            raw.sendto(bytes(segment), (dst, 0))

    def receive(self, timeout: float) -> Received | None:
        if not select.select([self.sock], [], [], timeout)[0]:
            return None
        data, ancillary, _flags, source = self.sock.recvmsg(4096, 256)
        tclass = next(
            struct.unpack("@i", d)[0]
            for level, kind, d in ancillary
            if (level, kind) == (socket.IPPROTO_IPV6, socket.IPV6_TCLASS)
        )
        return Received(data, (source[0], source[1]), tclass)

    def drain(self) -> None:
        while self.receive(0) is not None:
            pass


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF or 0xFFFF


@dataclass
class Counts:
    """The reference's BlockCounters: what publish_block gives VPP, by flow."""

    packets: dict[tuple[str, int], int] = field(default_factory=dict)

    def block_packets(self, flow: str, block: int) -> int | None:
        return self.packets.get((flow, block))


@dataclass(frozen=True)
class Sent:
    data: bytes
    destination: tuple[str, int]
    traffic_class: int | None


@dataclass
class Bench:
    lab: Lab
    driver: VppDriver
    h1: Host
    h2: Host

    @property
    def reflector(self) -> VppReflector:
        reflector = self.driver.kernel_reflector()
        assert isinstance(reflector, VppReflector)
        return reflector


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    lab = Lab(Topology.parse(TOPOLOGY), prefix=f"vr-{secrets.token_hex(3)}")
    driver = None
    hosts: list[Host] = []
    try:
        lab.up(start_node_managers=False)
        state = tmp_path_factory.mktemp("vpp-reflector")
        driver = VppDriver(
            Path(lab.vpp("r").sockets.api),
            state,
            PERIOD_NS,
            IPv6Network("fcff:5336::/64"),
            vpp_api_dir=VPP_API_FILES,
        )
        driver.add_local_address(REFLECTOR)
        hosts = [Host(lab.netns("h1"), H1), Host(lab.netns("h2"), H2)]
        yield Bench(lab, driver, *hosts)
    finally:
        for host in hosts:
            host.close()
        if driver is not None:
            driver.close()
        lab.down()


@dataclass
class Pair:
    """srv6pm-reflect and the reference, configured alike."""

    bench: Bench
    key: bytes | None
    reference: Reflector
    counts: Counts
    sent: list[Sent] = field(default_factory=list)

    def publish(self, block: int, rx: int, tx: int) -> None:
        self.bench.reflector.publish_block(block, {SSID: (rx, tx)})
        self.counts.packets[("forward", block)] = rx
        self.counts.packets[("reverse", block)] = tx

    def stats(self) -> dict[str, int]:
        return dict(self.bench.reflector.stats())

    def exchange(
        self, probe: bytes, host: Host | None = None, traffic_class: int = 0, dstopts: bytes = b""
    ) -> tuple[Received | None, Sent | None, dict[str, int]]:
        """`probe` to VPP from `host` (h1) and to the reference: VPP's reply, the reference's,
        and the plugin's statistics that changed (as the reference's changed, unless the probe
        has `dstopts`, a header VPP drops before its reflector)."""
        host = host or self.bench.h1
        host.drain()
        before, theirs_before = self.stats(), dataclasses.asdict(self.reference.stats)
        sent_ns = time.time_ns()
        host.send(probe, traffic_class=traffic_class, dstopts=dstopts)
        ref = self.reflect_in_reference(probe, host, traffic_class, sent_ns)
        got = host.receive(REPLY_WAIT_S if ref else SILENCE_S)
        mine = changed(before, self.stats())
        if not dstopts:
            theirs = changed(theirs_before, dataclasses.asdict(self.reference.stats))
            assert {k: n for k, n in mine.items() if k in theirs_before} == theirs
        return got, ref, mine

    def reflect_in_reference(
        self, data: bytes, host: Host, traffic_class: int, received_ns: int
    ) -> Sent | None:
        before = len(self.sent)
        datagram = Datagram(
            data,
            (host.address, SENDER_PORT),
            received_ns,
            HOP_LIMIT,
            traffic_class,
            destination=REFLECTOR,
        )
        self.reference.handle(datagram)
        return self.sent[-1] if len(self.sent) > before else None


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


class Configure(Protocol):
    def __call__(
        self, stateful: bool = False, key: bytes | None = None, allowed_dscp: tuple[int, ...] = ()
    ) -> Pair: ...


@pytest.fixture
def configure(bench: Bench) -> Iterator[Configure]:
    def make(
        stateful: bool = False, key: bytes | None = None, allowed_dscp: tuple[int, ...] = ()
    ) -> Pair:
        reflection = KernelReflection(
            address=REFLECTOR,
            port=PORT,
            stateful=stateful,
            error_estimate=ERROR_ESTIMATE,
            period_ns=PERIOD_NS,
            sessions=((SSID, "forward", "reverse"),),
            return_paths=((H1, SSID, RETURN_SIDS),),
            allowed_dscp=allowed_dscp,
            hmac_key=key or b"",
        )
        bench.reflector.apply(None)  # a fresh start: stateful sequences from 0
        bench.reflector.apply(reflection)
        counts, sent = Counts(), list[Sent]()

        def send(
            data: bytes,
            destination: tuple[str, int],
            traffic_class: int | None = None,
            ifindex: int | None = None,
            mark: int | None = None,
        ) -> bool:
            sent.append(Sent(data, destination, traffic_class))
            return True

        config = ReflectorConfig(
            stateful=stateful,
            key=key,
            error_estimate=ERROR_ESTIMATE,
            period_ns=PERIOD_NS,
            sessions={SSID: ReflectedFlows("forward", "reverse", frozenset({(H1, RETURN_SIDS)}))},
            port=PORT,
            allowed_dscp=frozenset(allowed_dscp) or None,
        )
        return Pair(bench, key, Reflector(config, counts, send), counts, sent)

    yield make
    bench.reflector.apply(None)


def probe(
    seq: int = 1,
    ssid: int = SSID,
    tlvs: tuple[Tlv, ...] = (),
    key: bytes | None = None,
    ptp: bool = False,
    sent_ns: int | None = None,
) -> bytes:
    ns = time.time_ns() if sent_ns is None else sent_ns
    ee = 0x0001 | (Z_BIT if ptp else 0)
    return codec.encode_sender(SenderPacket(seq, from_unix_ns(ns, ptp), ee, ssid, tlvs), key)


def reported_block() -> tuple[int, int]:
    """A sending time in the middle of the current block, and the block a probe sent then
    reports (the one before: RFC 8972 section 4.5 counts a closed block)."""
    middle = time.time_ns() // PERIOD_NS * PERIOD_NS + PERIOD_NS // 2
    return middle, middle // PERIOD_NS - 1


def masked(data: bytes, key: bytes | None) -> bytes:
    """The octets that must be equal: T2, T3 and the base HMAC over them zeroed."""
    out = bytearray(data)
    t3, t2, hmac = (16, 32, 96) if key else (4, 16, None)
    out[t3 : t3 + 8] = bytes(8)
    out[t2 : t2 + 8] = bytes(8)
    if hmac is not None:
        out[hmac : hmac + 16] = bytes(16)
    return bytes(out)


def same_reply(pair: Pair, got: Received | None, ref: Sent | None) -> ReflectorPacket:
    """VPP's reply equals the reference's but for T2 and T3, which are sane; VPP's decoded."""
    assert ref is not None, "the reference does not answer"
    assert got is not None, "VPP does not answer"
    key = pair.key
    mine = codec.decode_reflector(got.data, key, tlv_integrity="mark")  # base HMAC verifies
    theirs = codec.decode_reflector(ref.data, key, tlv_integrity="mark")
    assert dataclasses.replace(mine, timestamp=0, receive_timestamp=0) == dataclasses.replace(
        theirs, timestamp=0, receive_timestamp=0
    )
    assert masked(got.data, key) == masked(ref.data, key)
    assert got.traffic_class == (ref.traffic_class or 0)
    assert got.source == (REFLECTOR, PORT)
    ptp = is_ptp(mine.error_estimate)
    t2, t3 = to_unix_ns(mine.receive_timestamp, ptp), to_unix_ns(mine.timestamp, ptp)
    assert t2 <= t3
    now = time.time_ns()
    assert abs(now - t2) < 1e9 and abs(now - t3) < 1e9, (now, t2, t3)
    return mine


def no_reply(got: Received | None, ref: Sent | None) -> None:
    assert ref is None, "the reference answers"
    assert got is None, f"VPP answers: {got}"


def tlv_octets(reply: Received, base: int = codec.UNAUTH_BASE_LEN) -> bytes:
    return reply.data[base:]


# ---- base packets -------------------------------------------------------------------------


def test_stateless_replies_copy_the_sender_sequence_as_the_reference(configure: Configure) -> None:
    pair = configure()
    for seq in (7, 0, 0xFFFFFFFF):
        got, ref, stats = pair.exchange(probe(seq))
        mine = same_reply(pair, got, ref)
        assert (mine.seq, mine.sender_seq, mine.ssid) == (seq, seq, SSID)
        assert mine.sender_ttl == HOP_LIMIT
        assert mine.error_estimate == ERROR_ESTIMATE
        assert stats == {"received": 1, "reflected": 1}


def test_stateful_sequence_counts_per_sender_and_ssid(configure: Configure) -> None:
    pair = configure(stateful=True)
    seqs = []
    for sender_seq, ssid in ((100, SSID), (7, SSID), (55, OTHER_SSID), (8, SSID), (9, OTHER_SSID)):
        got, ref, _ = pair.exchange(probe(sender_seq, ssid))
        mine = same_reply(pair, got, ref)
        assert mine.sender_seq == sender_seq
        seqs.append((ssid, mine.seq))
    assert seqs == [(SSID, 0), (SSID, 1), (OTHER_SSID, 0), (SSID, 2), (OTHER_SSID, 1)]
    got, ref, _ = pair.exchange(probe(1, SSID), host=pair.bench.h2)
    assert same_reply(pair, got, ref).seq == 0  # another sender: its own count


@pytest.mark.parametrize("ptp", [True, False], ids=["ptp", "ntp"])
def test_z_bit_selects_ptp_tai_or_ntp_for_t2_and_t3(configure: Configure, ptp: bool) -> None:
    pair = configure()
    got, ref, _ = pair.exchange(probe(3, ptp=ptp))
    mine = same_reply(pair, got, ref)
    assert mine.error_estimate == ERROR_ESTIMATE & ~Z_BIT | (Z_BIT if ptp else 0)
    now = time.time()
    for raw in (mine.receive_timestamp, mine.timestamp):
        if ptp:  # PTPv2 truncated: TAI seconds, nanoseconds (< 10^9)
            seconds, ns = raw >> 32, raw & 0xFFFFFFFF
            assert ns < 1_000_000_000
            assert abs(seconds + ns / 1e9 - TAI_UTC_OFFSET_S - now) < 1.0
        else:  # NTP: seconds since 1900, a binary fraction
            assert abs((raw >> 32) - 2_208_988_800 + (raw & 0xFFFFFFFF) / 2**32 - now) < 1.0


@pytest.mark.parametrize("size", [14, 41])
def test_twamp_light_probe_gets_the_44_octet_base(configure: Configure, size: int) -> None:
    pair = configure()
    full = probe(0x01020304, ssid=0x0A0B)
    light = full[:16] + bytes(size - 16) if size > 16 else full[:size]
    got, ref, _ = pair.exchange(light)
    mine = same_reply(pair, got, ref)
    assert got is not None and len(got.data) == codec.UNAUTH_BASE_LEN
    assert mine.ssid == (0x0A0B if size >= 16 else 0)


def test_probe_with_a_destination_options_header_never_reaches_the_reflector(
    configure: Configure,
) -> None:
    """A known difference, VPP's own: its ip6-local drops a packet to a local address whose
    Destination Options header comes before UDP ("unknown protocol ip6 local h-b-h"), so
    srv6pm-reflect never sees it, where the reference, behind the kernel's socket, answers.
    srv6pm's probes reach it without one: an Alternate-Marking option travels in the SRv6
    encapsulation, which End.DT6 removes before the reflector."""
    pair = configure(stateful=True)
    altmark = bytes((0, 0, 0x12, 4, 0xAB, 0xCD, 0xE0, 0x00))  # next header and length: kernel's
    got, ref, stats = pair.exchange(probe(1), dstopts=altmark)
    assert ref is not None and got is None
    assert stats == {}
    pair.bench.h1.send(probe(2))
    reply = pair.bench.h1.receive(REPLY_WAIT_S)
    assert reply is not None and codec.decode_reflector(reply.data).seq == 0  # the first one


# ---- authenticated mode -------------------------------------------------------------------


def test_authenticated_probe_answered_with_verifying_hmacs(configure: Configure) -> None:
    pair = configure(key=KEY, stateful=True)
    sent_ns, block = reported_block()
    pair.publish(block, 41, 43)
    tlvs = (DirectMeasurement(s_txc=40), ClassOfService(dscp1=10), ExtraPadding(12))
    for seq in (5, 6):
        got, ref, stats = pair.exchange(probe(seq, tlvs=tlvs, key=KEY, sent_ns=sent_ns))
        mine = same_reply(pair, got, ref)
        assert got is not None
        codec.decode_reflector(got.data, KEY)  # the HMAC TLV verifies too (raises if not)
        assert mine.seq == seq - 5
        assert mine.tlvs[0] == DirectMeasurement(40, 41, 43)
        assert stats == {"received": 1, "reflected": 1}


def test_wrong_key_gets_no_reply_and_counts_an_auth_failure(configure: Configure) -> None:
    pair = configure(key=KEY)
    got, ref, stats = pair.exchange(probe(1, key=b"another key"))
    no_reply(got, ref)
    assert stats == {"received": 1, "auth_failures": 1}
    assert pair.reference.stats.auth_failures == 1


def test_wrong_hmac_tlv_returns_tlvs_with_i_and_acts_on_none(configure: Configure) -> None:
    pair = configure(key=KEY, allowed_dscp=(10,))
    sent_ns, block = reported_block()
    pair.publish(block, 5, 6)
    tlvs = (DirectMeasurement(s_txc=1), ClassOfService(dscp1=10))
    good = probe(2, tlvs=tlvs, key=KEY, sent_ns=sent_ns)
    bad = good[:-1] + bytes([good[-1] ^ 1])  # the HMAC TLV's last octet
    got, ref, stats = pair.exchange(bad, traffic_class=0x28)
    mine = same_reply(pair, got, ref)
    assert mine.integrity_failed is False  # the reply's own HMAC TLV is right
    assert [t.flags for t in mine.tlvs] == [FLAG_I] * 3
    assert mine.tlvs[0] == DirectMeasurement(1, 0, 0, FLAG_I)  # no counts
    assert got is not None and got.traffic_class == 0  # nor Class of Service
    assert stats == {"received": 1, "reflected": 1, "tlv_integrity_failures": 1}


def unsigned_tlvs(seq: int, tlvs: tuple[Tlv, ...], sent_ns: int | None = None) -> bytes:
    """An authenticated probe whose TLVs carry no HMAC TLV (a sender without RFC 8972 4.8)."""
    return probe(seq, key=KEY, sent_ns=sent_ns) + encode_tlvs(tlvs)


def test_reply_with_tlvs_always_carries_one_valid_hmac_tlv(configure: Configure) -> None:
    """RFC 8972 section 4.8: in authenticated mode the HMAC TLV follows every TLV but Extra
    Padding; a reflector whose probe had none, or had it elsewhere, still sends one (after
    returning the TLVs with I), over what it returns."""
    pair = configure(key=KEY)
    dm, cos = DirectMeasurement(s_txc=9), ClassOfService(dscp1=10)
    signed = probe(1, tlvs=(dm,), key=KEY)  # DM, HMAC
    cases = {
        "missing": unsigned_tlvs(2, (dm, cos)),
        "misplaced": signed + codec.encode_tlv(cos),
        "twice": signed + signed[codec.AUTH_BASE_LEN :],
        "padding alone": unsigned_tlvs(3, (ExtraPadding(8),)),
        "malformed alone": unsigned_tlvs(4, (MalformedTlv(bytes((0, 5, 0, 40)) + bytes(4)),)),
        "after a malformed one": signed + bytes((0, 4, 0, 9, 1, 2)),
        "of the wrong length": unsigned_tlvs(
            5, (dm, MalformedTlv(bytes((0, 8, 0, 4, 1, 2, 3, 4))))
        ),
        "zero tail": unsigned_tlvs(6, (dm, ExtraPadding(2))) + bytes(40),
    }
    for name, sent in cases.items():
        got, ref, stats = pair.exchange(sent)
        mine = same_reply(pair, got, ref)
        assert got is not None
        if "malformed" not in name:  # else the malformed TLV's Length takes in what follows
            assert not codec.decode_reflector(got.data, KEY, tlv_integrity="mark").integrity_failed
            assert len([t for t in mine.tlvs if isinstance(t, codec.Hmac)]) == 1, name
        expected = {"received": 1, "reflected": 1}
        if name != "padding alone":
            expected["tlv_integrity_failures"] = 1
        assert stats == expected, name


# ---- TLVs ---------------------------------------------------------------------------------


def test_extra_padding_reply_is_as_long_as_the_probe(configure: Configure) -> None:
    pair = configure()
    sent = probe(4, tlvs=(ExtraPadding(333),))
    got, ref, _ = pair.exchange(sent)
    mine = same_reply(pair, got, ref)
    assert got is not None and len(got.data) == len(sent) == codec.UNAUTH_BASE_LEN + 337
    assert mine.tlvs == (ExtraPadding(333),)


def test_direct_measurement_carries_the_published_counts(configure: Configure) -> None:
    pair = configure()
    middle, block = reported_block()
    pair.publish(block, 0xFFFFFFFF, 123456)
    pair.publish(block - 1, 1, 2)  # the slot before: not the one asked for
    got, ref, stats = pair.exchange(probe(9, tlvs=(DirectMeasurement(s_txc=777),), sent_ns=middle))
    mine = same_reply(pair, got, ref)
    assert mine.tlvs == (DirectMeasurement(777, 0xFFFFFFFF, 123456),)
    assert stats == {"received": 1, "reflected": 1}


def test_direct_measurement_without_counts_gets_u(configure: Configure) -> None:
    pair = configure()
    long_ago = (time.time_ns() // PERIOD_NS - 50) * PERIOD_NS + 1
    got, ref, stats = pair.exchange(probe(9, tlvs=(DirectMeasurement(s_txc=3),), sent_ns=long_ago))
    mine = same_reply(pair, got, ref)
    assert mine.tlvs == (DirectMeasurement(3, 0, 0, FLAG_U),)
    assert stats == {"received": 1, "reflected": 1, "counters_unavailable": 1}


def test_class_of_service_allowed_and_refused(configure: Configure) -> None:
    pair = configure(allowed_dscp=(0, 46))
    received = 10 << 2 | 1  # DSCP 10, ECN 1
    got, ref, _ = pair.exchange(probe(1, tlvs=(ClassOfService(dscp1=46),)), traffic_class=received)
    mine = same_reply(pair, got, ref)
    assert mine.tlvs == (ClassOfService(dscp1=46, dscp2=10, ecn=1, rp=0),)
    assert got is not None and got.traffic_class == 46 << 2
    got, ref, _ = pair.exchange(probe(2, tlvs=(ClassOfService(dscp1=20),)), traffic_class=received)
    mine = same_reply(pair, got, ref)
    assert mine.tlvs == (ClassOfService(dscp1=20, dscp2=10, ecn=1, rp=1),)
    assert got is not None and got.traffic_class == 0


def test_return_path_declared_undeclared_and_no_reply(configure: Configure) -> None:
    pair = configure()
    got, ref, stats = pair.exchange(probe(1, tlvs=(ReturnPath(segments=RETURN_SIDS),)))
    assert same_reply(pair, got, ref).tlvs == (ReturnPath(segments=RETURN_SIDS),)
    assert stats == {"received": 1, "reflected": 1}

    other = ("fc00:9::1",)
    got, ref, stats = pair.exchange(probe(2, tlvs=(ReturnPath(segments=other),)))
    assert same_reply(pair, got, ref).tlvs == (ReturnPath(segments=other, flags=FLAG_U),)
    assert stats == {"received": 1, "reflected": 1, "return_paths_refused": 1}
    # declared for h1, not for h2
    got, ref, stats = pair.exchange(
        probe(3, tlvs=(ReturnPath(segments=RETURN_SIDS),)), host=pair.bench.h2
    )
    assert same_reply(pair, got, ref).tlvs[0].flags == FLAG_U
    assert stats["return_paths_refused"] == 1

    got, ref, stats = pair.exchange(probe(4, tlvs=(ReturnPath(control_code=0),)))
    no_reply(got, ref)
    assert stats == {"received": 1, "replies_suppressed": 1}


def test_return_path_sub_tlvs_read_as_the_reference(configure: Configure) -> None:
    """RFC 9503 section 4.1: a Control Code anywhere in the TLV is honoured; sub-TLVs that do
    not parse make the TLV malformed (M), not a path refused."""
    pair = configure()
    got, ref, stats = pair.exchange(
        probe(1, tlvs=(ReturnPath(segments=RETURN_SIDS, control_code=0),))
    )
    no_reply(got, ref)
    assert stats == {"received": 1, "replies_suppressed": 1}

    # reply on the same link: not something srv6pm-reflect can pin (as the reference without
    # the link), U and not counted as a refused path
    same_link = (ReturnPath(control_code=1), ExtraPadding(4))
    got, ref, stats = pair.exchange(probe(2, tlvs=same_link))
    assert same_reply(pair, got, ref).tlvs[0].flags == FLAG_U
    assert stats == {"received": 1, "reflected": 1}

    sid_list_of_17 = ReturnPath(other=(SubTlv(4, bytes(17)),))
    past_the_tlv = UnknownTlv(10, bytes((0, 4, 0, 32)) + bytes(16))
    for bad in (sid_list_of_17, past_the_tlv):
        got, ref, stats = pair.exchange(probe(3, tlvs=(bad, ClassOfService(dscp1=1))))
        mine = same_reply(pair, got, ref)
        assert [t.flags for t in mine.tlvs] == [FLAG_M, FLAG_U]
        assert stats == {"received": 1, "reflected": 1}


def test_unknown_and_malformed_tlvs_are_flagged_as_the_reference(configure: Configure) -> None:
    pair = configure()
    unknown = UnknownTlv(200, b"\x01\x02\x03\x04")
    got, ref, _ = pair.exchange(probe(1, tlvs=(unknown, ExtraPadding(4))))
    assert same_reply(pair, got, ref).tlvs == (
        dataclasses.replace(unknown, flags=FLAG_U),
        ExtraPadding(4),
    )

    # a TLV whose Length runs past the end of the packet: M, and the rest as it was
    past_end = MalformedTlv(bytes((0, 5, 0, 40)) + bytes(8))
    got, ref, _ = pair.exchange(probe(2, tlvs=(ExtraPadding(4), past_end)))
    mine = same_reply(pair, got, ref)
    assert [t.flags for t in mine.tlvs] == [0, FLAG_M]

    # a known TLV of the wrong length: M, and U on every TLV after it
    short_dm = MalformedTlv(bytes((0, 5, 0, 8)) + bytes(8))
    rest = (ClassOfService(dscp1=1), unknown, ExtraPadding(2))
    got, ref, stats = pair.exchange(probe(3, tlvs=(short_dm, *rest)), traffic_class=4)
    mine = same_reply(pair, got, ref)
    assert [t.flags for t in mine.tlvs] == [FLAG_M, FLAG_U, FLAG_U, FLAG_U]
    assert got is not None and got.traffic_class == 0  # Class of Service not acted on
    assert stats == {"received": 1, "reflected": 1}


def test_a_probe_of_many_tlvs_is_read_to_its_end(configure: Configure) -> None:
    pair = configure()
    tlvs: tuple[Tlv, ...] = (*[ExtraPadding(0)] * 150, UnknownTlv(200, b"\x01"), ExtraPadding(1))
    got, ref, _ = pair.exchange(probe(1, tlvs=tlvs) + bytes(30))  # and an MBZ tail
    mine = same_reply(pair, got, ref)
    assert [t.flags for t in mine.tlvs] == [0] * 150 + [FLAG_U, 0]


def test_tlv_types_vpp_does_not_process_come_back_with_u_unchanged(configure: Configure) -> None:
    pair = configure()
    tlvs: tuple[Tlv, ...] = (
        Location(),
        TimestampInformation(),
        AccessReport(access_id=1, return_code=1),
        UnknownTlv(7, bytes(12)),  # Follow-up Telemetry (RFC 9534)
        DestinationNodeAddress(REFLECTOR),
        UnknownTlv(11, bytes(4)),  # Micro-session ID (RFC 9534)
    )
    sent = probe(1, tlvs=tlvs)
    got, _ref, stats = pair.exchange(sent)
    assert got is not None
    expected = bytearray(sent[codec.UNAUTH_BASE_LEN :])
    off = 0
    for tlv, kind in zip(tlvs, NOT_PROCESSED_IN_VPP, strict=True):
        assert expected[off + 1] == kind, tlv
        expected[off] = FLAG_U
        off += TLV_HLEN + struct.unpack_from("!H", expected, off + 2)[0]
    assert tlv_octets(got) == bytes(expected)
    assert stats == {"received": 1, "reflected": 1}


# ---- malformed and spoofed ----------------------------------------------------------------


def test_malformed_and_spoofed_probes_leave_the_session_alone(configure: Configure) -> None:
    pair = configure(stateful=True)
    sent_ns, block = reported_block()
    pair.publish(block, 11, 12)
    got, ref, _ = pair.exchange(probe(1))
    assert same_reply(pair, got, ref).seq == 0

    got, ref, stats = pair.exchange(probe(2)[:10])
    no_reply(got, ref)
    assert stats == {"received": 1, "malformed": 1}

    # to another of VPP's addresses, on the reflector's port: not the reflector's
    h1 = pair.bench.h1
    before = pair.stats()
    h1.send(probe(3), dst=R_ON_H1_LINK)
    assert h1.receive(SILENCE_S) is None
    assert changed(before, pair.stats()) == {"received": 1, "not_for_us": 1}

    # from a host and an SSID no session declares: answered, with no counts
    dm = (DirectMeasurement(s_txc=5),)
    spoofed = probe(4, ssid=UNDECLARED_SSID, tlvs=dm, sent_ns=sent_ns)
    got, ref, stats = pair.exchange(spoofed, host=pair.bench.h2)
    mine = same_reply(pair, got, ref)
    assert (mine.seq, mine.tlvs) == (0, (DirectMeasurement(5, 0, 0, FLAG_U),))
    assert stats == {"received": 1, "reflected": 1, "counters_unavailable": 1}

    # a UDP Length shorter than the datagram: 10 octets of STAMP, as a kernel would read it
    full = probe(5)
    before = pair.stats()
    h1.send_raw_udp(8 + 10, full)
    ref = pair.reflect_in_reference(full[:10], h1, 0, time.time_ns())
    no_reply(h1.receive(SILENCE_S), ref)
    assert changed(before, pair.stats()) == {"received": 1, "malformed": 1}

    # no reply wanted: no sequence number taken
    got, ref, stats = pair.exchange(probe(6, tlvs=(ReturnPath(control_code=0),)))
    no_reply(got, ref)
    assert stats == {"received": 1, "replies_suppressed": 1}

    got, ref, _ = pair.exchange(probe(7, tlvs=dm, sent_ns=sent_ns))
    mine = same_reply(pair, got, ref)
    assert mine.seq == 1  # the session's count went on where it was
    assert mine.tlvs == (DirectMeasurement(5, 11, 12),)
