"""srv6pm's STAMP against independent implementations on the lab's SRv6 paths: stamp-suite
(crates.io, built by scripts/install-deps.sh) in both roles, its Session-Sender on r1 against
r3's reflector and r1's Session-Sender against its reflector on r3, unauthenticated and
authenticated, with and without Direct Measurement; and a TWAMP-Light Session-Sender as twampy
writes its packets (RFC 5357 Appendix I: 14 octets and zero padding) against r3's reflector.
Sequence numbers, counters and two-way delay must agree between them.

Each test runs in two labs: r3 a Linux router (the node manager's reflector: in the kernel or
in userspace) and r3 a VPP router (topology vpp-egress: the plugin's srv6pm-reflect, reached
after VPP's End.DT6 decapsulates r1's probes). A VPP router's kernel holds no address, so
stamp-suite's own reflector runs only on a Linux r3."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import block_packets, run_sender, running_lab
from srv6pm.lab import scenario
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import (
    FORWARD,
    H1,
    H2,
    R1_PROBE_ADDRESS,
    R3_REFLECTOR_ADDRESS,
    REVERSE,
    REVERSE_SIDS,
    SESSION,
)
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]

KEY = bytes(range(32))
STAMP_SUITE_PORT = 8620  # its reflector, beside ours (862) on r3's address
INTEROP = "to-stamp-suite"
AUTH = pytest.mark.parametrize("key", [b"", KEY], ids=["open", "authenticated"])
DM = pytest.mark.parametrize("direct", [False, True], ids=["delay", "direct-measurement"])
# r3 Linux, r3 VPP
TOPOLOGIES = ("default", "vpp-egress")
# what every reflector counts alike (pb.ReflectorStats and, on VPP, pb.KernelReflectorStats)
REFUSED = ("malformed", "auth_failures", "return_paths_refused", "tlv_integrity_failures")


@pytest.fixture(scope="module", params=TOPOLOGIES)
def lab(request: pytest.FixtureRequest, marking_mode: pb.MarkingMode) -> Iterator[Lab]:
    with running_lab(
        request, marking_mode, topology_name=request.param, prefix_start="ti"
    ) as instance:
        yield instance


def reflector_counts(lab: Lab) -> dict[str, int]:
    """r3's reflector, whichever answers: reflected is the replies of the userspace reflector
    and of the data plane's (the in-kernel one or VPP's); the rest as each counts them."""
    got = scenario.stub(lab, "r3").ReadResults(pb.ReadResultsRequest())
    ours, data_plane = got.reflector, got.kernel_reflector
    counts = {name: getattr(ours, name) + getattr(data_plane, name) for name in REFUSED}
    counts["reflected"] = ours.reflected + data_plane.reflected
    return counts


def counted_since(lab: Lab, before: dict[str, int]) -> dict[str, int]:
    return {k: v - before[k] for k, v in reflector_counts(lab).items()}


def auth_args(key: bytes) -> list[str]:
    return ["-A", "A", "--hmac-key", key.hex(), "--verify-tlv-hmac"] if key else []


def flags_seen(summary: dict[str, Any]) -> dict[str, int]:
    flags: dict[str, int] = summary["measurements"]["tlv_validation"]["flags"]
    return flags


def test_its_sender_against_our_reflector(lab, blocks, stamp_suite):
    """Per variant: 3 probes in block k+1's safe window carry r3's counters of block k; every
    TLV comes back with no flag; the HMAC TLVs verify both ways; r3 counts nothing refused."""
    before = reflector_counts(lab)
    for key in (b"", KEY):
        scenario.apply_states(lab, scenario.stamp_states(lab, key, key))
        for direct in (False, True):
            block = blocks.next()
            lab.send_udp("h1", H2, 50, interval=0.0005)
            lab.send_udp("h2", H1, 30, interval=0.0005)
            time.sleep(max(0.0, blocks.start(block + 1) + 0.6 - time.time()))
            args = ["--count", "3", "--send-delay", "100ms", *auth_args(key)]
            # a Return Path among those r3 declared for r1: selected, not refused
            args += ["--return-srv6-sids", ",".join(REVERSE_SIDS)]
            summary = run_sender(lab, stamp_suite, args + (["--direct-measurement"] * direct))
            variant = (key != b"", direct)
            assert (summary["packets_sent"], summary["packets_received"]) == (3, 3), variant
            assert summary["measurements"]["answered_probes"] == 3, variant
            assert flags_seen(summary) == dict.fromkeys(flags_seen(summary), 0), variant
            hmac = summary["measurements"]["tlv_validation"]["hmac"]
            assert hmac["verified" if key else "not_requested"] == 3, (variant, hmac)
            if direct:
                blocks.wait_readable(block)
                counted = block_packets(lab, "r3", block)
                dm = summary["measurements"]["direct_measurement"]["latest_transmit"]
                assert (dm["reflector_rx"], dm["reflector_tx"]) == (
                    counted[FORWARD],
                    counted[REVERSE],
                ), variant
                assert counted[FORWARD] == 51 and counted[REVERSE] == 31  # + our probe each way
    counted = counted_since(lab, before)
    assert {k: counted[k] for k in REFUSED} == dict.fromkeys(REFUSED, 0), counted
    assert counted["reflected"] >= 4 * 3, counted  # r1's own session's probes too
    scenario.apply_states(lab, scenario.stamp_states(lab))


@contextlib.contextmanager
def its_reflector(lab, binary: str, key: bytes, log: Path) -> Iterator[list[str]]:
    """stamp-suite as stateful Session-Reflector on r3; yields the lines it printed when it
    stopped (its per-session rx/tx counts)."""
    argv = [binary, "--is-reflector", "--stateful-reflector", "--clock-synchronized"]
    argv += ["--local-addr", R3_REFLECTOR_ADDRESS, "--local-port", str(STAMP_SUITE_PORT)]
    with log.open("w") as out:
        proc = lab.popen("r3", [*argv, *auth_args(key)], stdout=out, stderr=subprocess.STDOUT)
    printed: list[str] = []
    try:
        time.sleep(0.5)
        assert proc.poll() is None, log.read_text()[-2000:]
        yield printed
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        printed += log.read_text().splitlines()


def add_session(states: dict[str, pb.NodeState], key: bytes, direct: bool, delay_ms: int) -> None:
    # No SID list of its own: r1's policy to r3's address (the main session's) carries it, and
    # r3's declared return path carries the replies.
    states["r1"].sessions.add(
        name=INTEROP,
        ssid=5,
        reflector_address=R3_REFLECTOR_ADDRESS,
        reflector_port=STAMP_SUITE_PORT,
        source_address=R1_PROBE_ADDRESS,
        forward_flow=FORWARD if direct else "",
        reverse_flow=REVERSE if direct else "",
        delay_interval_ms=delay_ms,
        hmac_key=key,
    )


def read(lab, session: str, since_block: int = 0) -> pb.ReadResultsResponse:
    request = pb.ReadResultsRequest(session=session, since_block=since_block)
    return scenario.stub(lab, "r1").ReadResults(request)


# stamp-suite's reflector runs in r3's kernel: a Linux r3 only (a VPP router's kernel holds none
# of its addresses)
@pytest.mark.parametrize("lab", ["default"], indirect=True)
@AUTH
@DM
def test_our_sender_against_its_reflector(lab, blocks, stamp_suite, tmp_path, key, direct):
    """One probe per block, read and stopped away from any probe: stamp-suite received exactly
    the probes r1 sent and sent exactly the replies r1 received; none malformed or failing
    authentication; the Direct Measurement counters it returned (its own probe counts) arrive
    intact and in order."""
    states = scenario.stamp_states(lab)
    add_session(states, key, direct, delay_ms=0)
    with its_reflector(lab, stamp_suite, key, tmp_path / "stamp-suite.log") as printed:
        first = blocks.next()
        scenario.apply_states(lab, states)
        # probes leave ~1.0 s into each block; read and stop 0.2 s into one
        time.sleep(max(0.0, blocks.start(first + 4) + 0.2 - time.time()))
        got = read(lab, INTEROP, since_block=first)  # the journal keeps earlier runs' too
        scenario.apply_states(lab, scenario.stamp_states(lab))
    (stats,) = got.senders
    assert stats.sent >= 3 and (stats.malformed, stats.auth_failures, stats.lost) == (0, 0, 0)
    counts = [
        (int(m[1]), int(m[2]))
        for line in printed
        if (m := re.search(r"SSID=5 .*rx: (\d+), tx: (\d+)", line))
    ]
    assert counts == [(stats.sent, stats.received)], printed[-20:]
    assert stats.received == stats.sent
    assert sorted(d.seq for d in got.probes) == list(range(stats.sent))
    assert all(0 < d.two_way_ns < 20_000_000 for d in got.probes)
    if not direct:
        assert not got.loss
        return
    assert [r.valid for r in got.loss] == [True] * stats.sent, [r.reason for r in got.loss]
    # stamp-suite's R_RxC counts the probes it received, this one included; R_TxC the replies
    # it sent before this one
    assert [(r.forward.rx, r.reverse.tx) for r in got.loss] == [
        (n, n - 1) for n in range(1, stats.sent + 1)
    ]


def test_two_way_delay_agrees_with_stamp_suite_both_ways(lab, stamp_suite, tmp_path):
    """With 5 ms held on r2 toward r3, at the same time: stamp-suite's sender against our
    reflector, our sender against stamp-suite's reflector (a Linux r3 only), and our sender
    against ours. Their median two-way delays agree within 0.5 ms."""
    with_theirs = not lab.topology.is_vpp("r3")
    states = scenario.stamp_states(lab, delay_interval_ms=50)
    if with_theirs:
        add_session(states, b"", direct=False, delay_ms=50)
    with contextlib.ExitStack() as stack:
        if with_theirs:
            stack.enter_context(its_reflector(lab, stamp_suite, b"", tmp_path / "stamp-suite.log"))
        scenario.apply_states(lab, states)
        try:
            with lab.delay("r2", "r3", 5.0):
                started = time.time_ns()
                summary = run_sender(lab, stamp_suite, ["--count", "40", "--send-delay", "50ms"])
                ours = read(lab, SESSION).probes
                to_theirs = read(lab, INTEROP).probes if with_theirs else []
        finally:
            scenario.apply_states(lab, scenario.stamp_states(lab))

    def median_ms(delays) -> float:
        recent = [d.two_way_ns / 1e6 for d in delays if d.sent_unix_ns >= started]
        assert len(recent) >= 20
        return statistics.median(recent)

    theirs_to_ours, ours_to_ours = summary["median_rtt_ms"], median_ms(ours)
    print(
        f"5 ms held: two-way median stamp-suite -> srv6pm {theirs_to_ours:.3f} ms, "
        f"srv6pm -> srv6pm {ours_to_ours:.3f} ms"
    )
    assert summary["packets_received"] == 40
    assert abs(theirs_to_ours - ours_to_ours) < 0.5
    assert 5.0 < ours_to_ours < 6.5
    if with_theirs:
        ours_to_theirs = median_ms(to_theirs)
        print(f"srv6pm -> stamp-suite {ours_to_theirs:.3f} ms")
        assert abs(ours_to_theirs - ours_to_ours) < 0.5


# A TWAMP-Light Session-Sender as twampy's writes its packets: Sequence Number, NTP Timestamp,
# Error Estimate (S set, scale 0, multiplier 1), then `padding` zero octets. It prints what came
# back, one JSON object per reply, with its own send and receive times (NTP).
TWAMP_LIGHT_SENDER = """
import json, socket, struct, sys, time
src, dst = sys.argv[1:3]
port, count, padding = map(int, sys.argv[3:6])
def ntp():
    ns = time.time_ns()
    return ((ns // 10**9 + 2208988800) << 32) | ((ns % 10**9) << 32) // 10**9
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((src, 0))
s.settimeout(1.0)
for seq in range(count):
    t1 = ntp()
    s.sendto(struct.pack("!IQH", seq, t1, 0x8001) + bytes(padding), (dst, port))
    try:
        data = s.recv(2048)
    except socket.timeout:
        continue
    print(json.dumps({"t1": t1, "t4": ntp(), "reply": data.hex()}), flush=True)
    time.sleep(0.01)
"""
TWAMP_LIGHT_PROBES = 10
REFLECTOR_BASE = 44  # a STAMP reflector answers a shorter probe with its whole base


def twamp_light(lab: Lab, padding: int) -> list[dict[str, Any]]:
    """TWAMP_LIGHT_PROBES probes from r1's probe address to r3's reflector: the replies."""
    argv = [sys.executable, "-c", TWAMP_LIGHT_SENDER, R1_PROBE_ADDRESS, R3_REFLECTOR_ADDRESS]
    argv += ["862", str(TWAMP_LIGHT_PROBES), str(padding)]
    done = lab.exec("r1", argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("padding", [0, 27], ids=["14-octets", "41-octets"])
def test_a_twamp_light_sender_gets_every_reply_with_its_fields(lab, blocks, padding):
    """Between r1's own probes (stateful reflector, SSID 0 is a sender of its own): one reply per
    probe, 44 octets or the probe's size, the probe's sequence number, timestamp and Error
    Estimate echoed, consecutive reflector sequence numbers, T1 <= T2 <= T3 <= T4 (one clock),
    SSID 0, and each reply counted by r3's reflector, nothing refused."""
    scenario.apply_states(lab, scenario.stamp_states(lab))
    blocks.next()  # r1's session probes ~1.0 s into a block: 10 probes take ~0.1 s
    before = reflector_counts(lab)
    got = twamp_light(lab, padding)
    counted = counted_since(lab, before)
    assert len(got) == TWAMP_LIGHT_PROBES, got
    replies = [(g["t1"], g["t4"], bytes.fromhex(g["reply"])) for g in got]
    size = max(14 + padding, REFLECTOR_BASE)
    assert [len(r) for _, _, r in replies] == [size] * TWAMP_LIGHT_PROBES
    fields = [struct.unpack_from("!IQHHQIQHxxB", r) for _, _, r in replies]
    seqs = [f[0] for f in fields]
    assert seqs == list(range(seqs[0], seqs[0] + TWAMP_LIGHT_PROBES))
    assert [f[5] for f in fields] == list(range(TWAMP_LIGHT_PROBES))  # Sender Sequence Number
    for (t1, t4, _), (_, t3, ee, ssid, t2, _, sender_t, sender_ee, ttl) in zip(
        replies, fields, strict=True
    ):
        assert (sender_t, sender_ee, ssid) == (t1, 0x8001, 0)
        assert ee & 0x4000 == 0  # NTP, as the sender asked
        assert t1 <= t2 <= t3 <= t4, (t1, t2, t3, t4)
        assert t4 - t1 < 1 << 32  # within a second
        assert 0 < ttl <= 64
    assert {k: counted[k] for k in REFUSED} == dict.fromkeys(REFUSED, 0), counted
    assert counted["reflected"] == TWAMP_LIGHT_PROBES, counted
