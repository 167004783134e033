"""The vpp driver on a real VPP (srv6pm's plugin loaded): SR policies, steering, local SIDs,
ownership, refusals, monitored flows across node-manager and VPP restarts, counters.

h (netns) -- r (netns, VPP on af_packet: host-r-h, host-r-t) -- t (netns). VPP's interfaces
are host-r-h (fc00:a::1/64, toward h) and host-r-t (fc00:b::1/64, toward t).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path
from typing import Any

import pytest
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role
from srv6pm.lab.vpp import VPP_API_FILES, VppProcess, stop
from srv6pm.node_manager.adapters.journal import Journal
from srv6pm.node_manager.config import Settings
from srv6pm.node_manager.domain.errors import FailedPrecondition, InvalidArgument
from srv6pm.node_manager.domain.model import (
    REPLY_MARKS,
    STEERING_MARKS,
    Changes,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    ProbeRoute,
    SegmentList,
    SrPolicy,
)
from srv6pm.node_manager.drivers import base, registry
from srv6pm.node_manager.drivers.vpp.driver import VppDriver, api_files
from srv6pm.node_manager.service.node import NodeService
from srv6pm.node_manager.service.results import ResultsService
from vpp_papi import VPPApiClient

pytestmark = pytest.mark.root

BSIDS = "fcff:5336::/64"
PERIOD_NS = 10**18  # one block for decades: the colour cannot change during a test
H, T = "fc00:a::2", "fc00:b::2"  # the hosts' addresses
SIDS = (T, "fc00:3::d6")  # the first SID is t: VPP routes the encapsulated packet there
STEERED = "fd00:9::/64"
R_ADDRESS = "fc00:a::1"  # VPP's on h's link
PROBE_BSIDS = int(IPv6Network(BSIDS).network_address) + (1 << 63)  # the range's upper half


@dataclass
class Router:
    prefix: str
    vpp: VppProcess
    pid: int
    state_dir: Path

    def driver(self) -> VppDriver:
        return VppDriver(
            self.vpp.sockets.api,
            self.state_dir,
            PERIOD_NS,
            IPv6Network(BSIDS),
            vpp_api_dir=VPP_API_FILES,
        )

    def api(self) -> Any:
        """A client of our own, to look at VPP behind the driver's back."""
        client = VPPApiClient(
            apifiles=[str(f) for f in api_files(VPP_API_FILES)],
            server_address=str(self.vpp.sockets.api),
        )
        client.connect("srv6pm-test")
        return client


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def start(vpp: VppProcess) -> int:
    """Start VPP with its interfaces; its PID."""
    proc = vpp.launch()
    try:
        vpp.wait_ready(proc)
        attach(vpp)
    except BaseException:
        stop(proc.pid, vpp.config_file)
        raise
    return proc.pid


def attach(vpp: VppProcess) -> None:
    vpp.cli(
        "create host-interface name r-h",
        "create host-interface name r-t",
        "set interface state host-r-h up",
        "set interface state host-r-t up",
        "set interface ip address host-r-h fc00:a::1/64",
        "set interface ip address host-r-t fc00:b::1/64",
        "set interface rx-mode host-r-h interrupt",
        "set interface rx-mode host-r-t interrupt",
        "ip6 table add 7",
        "ip table add 7",
    )


@pytest.fixture
def router(tmp_path: Path) -> Iterator[Router]:
    prefix = f"vd-{secrets.token_hex(2)}"
    made: list[str] = []
    r = None
    try:
        for node in ("r", "h", "t"):
            sh("ip", "netns", "add", f"{prefix}-{node}")
            made.append(f"{prefix}-{node}")
            sh("ip", "-n", f"{prefix}-{node}", "link", "set", "lo", "up")
        for host, address in (("h", H), ("t", T)):
            ns = f"{prefix}-{host}"
            sh("ip", "-n", f"{prefix}-r", "link", "add", f"r-{host}", "type", "veth",
               "peer", "name", f"{host}-r", "netns", ns)  # fmt: skip
            sh("ip", "-n", f"{prefix}-r", "link", "set", f"r-{host}", "up")
            sh("ip", "-n", ns, "link", "set", f"{host}-r", "up")
            sh("ip", "-n", ns, "addr", "add", f"{address}/64", "dev", f"{host}-r", "nodad")
            sh("ip", "-n", ns, "route", "add", "::/0", "via", address.replace("::2", "::1"))
        vpp = VppProcess("r", f"{prefix}-r", tmp_path / "run")
        r = Router(prefix, vpp, start(vpp), tmp_path / "state")
        yield r
    finally:
        if r is not None:
            stop(r.pid, r.vpp.config_file)
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)


