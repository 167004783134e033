"""An independent decoder: tshark's TWAMP-Test dissector reads our STAMP packets (STAMP's
unauthenticated layout is TWAMP-Light's, RFC 8762 4.6). Needs tshark (apt-get install tshark):
missing, the test fails instead of skipping, so CI cannot pass without the check."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
from pathlib import Path

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap
from srv6pm.twamp import codec
from srv6pm.twamp.timestamps import ntp_from_unix_ns

# Field names from `tshark -G fields | grep twamp.test` (Wireshark 4.0).
FIELDS = [
    "twamp.test.seq_number",
    "twamp.test.timestamp",
    "twamp.test.error_estimate",
    "twamp.test.receive_timestamp",
    "twamp.test.sender_seq_number",
    "twamp.test.sender_timestamp",
    "twamp.test.sender_error_estimate",
    "twamp.test.sender_ttl",
]

T1 = 1_790_000_000_123_456_789  # Unix ns
T2, T3 = T1 + 40_000_001, T1 + 40_500_003


def _ns(text: str) -> int:
    """Unix ns of tshark's absolute time, e.g. 'Sep 21, 2026 14:13:20.123456788 UTC'."""
    m = re.fullmatch(r"(\w{3}) +(\d+), (\d{4}) (\d\d):(\d\d):(\d\d)\.(\d{9}) UTC", text.strip())
    assert m, text
    month = dt.datetime.strptime(m[1], "%b").month
    when = dt.datetime(int(m[3]), month, int(m[2]), int(m[4]), int(m[5]), int(m[6]), tzinfo=dt.UTC)
    return int(when.timestamp()) * 1_000_000_000 + int(m[7])


def _truncated_ns(ntp: int) -> int:
    """What Wireshark shows for an NTP timestamp: the fraction truncated to whole ns."""
    return ((ntp >> 32) - 2_208_988_800) * 1_000_000_000 + ((ntp & 0xFFFFFFFF) * 10**9 >> 32)


def test_tshark_decodes_sender_and_reflector(tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is missing: apt-get install -y tshark"
    probe = codec.SenderPacket(4242, ntp_from_unix_ns(T1), 0x8105, 7)
    answer = codec.make_reflection(
        probe,
        seq=99,
        timestamp=ntp_from_unix_ns(T3),
        error_estimate=0x0A20,
        receive_timestamp=ntp_from_unix_ns(T2),
        sender_ttl=61,
    )
    a, b = "2001:db8::a", "2001:db8::b"
    pcap = tmp_path / "stamp.pcap"
    wrpcap(
        str(pcap),
        [
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IPv6(src=a, dst=b)
            / UDP(sport=40001, dport=862)
            / Raw(codec.encode_sender(probe)),
            Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01")
            / IPv6(src=b, dst=a)
            / UDP(sport=862, dport=40001)
            / Raw(codec.encode_reflector(answer)),
        ],
    )
    command = [tshark, "-r", str(pcap), "-d", "udp.port==862,twamp.test", "-T", "fields"]
    command += ["-E", "separator=|"] + [arg for f in FIELDS for arg in ("-e", f)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    rows = [dict(zip(FIELDS, line.split("|"), strict=True)) for line in out.splitlines()]
    assert len(rows) == 2

    # tshark cannot tell a sender packet from a reflector one and reads both with the reflector
    # layout: the first 14 octets (what both share) are what counts for the probe.
    sent, reflected = rows
    assert int(sent["twamp.test.seq_number"]) == 4242
    assert _ns(sent["twamp.test.timestamp"]) == _truncated_ns(probe.timestamp)
    assert abs(_ns(sent["twamp.test.timestamp"]) - T1) <= 1
    assert int(sent["twamp.test.error_estimate"]) == 0x8105

    assert int(reflected["twamp.test.seq_number"]) == 99
    assert _ns(reflected["twamp.test.timestamp"]) == _truncated_ns(answer.timestamp)
    assert int(reflected["twamp.test.error_estimate"]) == 0x0A20
    assert _ns(reflected["twamp.test.receive_timestamp"]) == _truncated_ns(answer.receive_timestamp)
    assert abs(_ns(reflected["twamp.test.receive_timestamp"]) - T2) <= 1
    assert int(reflected["twamp.test.sender_seq_number"]) == 4242
    assert _ns(reflected["twamp.test.sender_timestamp"]) == _truncated_ns(probe.timestamp)
    assert int(reflected["twamp.test.sender_error_estimate"]) == 0x8105
    assert int(reflected["twamp.test.sender_ttl"]) == 61
