"""STAMP along the SRv6 policies in a real lab, through gRPC only: a Session-Sender on r1,
a stateful Session-Reflector on r3, probes on h1-h2's SID list and replies on h2-h1's (Return
Path TLV). Loss per block must equal the injected drops exactly, in both directions."""

from __future__ import annotations

import statistics
import sys
import time

import pytest
from conftest import loss_of, loss_with_injected_drops, stamp_results
from srv6pm.lab import scenario
from srv6pm.lab.scenario import FORWARD_SIDS, H2, REVERSE_SIDS
from srv6pm.proto.v1 import node_manager_pb2 as pb

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def stamp_lab(lab):
    scenario.apply_states(lab, scenario.stamp_states(lab))
    yield lab
    scenario.apply(lab)


def test_loss_per_block_equals_injected_drops_in_each_direction(stamp_lab, blocks):
    lab = stamp_lab
    blocks.next()  # the session has probed at least one block before
    block, result = loss_with_injected_drops(lab, blocks)
    assert result.valid, result.reason
    # +1 each way: the probe of the previous block and its reply travel during this block on
    # the same SID lists, and are counted at both ends like any packet of the flows
    assert (result.forward.tx, result.forward.rx, result.forward.lost) == (101, 96, 5)
    assert (result.reverse.tx, result.reverse.rx, result.reverse.lost) == (61, 58, 3)
    for other in (block - 1, block + 1):
        r = loss_of(lab, other, blocks)
        assert r.valid, r.reason
        assert (r.forward.lost, r.reverse.lost) == (0, 0), other


def test_a_lost_probe_makes_only_its_block_invalid(stamp_lab, blocks):
    lab = stamp_lab
    block = blocks.next()
    lab.send_udp("h1", H2, 40, interval=0.0005)
    # block's probe leaves in the middle of block + 1: drop exactly that packet
    time.sleep(max(0.0, blocks.start(block + 1) + 0.2 - time.time()))
    lab.drop("r2", "r3", 1, dst=FORWARD_SIDS[1])
    time.sleep(max(0.0, blocks.start(block + 2) - time.time()))
    lab.clear_drops("r2")
    lost = loss_of(lab, block, blocks)
    assert not lost.valid and lost.reason == "probe lost"
    before, after = loss_of(lab, block - 1, blocks), loss_of(lab, block + 1, blocks)
    assert before.valid and after.valid
    # the lost probe was itself a packet of block + 1 on the forward flow
    assert (after.forward.lost, after.reverse.lost) == (1, 0)
    assert stamp_results(lab).senders[0].lost >= 1


def test_wrong_key_is_rejected_and_counted_without_breaking_anything(lab, blocks):
    states = scenario.stamp_states(lab, sender_key=b"k" * 32, reflector_key=b"x" * 32)
    scenario.apply_states(lab, states)
    try:
        r3 = scenario.stub(lab, "r3")
        before = r3.ReadResults(pb.ReadResultsRequest()).reflector.auth_failures
        block = blocks.next()
        lost = loss_of(lab, block, blocks)
        assert not lost.valid and lost.reason == "probe lost"
        assert r3.ReadResults(pb.ReadResultsRequest()).reflector.auth_failures > before
        # the same key on both sides works at once
        states = scenario.stamp_states(lab, sender_key=b"k" * 32, reflector_key=b"k" * 32)
        scenario.apply_states(lab, states)
        good = loss_of(lab, blocks.next(), blocks)
        assert good.valid, good.reason
    finally:
        scenario.apply_states(lab, scenario.stamp_states(lab))


def test_two_way_delay_is_within_a_millisecond_of_the_injected_delay(lab, blocks):
    """The path's own delay (veths, the sender's userspace timestamps: ~0.3 ms idle, more on a
    busy machine) is measured first; what is injected must show on top of it."""
    scenario.apply_states(lab, scenario.stamp_states(lab, delay_interval_ms=50))
    try:
        started = time.time_ns()
        time.sleep(2.5)
        base = stamp_results(lab, since_ns=started).probes
        with lab.delay("r2", "r3", 20.0):
            started = time.time_ns()
            time.sleep(2.5)
            delayed = stamp_results(lab, since_ns=started).probes
        assert len(base) >= 20 and len(delayed) >= 20
        base_ms = statistics.median(d.two_way_ns for d in base) / 1e6
        delays = [d.two_way_ns / 1e6 for d in delayed]
        median = statistics.median(delays)
        print(
            f"path {base_ms:.3f} ms; injected 20 ms: two-way median {median:.3f} ms, "
            f"min {min(delays):.3f}, max {max(delays):.3f} ({len(delays)} probes)"
        )
        assert abs(median - base_ms - 20.0) < 1.0
        one_way = [d.forward_ns for d in delayed if d.one_way_valid]
        one_way_base = [d.forward_ns for d in base if d.one_way_valid]
        assert one_way and one_way_base
        added = (statistics.median(one_way) - statistics.median(one_way_base)) / 1e6
        assert abs(added - 20.0) < 1.0
    finally:
        scenario.apply_states(lab, scenario.stamp_states(lab))


