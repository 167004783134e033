"""Exact loss injection: a drop rule for K packets drops exactly K, the rest get through."""

from __future__ import annotations

import pytest
from srv6pm.lab import Lab

pytestmark = pytest.mark.root

R2 = "fcf0:12::2"  # r2's end of r1-r2: h1 -> r2 is forwarded by r1 out of r1-r2, no SRv6 needed


@pytest.mark.parametrize("k", [1, 3, 10, 100])
def test_drop_exactly_k(net_lab: Lab, k: int) -> None:
    n = 300
    port = 9100 + k
    rule = net_lab.drop("r1", "r2", k, dst=R2)
    assert (rule.interface, rule.count, rule.dst) == ("r1-r2", k, R2)
    with net_lab.receive_udp("r2", port=port, idle=0.5) as rx:
        sent = net_lab.send_udp("h1", R2, n, port=port, interval=0.0002)
        got = rx.result()
    assert sent.sent == n
    assert net_lab.drop_counters("r1")[rule.handle].dropped == k
    assert got.received == got.unique == n - k
    assert got.missing == list(range(k))  # the first k after the rule was added


def test_drop_only_matches_its_destination_and_link(net_lab: Lab) -> None:
    net_lab.clear_drops("r1")
    other = net_lab.drop("r1", "r2", 5, dst="fc00:0:3::/48")  # a SID prefix: no traffic here
    wrong_link = net_lab.drop("r1", "h1", 5)
    with net_lab.receive_udp("r2", port=9200, idle=0.5) as rx:
        net_lab.send_udp("h1", R2, 50, port=9200)
        got = rx.result()
    assert got.received == 50
    counters = net_lab.drop_counters("r1")
    assert counters[other.handle].dropped == 0
    assert counters[other.handle].dst == "fc00:0:3::/48"
    assert counters[wrong_link.handle].dropped == 0
    net_lab.clear_drops("r1")
    assert net_lab.drop_counters("r1") == {}


def test_rule_without_destination_and_successive_rules(net_lab: Lab) -> None:
    net_lab.clear_drops("r1")
    first = net_lab.drop("r1", "r2", 4)
    with net_lab.receive_udp("r2", port=9300, idle=0.5) as rx:
        net_lab.send_udp("h1", R2, 20, port=9300)
        assert rx.result().received == 16
    second = net_lab.drop("r1", "r2", 2)  # the exhausted first rule no longer matches
    with net_lab.receive_udp("r2", port=9301, idle=0.5) as rx:
        net_lab.send_udp("h1", R2, 20, port=9301)
        got = rx.result()
    assert got.received == 18 and got.missing == [0, 1]
    counters = net_lab.drop_counters("r1")
    assert (counters[first.handle].dropped, counters[second.handle].dropped) == (4, 2)
    net_lab.clear_drops("r1")


def test_drop_arguments_are_checked(net_lab: Lab) -> None:
    with pytest.raises(Exception, match="count must be"):
        net_lab.drop("r1", "r2", 0)
    with pytest.raises(Exception, match="not an IPv6 address"):
        net_lab.drop("r1", "r2", 1, dst="fc00::zz")
    with pytest.raises(Exception, match="unknown node"):
        net_lab.drop("r7", "r2", 1)


def test_drop_srv6_flow_by_active_sid(net_lab: Lab) -> None:
    """The forward hook sees SRv6 packets with the outer destination = the active SID: after
    H.Encaps on r1 it is the first SID, after End on r2 the next one."""
    routes = {
        "r1": "fd00:2::/64 encap seg6 mode encap segs fc00:0:2::e,fc00:0:3::d6 dev r1-r2",
        "r2": "fc00:0:2::e/128 encap seg6local action End dev r2-r3",
        "r3": "fc00:0:3::d6/128 encap seg6local action End.DT6 table main dev r3-h2",
    }
    try:
        for node, route in routes.items():
            net_lab.exec(node, ["ip", "-6", "route", "add", *route.split()], check=True)
        at_r1 = net_lab.drop("r1", "r2", 3, dst="fc00:0:2::e")
        at_r2 = net_lab.drop("r2", "r3", 7, dst="fc00:0:3::d6")
        with net_lab.receive_udp("h2", port=9400, idle=0.5) as rx:
            net_lab.send_udp("h1", "fd00:2::2", 100, port=9400)
            got = rx.result()
        assert net_lab.drop_counters("r1")[at_r1.handle].dropped == 3
        assert net_lab.drop_counters("r2")[at_r2.handle].dropped == 7
        assert got.received == 90 and got.missing == list(range(10))
    finally:
        for node, route in routes.items():
            net_lab.exec(node, ["ip", "-6", "route", "del", route.split()[0]])
            net_lab.clear_drops(node)