@pytest.fixture
def driver(router: Router) -> Iterator[VppDriver]:
    d = router.driver()
    try:
        yield d
    finally:
        d.close()


def routed(policies: list[SrPolicy]) -> set[tuple[object, ...]]:
    return {p.routed() for p in policies}


def vpp_policies(api: Any) -> dict[IPv6Address, Any]:
    return {d.bsid: d._replace(context=0) for d in api.api.sr_policies_v2_dump()}


# ---- capabilities and interfaces ------------------------------------------------------------


def test_capabilities_list_what_vpp_has_and_the_plugin_slots(router: Router) -> None:
    settings = Settings.model_validate(
        {
            "driver": "vpp",
            "vpp_api_socket": router.vpp.sockets.api,
            "vpp_api_dir": VPP_API_FILES,
            "state_dir": router.state_dir,
            "period_s": 10,
        }
    )
    d = registry.open_driver("vpp", settings)
    try:
        caps = d.capabilities()
        assert caps.driver == "vpp"
        assert caps.behaviours == frozenset(Behaviour) - {Behaviour.END_DT46}
        assert caps.encap_modes == {EncapMode.ENCAP, EncapMode.INLINE}
        assert caps.max_flows > 0
        assert caps.counter_width_bits == 64
        assert d.interfaces() == {"host-r-h", "host-r-t"}  # VPP's names, local0 left out
        assert base.counter_epoch(d) not in (None, 0)
        reflector = base.kernel_reflector(d)  # the plugin's, which answers every probe
        assert reflector is not None and reflector.answers_all
        assert base.probe_endpoints(d) is not None  # the plugin sends senders' packets
        assert base.namespaced_sockets(d) is None
    finally:
        d.close()


# ---- SR policies ------------------------------------------------------------------------------


def test_policy_applied_twice_changes_nothing_and_is_steered(
    router: Router, driver: VppDriver
) -> None:
    p = SrPolicy("p", STEERED, SIDS)
    driver.add_policy(p)
    api = router.api()
    before = vpp_policies(api)
    driver.add_policy(p)
    assert vpp_policies(api) == before
    (bsid,) = before
    assert bsid == IPv6Address("fcff:5336::1")  # the lowest free index of the range
    assert before[bsid].is_encap
    assert before[bsid].encap_src == IPv6Address("fc00:b::1")  # toward the first SID
    steer = [s for s in api.api.sr_steering_pol_dump() if s.bsid == bsid]
    assert [(str(s.prefix), s.fib_table) for s in steer] == [(STEERED, 0)]
    assert routed(driver.policies()) == {p.routed()}
    api.disconnect()

    driver.remove_policy(p)
    driver.remove_policy(p)
    assert driver.policies() == []
    api = router.api()
    assert vpp_policies(api) == {}
    assert list(api.api.sr_steering_pol_dump()) == []
    api.disconnect()


def test_vpp_own_encapsulation_source_is_kept_when_set(router: Router, driver: VppDriver) -> None:
    router.vpp.cli("set sr encaps source addr fc00:a::1")  # as `ip sr tunsrc set` on Linux
    driver.add_policy(SrPolicy("p", STEERED, SIDS))
    api = router.api()
    (details,) = vpp_policies(api).values()
    assert details.encap_src == IPv6Address("fc00:a::1")
    api.disconnect()


def test_changed_policy_is_steered_into_a_new_bsid_and_the_old_one_removed(
    router: Router, driver: VppDriver
) -> None:
    p = SrPolicy("p", STEERED, SIDS)
    driver.add_policy(p)
    changed = replace(p, segments=(T,), mode=EncapMode.INLINE)
    driver.add_policy(changed)
    assert routed(driver.policies()) == {changed.routed()}
    api = router.api()
    held = vpp_policies(api)
    assert list(held) == [IPv6Address("fcff:5336::2")]
    assert not held[IPv6Address("fcff:5336::2")].is_encap  # H.Insert
    api.disconnect()


