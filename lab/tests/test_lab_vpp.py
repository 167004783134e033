"""VPP routers in the lab: the network part (no node managers): VPP processes that come and go
with the lab, VPP's interface names, forwarding through VPP, an idle VPP that sleeps, and exact
loss injection where VPP sends."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from srv6pm.lab import Lab, Topology, scenario
from srv6pm.lab.drops import add_egress_rule_script, parse_rules
from srv6pm.lab.lab import NETNS_DIR
from srv6pm.lab.vpp import cli_error

# h1 -> h2 through r1 (linux), r2 (vpp), r3 (linux) with plain routes (no SRv6)
H2 = "fd00:2::2"
PLAIN_ROUTES = {  # Linux routers: `ip -6 route add` arguments
    "r1": ["fd00:2::/64", "via", "fcf0:12::2"],
    "r3": ["fd00:1::/64", "via", "fcf0:23::2"],
}
VPP_ROUTES = ["fd00:2::/64 via fcf0:23::3 host-r2-r3", "fd00:1::/64 via fcf0:12::1 host-r2-r1"]


def _prefix() -> str:
    return "vl" + secrets.token_hex(2)


@pytest.fixture(scope="module")
def mixed() -> Iterator[Lab]:
    """The mixed topology (r2 is VPP), network only, shared by this module's tests."""
    lab = Lab(Topology.load("mixed"), prefix=_prefix())
    try:
        lab.up(start_node_managers=False)
        yield lab
    finally:
        lab.down()


@contextlib.contextmanager
def plain_routes(lab: Lab) -> Iterator[None]:
    """Routes between h1's and h2's subnets through r1, r2 (VPP) and r3 for the block."""
    for node, route in PLAIN_ROUTES.items():
        lab.exec(node, ["ip", "-6", "route", "add", *route], check=True)
    lab.vpp("r2").cli(*(f"ip route add {r}" for r in VPP_ROUTES))
    try:
        yield
    finally:
        lab.vpp("r2").cli(*(f"ip route del {r}" for r in VPP_ROUTES))
        for node, route in PLAIN_ROUTES.items():
            lab.exec(node, ["ip", "-6", "route", "del", *route])


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


# --- without root ---------------------------------------------------------------------------


def test_interface_is_the_drivers_name_and_kernel_interface_the_veths() -> None:
    lab = Lab(Topology.load("mixed"))
    assert lab.interface("r2", "r1") == "host-r2-r1"
    assert lab.interface("r2", "r3") == "host-r2-r3"
    assert lab.kernel_interface("r2", "r1") == "r2-r1"
    assert lab.interface("r1", "r2") == lab.kernel_interface("r1", "r2") == "r1-r2"
    assert lab.interface("h1", "r1") == "h1-r1"
    with pytest.raises(Exception, match="no link between r1 and r3"):
        lab.kernel_interface("r1", "r3")


def test_vpp_routers_of_the_shipped_topologies() -> None:
    vpp = {name: Topology.load(name).vpp_routers for name in ("mixed", "vpp-ingress")}
    vpp |= {name: Topology.load(name).vpp_routers for name in ("vpp-egress", "vpp-chain")}
    assert vpp == {
        "mixed": ["r2"],
        "vpp-ingress": ["r1"],
        "vpp-egress": ["r3"],
        "vpp-chain": ["r1", "r2", "r3"],
    }
    assert Topology.load("default").vpp_routers == []


def test_node_manager_of_a_vpp_router_drives_its_vpp() -> None:
    lab = Lab(Topology.load("mixed"), prefix=_prefix())
    argv = lab.node_manager_argv("r2")
    sockets = lab.vpp("r2").sockets
    assert argv[argv.index("--driver") + 1] == "vpp"
    assert argv[argv.index("--vpp-api-socket") + 1] == str(sockets.api)
    assert argv[argv.index("--vpp-stats-socket") + 1] == str(sockets.stats)
    assert "--netns" not in argv
    linux = lab.node_manager_argv("r1")
    assert "--driver" not in linux
    assert linux[linux.index("--netns") + 1] == f"{lab.prefix}-r1"