def test_a_node_manager_restarted_after_kill_9_resumes_its_sessions(stamp_lab, blocks):
    lab = stamp_lab
    lab.stop_node_manager("r1", kill=True)
    lab.start_node_manager("r1")  # no ApplyState: it restores the last applied state itself
    blocks.next()
    block = blocks.next()
    lab.send_udp("h1", H2, 30, interval=0.0005)
    result = loss_of(lab, block, blocks)
    assert result.valid, result.reason
    assert (result.forward.lost, result.reverse.lost) == (0, 0)
    assert result.forward.tx == 31  # 30 packets + the previous block's probe


def test_probes_asking_for_return_paths_nobody_declared_install_nothing(stamp_lab):
    """A stranger on r3's link sends probes with the session's SSID (and with an unknown one),
    each with a forged Return Path TLV: r3 answers them as any STAMP peer, counts the refused
    return paths, and its routes do not change."""
    lab = stamp_lab
    r3 = scenario.stub(lab, "r3")

    def routes() -> str:
        shown = lab.exec("r3", ["ip", "-6", "route", "show"], capture_output=True, text=True)
        return str(shown.stdout)

    before_routes = routes()
    before = r3.ReadResults(pb.ReadResultsRequest()).reflector
    spoof = (
        "import socket\n"
        "from srv6pm.twamp import codec\n"
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "forged = (codec.ReturnPath(('fc00:0:66::e',), None, None),)\n"
        "for ssid in (1, 2, 1, 2, 1):\n"
        "    p = codec.SenderPacket(7, 1, 0, ssid, forged)\n"
        f"    s.sendto(codec.encode_sender(p), ('{scenario.R3_REFLECTOR_ADDRESS}', 862))\n"
    )
    lab.exec("r2", [sys.executable, "-c", spoof], check=True)
    time.sleep(1.0)
    after = r3.ReadResults(pb.ReadResultsRequest()).reflector
    assert after.return_paths_refused - before.return_paths_refused == 5
    assert after.received - before.received >= 5
    assert routes() == before_routes
    # the declared return path is the one route STAMP made on r3
    declared = lab.exec(
        "r3",
        ["ip", "-6", "route", "show", f"{scenario.R1_PROBE_ADDRESS}/128"],
        capture_output=True,
        text=True,
    )
    assert "encap seg6" in declared.stdout and REVERSE_SIDS[0] in declared.stdout


def test_get_state_returns_the_stamp_sessions_and_reflector_without_keys(lab):
    states = scenario.stamp_states(lab, sender_key=b"k" * 32, reflector_key=b"k" * 32)
    scenario.apply_states(lab, states)
    try:
        r1 = scenario.stub(lab, "r1").GetState(pb.GetStateRequest())
        r3 = scenario.stub(lab, "r3").GetState(pb.GetStateRequest())
    finally:
        scenario.apply_states(lab, scenario.stamp_states(lab))
    (session,) = r1.sessions
    expected = pb.SenderSession()
    expected.CopyFrom(states["r1"].sessions[0])
    expected.hmac_key = b""
    expected.reflector_port = 862
    assert session == expected
    assert r3.reflector.enabled and r3.reflector.address == scenario.R3_REFLECTOR_ADDRESS
    assert r3.reflector.hmac_key == b"" and r3.reflector.port == 862
    assert list(r3.reflector.sessions) == list(states["r3"].reflector.sessions)
    info = scenario.stub(lab, "r3").GetInfo(pb.GetInfoRequest())
    assert any("unauthenticated" in w for w in info.warnings)  # the scenario's own reflector


def test_a_delay_only_session_needs_no_monitored_flow(stamp_lab):
    """Delay and jitter to a reflector, no Direct Measurement: no flow named on either side."""
    lab = stamp_lab
    states = scenario.stamp_states(lab)
    states["r1"].sessions.add(
        name="delay-only",
        ssid=2,
        reflector_address=scenario.R3_REFLECTOR_ADDRESS,
        source_address=scenario.R1_PROBE_ADDRESS,
        delay_interval_ms=50,
    )
    scenario.apply_states(lab, states)
    try:
        time.sleep(1.5)
        got = scenario.stub(lab, "r1").ReadResults(pb.ReadResultsRequest(session="delay-only"))
    finally:
        scenario.apply_states(lab, scenario.stamp_states(lab))
    assert not got.loss
    assert len(got.probes) >= 15
    assert all(0 < d.two_way_ns < 50_000_000 for d in got.probes)
    (stats,) = got.senders
    assert stats.received >= 15 and stats.malformed == 0