def test_weighted_segment_lists_are_one_policy(router: Router, driver: VppDriver) -> None:
    lists = (
        SegmentList("a", SIDS, 3),
        SegmentList("b", (T, "fc00:4::d6"), 1),
        SegmentList("c", (T, "fc00:5::e", "fc00:6::d6"), 256),
    )
    p = SrPolicy("w", STEERED, (), segment_lists=lists)
    driver.add_policy(p)
    driver.add_policy(p)
    assert routed(driver.policies()) == {p.routed()}
    api = router.api()
    (details,) = vpp_policies(api).values()
    held = {
        (tuple(str(s) for s in sl.sids[: sl.num_sids]), sl.weight)
        for sl in details.sid_lists[: details.num_sid_lists]
    }
    assert held == {(sl.segments, sl.weight) for sl in lists}
    api.disconnect()
    one_down = replace(p, segment_lists=lists[:2])  # protection takes a list out
    driver.add_policy(one_down)
    assert routed(driver.policies()) == {one_down.routed()}


def test_policy_in_another_table(router: Router, driver: VppDriver) -> None:
    p = SrPolicy("t7", STEERED, SIDS, table=7)
    main = SrPolicy("t0", STEERED, (T,))
    driver.add_policy(p)
    driver.add_policy(main)
    assert routed(driver.policies()) == {p.routed(), main.routed()}
    driver.remove_policy(p)
    assert routed(driver.policies()) == {main.routed()}


def test_table_vpp_lacks_is_refused_and_vpp_keeps_running(
    router: Router, driver: VppDriver
) -> None:
    # VPP 26.06 crashes when told to steer into a table it lacks: the driver asks first
    with pytest.raises(FailedPrecondition, match="no IPv6 table 99"):
        driver.add_policy(SrPolicy("x", STEERED, SIDS, table=99))
    with pytest.raises(FailedPrecondition, match="no IPv6 table 98"):
        driver.add_local_sid(LocalSid("fc00:1::e", Behaviour.END, table=98))
    with pytest.raises(FailedPrecondition, match="no IPv4 table 97"):
        driver.add_local_sid(LocalSid("fc00:1::d4", Behaviour.END_DT4, lookup_table=97))
    assert driver.policies() == []
    assert "vpp" in router.vpp.cli("show version")


# ---- local SIDs -------------------------------------------------------------------------------

EVERY_SID = (
    LocalSid("fc00:1::e", Behaviour.END),
    LocalSid("fc00:1::e7", Behaviour.END, table=7),
    LocalSid("fc00:1::71", Behaviour.END_X, T),  # the interface toward T, found by VPP
    LocalSid("fc00:1::72", Behaviour.END_X, H, device="host-r-h"),
    LocalSid("fc00:1::74", Behaviour.END_T, lookup_table=7),
    LocalSid("fc00:1::d6", Behaviour.END_DT6, lookup_table=254),  # the domain's main table
    LocalSid("fc00:1::d67", Behaviour.END_DT6, lookup_table=7),
    LocalSid("fc00:1::d4", Behaviour.END_DT4, lookup_table=254),
    LocalSid("fc00:1::a6", Behaviour.END_DX6, T, device="host-r-t"),
    LocalSid("fc00:1::a4", Behaviour.END_DX4, "192.0.2.1", device="host-r-t"),
)


def test_local_sids_of_each_behaviour_applied_twice(router: Router, driver: VppDriver) -> None:
    for s in EVERY_SID:
        driver.add_local_sid(s)
    before = router.vpp.cli("show sr localsids")
    for s in EVERY_SID:
        driver.add_local_sid(s)
    assert router.vpp.cli("show sr localsids") == before
    want = {s.sid: s for s in EVERY_SID} | {"fc00:1::71": replace(EVERY_SID[2], device="host-r-t")}
    assert {s.sid: s for s in driver.local_sids()} == want
    assert "DT6 (Endpoint with decapsulation and specific IPv6 table lookup)" in before

    changed = LocalSid("fc00:1::e", Behaviour.END_T, lookup_table=7)
    driver.add_local_sid(changed)
    assert changed in driver.local_sids()
    for s in [*EVERY_SID, changed]:
        driver.remove_local_sid(s)
        driver.remove_local_sid(s)
    assert driver.local_sids() == []
    assert "Address" not in router.vpp.cli("show sr localsids")