def test_egress_rule_is_read_back_with_its_veth() -> None:
    script = add_egress_rule_script("r2-r3", 5, None, sink="drop_sink")
    assert 'hook egress device "r2-r3"' in script
    assert 'limit rate 1/day burst 5 packets counter fwd to "drop_sink"' in script
    listing = {
        "nftables": [
            {"chain": {"family": "netdev", "table": "srv6pm_lab", "name": "egress-r2-r3"}},
            {
                "rule": {
                    "chain": "egress-r2-r3",
                    "handle": 4,
                    "expr": [
                        {"match": {"left": {"meta": {"key": "protocol"}}, "right": "ip6"}},
                        {
                            "match": {
                                "left": {"payload": {"protocol": "ip6", "field": "daddr"}},
                                "right": "fd00:2::2",
                            }
                        },
                        {"limit": {"rate": 1, "burst": 5, "per": "day"}},
                        {"counter": {"packets": 2, "bytes": 200}},
                        {"fwd": {"dev": "drop_sink"}},
                    ],
                }
            },
        ]
    }
    rule = parse_rules("r2", json.dumps(listing))[4]
    assert (rule.interface, rule.count, rule.dst, rule.dropped) == ("r2-r3", 5, "fd00:2::2", 2)


def test_cli_errors_are_told_from_output() -> None:
    assert cli_error(
        "set interface ip address host-x fcf0::1/64",
        "set interface ip address: unknown interface `host-x fcf0::1/64'",
    )
    assert cli_error("show bogus", "show: unknown input `bogus'")
    assert cli_error("ip route add zz via 1", "ip route: parse error `zz via 1'")
    assert not cli_error(
        "show errors", "Count   Node   Reason   Severity\n  5  ip6-input  x  error"
    )
    assert not cli_error("show sr policies", "SR policies:")
    assert not cli_error("ping fcf0::1", "76 bytes from fcf0::1: icmp_seq=1 ttl=64 time=1 ms")


