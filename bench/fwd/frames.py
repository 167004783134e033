"""The frames the generator sends: addresses of policy or flow i, scapy-built templates and
their copies for i = 0..N-1, the file pktgen --frames reads."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence
from pathlib import Path

from scapy.layers.inet import UDP
from scapy.layers.inet6 import HBHOptUnknown, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from bench.fwd.common import (
    ALTMARK_COLOUR,
    DSCP_MARKED,
    END_SID,
    FRAME_BYTES,
    GEN_SRC,
    PAYLOAD,
    UDP_PORT,
)
from bench.harness.run import BenchError


def destination(i: int) -> str:
    """The customer destination of policy (ingress) or flow (transit) i."""
    return f"fd00:2::{i + 1:x}"


def ingress_sids(i: int) -> tuple[str, str]:
    """SID list of r1's policy i (ingress role); fc00:0:2::/48 is routed to sink."""
    return (f"fc00:0:2:{i:x}::e", "fc00:0:3::d6")


def transit_sids(i: int) -> tuple[str, str]:
    """SID list of flow i as the upstream head-end built it (transit role): r1's End SID, then
    a SID of fc00:0:3::/48, routed to sink."""
    return (END_SID, f"fc00:0:3:{i:x}::d6")


def altmark_data(flow_mon_id: int) -> bytes:
    """RFC 9343 AltMark option data: FlowMonID (20 bits), L, D = 0, 10 reserved bits."""
    return (flow_mon_id << 12 | ALTMARK_COLOUR << 11).to_bytes(4, "big")


def scapy_frame(kind: str, i: int, src_mac: str, dst_mac: str) -> bytes:
    """Frame i of a kind, built by scapy: "ip" (plain IPv6/UDP to destination i, for the ingress
    role), "altmark" or "dscp" (what an upstream head-end sends for flow i after H.Encaps and
    marking: outer IPv6 to r1's End SID, [AltMark Destination Options header,] SRH with
    Segments Left 1, the customer's IPv6/UDP packet)."""
    inner = IPv6(src=GEN_SRC, dst=destination(i)) / UDP(sport=UDP_PORT, dport=UDP_PORT)
    inner = inner / Raw(PAYLOAD)
    eth = Ether(src=src_mac, dst=dst_mac)
    if kind == "ip":
        return bytes(eth / inner)
    outer = IPv6(src=GEN_SRC, dst=END_SID, tc=DSCP_MARKED if kind == "dscp" else 0)
    srh = IPv6ExtHdrSegmentRouting(addresses=list(reversed(transit_sids(i))), segleft=1)
    if kind == "altmark":
        option = HBHOptUnknown(otype=0x12, optlen=4, optdata=altmark_data(i + 1))
        return bytes(eth / outer / IPv6ExtHdrDestOpt(options=[option]) / srh / inner)
    return bytes(eth / outer / srh / inner)


def _ones_sum(data: bytes) -> int:
    words: tuple[int, ...] = struct.unpack(f"!{len(data) // 2}H", data[: len(data) & ~1])
    total = sum(words)
    if len(data) & 1:
        total += data[-1] << 8
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def build_frames(kind: str, n: int, src_mac: str, dst_mac: str) -> list[bytes]:
    """Frames 0..n-1 of a kind: scapy builds frame 0, the others are copies with the addresses,
    the AltMark option and the UDP checksum rewritten (scapy takes ~1 ms a frame). A few are
    checked against scapy's own."""
    template = scapy_frame(kind, 0, src_mac, dst_mac)
    inner = 14 if kind == "ip" else 14 + 40 + (8 if kind == "altmark" else 0) + 8 + 32
    udp = inner + 40
    frames = []
    for i in range(n):
        f = bytearray(template)
        f[inner + 24 : inner + 40] = ipaddress.IPv6Address(destination(i)).packed
        if kind != "ip":  # the SRH's Segment List[0]: the last SID
            f[inner - 32 : inner - 16] = ipaddress.IPv6Address(transit_sids(i)[1]).packed
        if kind == "altmark":
            f[14 + 40 + 4 : 14 + 40 + 8] = altmark_data(i + 1)
        f[udp + 6 : udp + 8] = b"\0\0"
        pseudo = bytes(f[inner + 8 : inner + 40]) + struct.pack("!IxxxB", len(f) - udp, 17)
        checksum = 0xFFFF - _ones_sum(pseudo + bytes(f[udp:]))
        f[udp + 6 : udp + 8] = (checksum or 0xFFFF).to_bytes(2, "big")
        frames.append(bytes(f))
    for i in sorted({0, n // 2, n - 1}):
        if frames[i] != scapy_frame(kind, i, src_mac, dst_mac):
            raise BenchError(f"frame {i} of kind {kind} differs from scapy's")
    if len(template) != FRAME_BYTES[kind]:
        raise BenchError(f"{kind} frames are {len(template)} octets, not {FRAME_BYTES[kind]}")
    return frames


def write_frames(path: Path, frames: Sequence[bytes]) -> Path:
    """The file pktgen --frames reads: each frame preceded by its length (2 octets, big end)."""
    path.write_bytes(b"".join(len(f).to_bytes(2, "big") + f for f in frames))
    return path