def test_local_sids_and_policies_stay_ours_when_the_node_manager_restarts(router: Router) -> None:
    sid, p = LocalSid("fc00:1::e", Behaviour.END), SrPolicy("", STEERED, SIDS)
    d = router.driver()
    d.add_local_sid(sid)
    d.add_policy(p)
    d.close()
    d = router.driver()  # the same VPP: what the state file lists is still ours
    try:
        assert d.local_sids() == [sid]
        assert routed(d.policies()) == {p.routed()}
        d.remove_local_sid(sid)
        d.remove_policy(p)
        assert d.local_sids() == [] and d.policies() == []
    finally:
        d.close()


# ---- ownership --------------------------------------------------------------------------------


def test_configuration_made_by_hand_is_neither_reported_nor_removed(router: Router) -> None:
    router.vpp.cli(
        f"sr policy add bsid fc00:99::1 next {T} encap",
        "sr steer l3 fd00:77::/64 via bsid fc00:99::1",
        "sr localsid address fc00:1::77 behavior end",
    )
    policies, sids = router.vpp.cli("show sr policies"), router.vpp.cli("show sr localsids")
    d = router.driver()
    try:
        assert d.policies() == []
        assert d.local_sids() == []
        hand_policy = SrPolicy("", "fd00:77::/64", (T,))
        with pytest.raises(FailedPrecondition, match="did not create"):
            d.add_policy(hand_policy)
        with pytest.raises(FailedPrecondition, match="did not create"):
            d.add_local_sid(LocalSid("fc00:1::77", Behaviour.END))
        d.remove_policy(hand_policy)
        d.remove_local_sid(LocalSid("fc00:1::77", Behaviour.END))
        d.add_policy(SrPolicy("", STEERED, SIDS))  # an orphan check must spare it too
        d.remove_policy(SrPolicy("", STEERED, SIDS))
    finally:
        d.close()
    assert router.vpp.cli("show sr policies") == policies
    assert router.vpp.cli("show sr localsids") == sids
    assert "fd00:77::/64" in router.vpp.cli("show sr steering-policies")


# ---- refusals ---------------------------------------------------------------------------------


def test_what_vpp_cannot_do_is_refused_with_the_reason(driver: VppDriver) -> None:
    with pytest.raises(FailedPrecondition, match=r"no End\.DT46"):
        driver.add_local_sid(LocalSid("fc00:1::d46", Behaviour.END_DT46, lookup_table=254))
    for mode in (EncapMode.ENCAP_RED, EncapMode.L2ENCAP):
        with pytest.raises(FailedPrecondition, match=f"no {mode.value} head-end mode"):
            driver.add_policy(SrPolicy("m", STEERED, SIDS, mode))
    with pytest.raises(InvalidArgument, match="takes no device"):
        driver.add_policy(SrPolicy("d", STEERED, SIDS, device="host-r-t"))
    with pytest.raises(InvalidArgument, match="takes no device"):
        driver.add_local_sid(LocalSid("fc00:1::e", Behaviour.END, device="host-r-t"))
    with pytest.raises(FailedPrecondition, match="does not exist"):
        driver.add_local_sid(LocalSid("fc00:1::a6", Behaviour.END_DX6, T, device="nope"))
    with pytest.raises(FailedPrecondition, match="no route to"):
        driver.add_local_sid(LocalSid("fc00:1::71", Behaviour.END_X, "fc00:77::1"))


def test_stamp_addresses_and_probe_routes_are_programmed_once_and_removed(
    driver: VppDriver, router: Router
) -> None:
    """The reflector's address is made local (a loopback of the driver's own, unless an
    interface has it); a session's probes and the replies on a declared return path are steered
    by the plugin into an SR policy of their SID list, unmarked packets by VPP's L3 steering of
    the /128."""
    own, on_link = "fd00:53::1", R_ADDRESS
    api = router.api()
    driver.add_local_address(own)
    driver.add_local_address(on_link)
    assert driver.local_addresses() == {own, on_link}
    assert "loop5336" not in driver.interfaces()
    reply = ProbeRoute(STEERING_MARKS + REPLY_MARKS + 7, H, SIDS)
    probe = ProbeRoute(STEERING_MARKS + 7, H, SIDS)
    unmarked = ProbeRoute(0, H, SIDS)
    driver.update_probe_routes([reply, probe, unmarked], [])
    driver.update_probe_routes([], [])
    assert sorted(driver.probe_routes(), key=lambda r: r.mark) == [unmarked, probe, reply]
    assert len([b for b in vpp_policies(api) if int(b) >= PROBE_BSIDS]) == 1  # shared
    assert f"{H}/128" in router.vpp.cli("show sr steering-policies")
    assert driver.policies() == []  # probe policies are not the node's SR policies
    steers = {(d.kind, d.ssid) for d in api.api.srv6pm_steer_dump()}
    assert steers == {(1, 7), (2, 7)}  # the reflector's replies, the sender's probes
    driver.update_probe_routes([], [reply, probe, unmarked])
    driver.remove_local_address(own)
    driver.remove_local_address(on_link)
    assert driver.probe_routes() == [] and driver.local_addresses() == set()
    assert [b for b in vpp_policies(api) if int(b) >= PROBE_BSIDS] == []
    api.disconnect()
    assert R_ADDRESS in router.vpp.cli("show int addr")  # the link's address stays
    assert driver.policies() == [] and driver.local_sids() == []


