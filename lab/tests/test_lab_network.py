"""Lab up/down round trips with real namespaces (network only, no node managers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from srv6pm.lab import Lab, LabError, Topology
from srv6pm.lab.lab import NETNS_DIR

pytestmark = pytest.mark.root

NEIGHBOURS = [  # (node, address of a neighbour on a shared link)
    ("h1", "fd00:1::1"),
    ("r1", "fd00:1::2"),
    ("r1", "fcf0:12::2"),
    ("r2", "fcf0:12::1"),
    ("r2", "fcf0:23::3"),
    ("r3", "fcf0:23::2"),
    ("r3", "fd00:2::2"),
    ("h2", "fd00:2::1"),
]


def _addresses(lab: Lab, node: str) -> dict[str, set[str]]:
    out = lab.exec(
        node,
        ["ip", "-j", "-6", "address", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {
        i["ifname"]: {
            f"{a['local']}/{a['prefixlen']}" for a in i["addr_info"] if "local" in a
        }  # other entries are addresses filtered out
        for i in json.loads(out)
    }
    return {name: addrs for name, addrs in found.items() if addrs}


def _sysctl(lab: Lab, node: str, key: str) -> str:
    return str(
        lab.exec(
            node, ["sysctl", "-n", key], capture_output=True, text=True, check=True
        ).stdout.strip()
    )


def test_up_down_round_trip(prefix: str) -> None:
    lab = Lab(Topology.load("default"), prefix=prefix)
    try:
        lab.up(start_node_managers=False)
        namespaces = [f"{prefix}-{n}" for n in ("r1", "r2", "r3", "h1", "h2")]
        assert all((NETNS_DIR / ns).exists() for ns in namespaces)
        status = lab.status()
        assert status["up"] and status["complete"]
        assert status["namespaces"] == dict.fromkeys(namespaces, True)
        assert _addresses(lab, "r1") == {"r1-h1": {"fd00:1::1/64"}, "r1-r2": {"fcf0:12::1/64"}}
        assert _addresses(lab, "r2") == {"r2-r1": {"fcf0:12::2/64"}, "r2-r3": {"fcf0:23::2/64"}}
        assert _addresses(lab, "h2") == {"h2-r3": {"fd00:2::2/64"}}
        for node, address in NEIGHBOURS:
            assert lab.ping(node, address), f"{node} cannot ping {address}"
        # the core routes locators only: host prefixes need SRv6 policies
        assert not lab.ping("h1", "fd00:2::2", timeout=1)
        assert _sysctl(lab, "r2", "net.ipv6.conf.all.forwarding") == "1"
        assert _sysctl(lab, "r2", "net.ipv6.conf.r2-r3.seg6_enabled") == "1"
        assert _sysctl(lab, "h1", "net.ipv6.conf.h1-r1.accept_dad") == "0"
        routes = lab.exec(
            "r1",
            ["ip", "-6", "route", "show", "root", "fc00::/16"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "fc00:0:3::/48 via fcf0:12::2 dev r1-r2" in routes
        with pytest.raises(LabError, match="already up"):
            lab.up(start_node_managers=False)
        assert lab.status()["complete"]  # the failed second up did not harm the first
    finally:
        assert lab.down() == []
    assert not any(NETNS_DIR.glob(f"{prefix}-*"))
    assert not lab.state_dir.exists()
    assert not lab.status()["up"]
    assert lab.down() == []  # idempotent


def test_two_labs_coexist(net_lab: Lab, prefix: str) -> None:
    other = Lab(Topology.load("default"), prefix=prefix)
    try:
        other.up(start_node_managers=False)
        assert other.ping("r1", "fcf0:12::2")
        assert net_lab.ping("r1", "fcf0:12::2")
    finally:
        other.down()
    assert net_lab.status()["namespaces"] == dict.fromkeys(
        (net_lab.netns(n) for n in net_lab.topology.nodes), True
    )


def test_failed_up_rolls_back_or_leaves_for_down(prefix: str, tmp_path: Path) -> None:
    # a static route via an address that is not on-link makes `ip route add` fail half way
    text = Topology.load("default").source.read_text()  # type: ignore[union-attr]
    text = text.replace("  h2: {}", '  h2: {routes: [{dst: "fd00:99::/64", via: "fd00:77::1"}]}')
    topo_file = tmp_path / "broken.yaml"
    topo_file.write_text(text)
    topo = Topology.load(topo_file)

    lab = Lab(topo, prefix=prefix)
    with pytest.raises(LabError, match="route add fd00:99::/64"):
        lab.up(start_node_managers=False)
    assert not any(NETNS_DIR.glob(f"{prefix}-*")) and not lab.state_dir.exists()

    with pytest.raises(LabError):
        lab.up(start_node_managers=False, keep_on_error=True)
    try:
        assert (NETNS_DIR / f"{prefix}-h2").exists()
        assert not lab.status()["complete"]
    finally:
        assert lab.down() == []
    assert not any(NETNS_DIR.glob(f"{prefix}-*")) and not lab.state_dir.exists()


def test_cli_round_trip(prefix: str) -> None:
    cli = [sys.executable, "-m", "srv6pm.lab.cli", "lab"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, *args, "default", "--prefix", prefix],
            capture_output=True,
            text=True,
            check=False,
        )

    try:
        r = run("up", "--no-node-managers")
        assert r.returncode == 0, r.stderr
        assert f"r1: netns {prefix}-r1" in r.stdout
        r = run("up", "--no-node-managers")
        assert r.returncode == 1 and "already up" in r.stderr
        r = run("status")
        assert r.returncode == 0 and json.loads(r.stdout)["complete"]
        r = run("drop", "--node", "r1", "--to", "r2", "--count", "3", "--dst", "fcf0:12::2")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["interface"] == "r1-r2"
        r = run("drops", "--node", "r1")
        assert json.loads(r.stdout)["dropped"] == 0
        r = run("drop", "--node", "r1", "--to", "r3", "--count", "3")
        assert r.returncode == 1 and "no link between r1 and r3" in r.stderr
    finally:
        r = run("down")
    assert r.returncode == 0, r.stderr
    assert not any(NETNS_DIR.glob(f"{prefix}-*"))
    assert run("status").returncode == 3