def test_vpp_lab_comes_and_goes_leaving_nothing() -> None:
    """`down` from another process (the CLI) stops the VPPs and removes their namespaces,
    sockets and shared memory."""
    prefix = _prefix()
    lab = Lab(Topology.load("vpp-chain"), prefix=prefix)
    cli = [sys.executable, "-m", "srv6pm.lab.cli", "lab"]
    try:
        lab.up(start_node_managers=False)
        pids = {r: lab.vpp_pid(r) for r in lab.topology.routers}
        assert all(pid is not None for pid in pids.values()), pids
        status = lab.status()["vpp"]
        assert sorted(status) == ["r1", "r2", "r3"]
        assert all(status[r]["alive"] and Path(status[r]["api"]).is_socket() for r in status)
        # the kernel keeps out of VPP's way: no address, no IPv6 on the veths
        addresses = lab.exec(
            "r2", ["ip", "-6", "-o", "addr", "show"], capture_output=True, text=True
        )
        assert "r2-r1" not in addresses.stdout and "r2-r3" not in addresses.stdout
        shown = lab.vpp("r2").cli("show interface address")
        assert "fcf0:12::2/64" in shown and "fcf0:23::2/64" in shown
        # VPP to VPP and VPP to host, one hop each
        assert lab.ping("h1", "fd00:1::1")
        assert "2 received" in lab.vpp("r1").cli("ping fcf0:12::2 repeat 2 interval 0.05")
        assert "2 received" in lab.vpp("r3").cli("ping fcf0:23::2 repeat 2 interval 0.05")
        # loss injection where VPP sends to VPP: gone, not sent again later
        rule = lab.drop("r1", "r2", 2, dst="fcf0:12::2")
        assert "3 received" in lab.vpp("r1").cli("ping fcf0:12::2 repeat 5 interval 0.05")
        assert lab.drop_counters("r1")[rule.handle].dropped == 2
    finally:
        r = subprocess.run(
            [*cli, "down", "vpp-chain", "--prefix", prefix],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert lab.down() == []  # this process started the VPPs: it reaps them
    for pid in pids.values():
        assert pid is not None and not Path(f"/proc/{pid}").exists()
    assert not any(NETNS_DIR.glob(f"{prefix}-*"))
    assert not any(Path("/dev/shm").glob(f"{prefix}-*"))
    assert not lab.state_dir.exists()


@pytest.mark.root
def test_neighbours_across_a_vpp_link_ping(mixed: Lab) -> None:
    for node, address in [
        ("r1", "fcf0:12::2"),
        ("r3", "fcf0:23::2"),
        ("r1", "fc00:0:2::"),  # r2's locator is its own (its loopback), r1 routes it to r2
    ]:
        assert mixed.ping(node, address), (node, address)
    shown = mixed.vpp("r2").cli("show interface")
    assert "host-r2-r1" in shown and "host-r2-r3" in shown


@pytest.mark.root
def test_idle_vpp_sleeps_between_polls(mixed: Lab) -> None:
    """A functional guard, not a benchmark: an idle VPP sleeps between its polls."""
    pid = mixed.vpp_pid("r2")
    assert pid is not None
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    before, t0 = _cpu_ticks(pid), time.monotonic()
    time.sleep(2.0)
    used = (_cpu_ticks(pid) - before) / ticks_per_s / (time.monotonic() - t0)
    assert used < 0.2, f"an idle VPP used {used:.0%} of a core"
    assert "polling" in mixed.vpp("r2").cli("show interface rx-placement")


@pytest.mark.root
def test_udp_crosses_vpp_with_the_link_mtu(mixed: Lab) -> None:
    with plain_routes(mixed), mixed.receive_udp("h2", port=9400, idle=0.5) as rx:
        mixed.send_udp("h1", H2, 50, port=9400, size=1300)
        got = rx.result()
    assert got.received == 50
    assert "1500" in mixed.vpp("r2").cli("show interface host-r2-r3")


@pytest.mark.root
@pytest.mark.parametrize("k", [1, 7, 100])
def test_drop_on_a_vpp_sending_end_drops_exactly_k(mixed: Lab, k: int) -> None:
    n = 300
    port = 9500 + k
    with plain_routes(mixed):
        rule = mixed.drop("r2", "r3", k, dst=H2)
        try:
            assert (rule.interface, rule.count, rule.dst) == ("r2-r3", k, H2)
            with mixed.receive_udp("h2", port=port, idle=0.5) as rx:
                sent = mixed.send_udp("h1", H2, n, port=port, interval=0.0005)
                got = rx.result()
            assert sent.sent == n
            assert mixed.drop_counters("r2")[rule.handle].dropped == k
            assert got.received == got.unique == n - k
            assert got.missing == list(range(k))  # the first k after the rule was added
        finally:
            mixed.clear_drops("r2")
    assert mixed.drop_counters("r2") == {}


@pytest.mark.root
def test_drop_on_a_vpp_sending_end_matches_its_destination_only(mixed: Lab) -> None:
    with plain_routes(mixed):
        other = mixed.drop("r2", "r3", 5, dst="fc00:0:3::/48")  # no traffic there
        wrong_way = mixed.drop("r2", "r1", 5)  # h1 -> h2 does not leave r2 toward r1
        try:
            with mixed.receive_udp("h2", port=9600, idle=0.5) as rx:
                mixed.send_udp("h1", H2, 50, port=9600)
                assert rx.result().received == 50
            counters = mixed.drop_counters("r2")
            assert counters[other.handle].dropped == counters[wrong_way.handle].dropped == 0
            assert counters[other.handle].dst == "fc00:0:3::/48"
            assert counters[wrong_way.handle].interface == "r2-r1"
        finally:
            mixed.clear_drops("r2")


@pytest.mark.root
def test_delay_on_a_vpp_sending_end_is_refused(mixed: Lab) -> None:
    with pytest.raises(Exception, match="r2 is a VPP router"), mixed.delay("r2", "r3", 5.0):
        pass


@pytest.mark.root
@pytest.mark.parametrize("name", ["mixed", "vpp-ingress", "vpp-egress", "vpp-chain"])
def test_scenario_policies_carry_every_packet_across_vpp_routers(name: str, base_port: int) -> None:
    """The default scenario (SR policies, local SIDs and flows through the node managers'
    gRPC API) with VPP as ingress, transit or egress: every packet arrives, the first ones too
    (the lab has resolved VPP's neighbours)."""
    lab = Lab(Topology.load(name), prefix=_prefix(), base_port=base_port)
    try:
        lab.up()
        scenario.apply(lab)
        for src, dst, address in [("h1", "h2", scenario.H2), ("h2", "h1", scenario.H1)]:
            with lab.receive_udp(dst, port=9700, idle=0.5) as rx:
                lab.send_udp(src, address, 100, port=9700)
                got = rx.result()
            assert got.received == got.unique == 100, (src, dst, got.missing)
    finally:
        lab.down()


@pytest.mark.root
def test_drop_on_a_vpp_sending_end_spares_shorter_packets(mixed: Lab) -> None:
    """``min_length`` counts the IPv6 packet, as at a Linux router's forward hook."""
    with plain_routes(mixed):
        rule = mixed.drop("r2", "r3", 3, dst=H2, min_length=500)
        try:
            for size, port, expected in [(64, 9800, 20), (600, 9801, 17)]:
                with mixed.receive_udp("h2", port=port, idle=0.5) as rx:
                    mixed.send_udp("h1", H2, 20, port=port, size=size)
                    assert rx.result().received == expected, size
            assert mixed.drop_counters("r2")[rule.handle].dropped == 3
        finally:
            mixed.clear_drops("r2")