# ---- monitored flows --------------------------------------------------------------------------

INGRESS = MonitoredFlow("in", SIDS, Role.INGRESS, ("host-r-t",), flowmon_id=0x12345)
TRANSIT = MonitoredFlow("tr", ("fc00:7::e", "fc00:8::d6"), Role.TRANSIT, ("host-r-h",), 0x777)
EGRESS = MonitoredFlow("eg", ("fc00:1::d6",), Role.EGRESS, ("host-r-h", "host-r-t"), 0x778)


def plugin_view(router: Router) -> tuple[dict[int, tuple[int, int]], set[tuple[int, int]], Any]:
    """(slot -> (role, flowmon_id), {(sw_if_index, hook)}, config) as the plugin holds them."""
    api = router.api()
    try:
        flows = {d.slot: (int(d.role), d.flowmon_id) for d in api.api.srv6pm_flow_dump()}
        hooks = {(d.sw_if_index, int(d.hook)) for d in api.api.srv6pm_interface_dump()}
        return flows, hooks, api.api.srv6pm_config_get()
    finally:
        api.disconnect()


def indices(router: Router) -> dict[str, int]:
    api = router.api()
    try:
        return {d.interface_name: d.sw_if_index for d in api.api.sw_interface_dump()}
    finally:
        api.disconnect()


def test_flows_keep_their_slots_when_the_node_manager_restarts(router: Router) -> None:
    d = router.driver()
    d.update_flows([INGRESS, TRANSIT, EGRESS], [])
    d.update_flows([], [TRANSIT])
    flows, hooks, config = plugin_view(router)
    ifs = indices(router)
    assert flows == {0: (1, 0x12345), 2: (3, 0x778)}
    assert hooks == {(ifs["host-r-t"], 1), (ifs["host-r-h"], 2), (ifs["host-r-t"], 2)}
    assert config.period_ns == PERIOD_NS
    d.close()

    d = router.driver()  # a node-manager restart: the same VPP
    try:
        assert set(d.flows()) == {INGRESS, EGRESS}
        assert d.flow_names() == {"in", "eg"}
        assert plugin_view(router)[0] == flows
        d.update_flows([TRANSIT], [])  # the lowest free slot again
        assert plugin_view(router)[0] == {**flows, 1: (2, 0x777)}
        d.update_flows([], [INGRESS, TRANSIT, EGRESS])
        flows, hooks, _ = plugin_view(router)
        assert flows == {} and hooks == set()
    finally:
        d.close()


def test_flow_the_plugin_refuses_is_not_kept(router: Router, driver: VppDriver) -> None:
    twin = replace(INGRESS, name="twin", flowmon_id=0x999)  # the same SID list
    driver.update_flows([INGRESS], [])
    with pytest.raises(FailedPrecondition, match="flow 'twin'"):
        driver.update_flows([twin], [])
    assert driver.flows() == [INGRESS]
    assert plugin_view(router)[0] == {0: (1, 0x12345)}


def test_marking_sets_the_plugin_and_guards_the_boundary(router: Router, driver: VppDriver) -> None:
    marking = Marking(MarkingMode.DSCP, 0x10, 0x20, ("host-r-h",))
    driver.set_marking(marking)
    assert driver.marking() == marking
    _, hooks, config = plugin_view(router)
    assert (int(config.mode), config.monitored_bit, config.colour_bit) == (2, 0x10, 0x20)
    assert hooks == {(indices(router)["host-r-h"], 3)}
    driver.set_marking(Marking())
    _, hooks, config = plugin_view(router)
    assert int(config.mode) == 1 and hooks == set()


