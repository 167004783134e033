"""srv6pm's STAMP against an independent implementation, stamp-suite (crates.io, built by
scripts/install-deps.sh), in both roles on the lab's SRv6 paths: its Session-Sender on r1 against
r3's reflector, and r1's Session-Sender against its reflector on r3; unauthenticated and
authenticated, with and without Direct Measurement. Sequence numbers, counters and two-way delay
must agree between the two."""

from __future__ import annotations

import contextlib
import re
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import block_packets, run_sender
from srv6pm.lab import scenario
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


def auth_args(key: bytes) -> list[str]:
    return ["-A", "A", "--hmac-key", key.hex(), "--verify-tlv-hmac"] if key else []


def flags_seen(summary: dict[str, Any]) -> dict[str, int]:
    flags: dict[str, int] = summary["measurements"]["tlv_validation"]["flags"]
    return flags


def test_its_sender_against_our_reflector(lab, blocks, stamp_suite):
    """Per variant: 3 probes in block k+1's safe window carry r3's counters of block k; every
    TLV comes back with no flag; the HMAC TLVs verify both ways."""
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
    stats = scenario.stub(lab, "r3").ReadResults(pb.ReadResultsRequest()).reflector
    assert stats.return_paths_refused == 0 and stats.tlv_integrity_failures == 0
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
    reflector, our sender against stamp-suite's reflector, and our sender against ours. Their
    median two-way delays agree within 0.5 ms."""
    states = scenario.stamp_states(lab, delay_interval_ms=50)
    add_session(states, b"", direct=False, delay_ms=50)
    with its_reflector(lab, stamp_suite, b"", tmp_path / "stamp-suite.log"):
        scenario.apply_states(lab, states)
        try:
            with lab.delay("r2", "r3", 5.0):
                started = time.time_ns()
                summary = run_sender(lab, stamp_suite, ["--count", "40", "--send-delay", "50ms"])
                ours = read(lab, SESSION).probes
                to_theirs = read(lab, INTEROP).probes
        finally:
            scenario.apply_states(lab, scenario.stamp_states(lab))

    def median_ms(delays) -> float:
        recent = [d.two_way_ns / 1e6 for d in delays if d.sent_unix_ns >= started]
        assert len(recent) >= 20
        return statistics.median(recent)

    theirs_to_ours = summary["median_rtt_ms"]
    ours_to_ours, ours_to_theirs = median_ms(ours), median_ms(to_theirs)
    print(
        f"5 ms held: two-way median stamp-suite -> srv6pm {theirs_to_ours:.3f} ms, "
        f"srv6pm -> stamp-suite {ours_to_theirs:.3f} ms, srv6pm -> srv6pm {ours_to_ours:.3f} ms"
    )
    assert summary["packets_received"] == 40
    assert abs(theirs_to_ours - ours_to_ours) < 0.5
    assert abs(ours_to_theirs - ours_to_ours) < 0.5
    assert 5.0 < ours_to_ours < 6.5