def send_udp(router: Router, count: int) -> None:
    """`count` UDP packets from h to the steered prefix, through VPP."""
    ns = f"{router.prefix}-h"
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "for _ in range(int(sys.argv[1])): s.sendto(b'x' * 100, ('fd00:9::1', 9))\n"
    )
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code, str(count)], check=True)


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_counters_and_stats_count_packets_through_vpp(router: Router, driver: VppDriver) -> None:
    driver.add_policy(SrPolicy("p", STEERED, SIDS))
    driver.update_flows([INGRESS, EGRESS], [])
    zero = base.ColourCount(0, 0)
    assert driver.read_counters(["in", "eg", "unknown"]) == {
        "in": (zero, zero),
        "eg": (zero, zero),
    }

    def warmed_up() -> bool:  # VPP drops the first ones while it finds t's address
        send_udp(router, 1)
        return sum(c.packets for c in driver.read_counters(["in"])["in"]) >= 1

    wait_for(warmed_up)
    before = sum(c.packets for c in driver.read_counters(["in"])["in"])
    send_udp(router, 20)
    colour = (time.time_ns() // PERIOD_NS) % 2
    wait_for(lambda: driver.read_counters(["in"])["in"][colour].packets == before + 20)
    counts = driver.read_counters(["in"])["in"]
    assert counts[1 - colour] == zero
    assert counts[colour].bytes > counts[colour].packets * 100
    stats = driver.read_stats()
    assert stats.counted >= before + 20


def test_vpp_restart_is_detected_and_flows_installed_again(router: Router) -> None:
    d = router.driver()
    try:
        d.add_policy(SrPolicy("p", STEERED, SIDS))
        d.add_local_sid(LocalSid("fc00:1::e", Behaviour.END))
        d.set_marking(Marking(boundary_interfaces=("host-r-h",)))
        d.update_flows([INGRESS, EGRESS], [])
        flows, hooks, config = plugin_view(router)
        epoch = d.counter_epoch()
        assert epoch == config.instance_id

        stop(router.pid, router.vpp.config_file)
        with pytest.raises(FailedPrecondition, match="VPP does not answer"):
            d.flows()  # answered from the state file, but it checks VPP first
        router.pid = start(router.vpp)
        router.vpp.cli("sr localsid address fc00:1::e behavior end")  # its own, now
        assert d.counter_epoch() != epoch  # noticed on the next call
        after, hooks_after, config_after = plugin_view(router)
        assert after == flows
        assert hooks_after == hooks
        assert config_after.period_ns == PERIOD_NS
        assert set(d.flows()) == {INGRESS, EGRESS}
        zero = base.ColourCount(0, 0)
        assert d.read_counters(["in"]) == {"in": (zero, zero)}
        assert d.policies() == []  # VPP lost them: the next apply adds them again
        assert d.local_sids() == []  # what VPP holds at fc00:1::e is not ours any more
        d.remove_local_sid(LocalSid("fc00:1::e", Behaviour.END))
        assert "fc00:1::e" in router.vpp.cli("show sr localsids")
    finally:
        d.close()


# ---- through the node service -----------------------------------------------------------------


def test_node_service_applies_a_state_once_on_vpp(router: Router, driver: VppDriver) -> None:
    journal = Journal(router.state_dir / "journal.db", 3600, 1 << 30)
    results = ResultsService(journal, "r", PERIOD_NS)
    service = NodeService(driver, results, router.state_dir, PERIOD_NS, PERIOD_NS // 4)
    state = NodeState(
        policies=(
            SrPolicy("one", STEERED, SIDS),
            SrPolicy(
                "two",
                "fd00:8::/64",
                (),
                segment_lists=(SegmentList("a", SIDS, 2), SegmentList("b", (T,), 1)),
            ),
        ),
        local_sids=(
            LocalSid("fc00:1::d6", Behaviour.END_DT6),
            LocalSid("fc00:1::71", Behaviour.END_X, T),
        ),
        flows=(INGRESS, EGRESS),
    )
    try:
        first = service.apply(state)
        assert (first.policies.added, first.local_sids.added, first.flows.added) == (2, 2, 2)
        again = service.apply(state)
        assert (again.policies, again.local_sids, again.flows) == (
            Changes(0, 0, 2),
            Changes(0, 0, 2),
            Changes(0, 0, 2),
        )
        held = service.state()
        assert {p.name for p in held.policies} == {"one", "two"}
        service.apply(NodeState())
        assert driver.policies() == [] and driver.local_sids() == [] and driver.flows() == []
    finally:
        service.stop()
        journal.close()
