"""Topology schema and validation (no root needed)."""

from __future__ import annotations

import subprocess
import sys
from ipaddress import IPv6Network
from pathlib import Path

import pytest
from srv6pm.lab import Lab, Topology, TopologyError
from srv6pm.lab.lab import NETNS_DIR, RUN_ROOT

GOOD = """
name: t
routers:
  r1: {grpc_port: 50061, locator: "fc00:0:1::/48"}
  r2: {grpc_port: 50062, locator: "fc00:0:2::/48"}
hosts:
  h1: {}
links:
  - ends: {h1: "fd00:1::2/64", r1: "fd00:1::1/64"}
  - ends: {r1: "fcf0:12::1/64", r2: "fcf0:12::2/64"}
"""


def test_default_topology() -> None:
    topo = Topology.load("default")
    assert topo.name == "srv6pm"
    assert topo.period_s == 10
    assert list(topo.routers) == ["r1", "r2", "r3"]
    assert [r.grpc_port for r in topo.routers.values()] == [50061, 50062, 50063]
    assert topo.nodes == ["r1", "r2", "r3", "h1", "h2"]
    routes = {n: {str(r.dst): str(r.via) for r in topo.routes(n)} for n in topo.nodes}
    assert routes == {
        "r1": {"fc00:0:2::/48": "fcf0:12::2", "fc00:0:3::/48": "fcf0:12::2"},
        "r2": {"fc00:0:1::/48": "fcf0:12::1", "fc00:0:3::/48": "fcf0:23::3"},
        "r3": {"fc00:0:1::/48": "fcf0:23::2", "fc00:0:2::/48": "fcf0:23::2"},
        "h1": {"::/0": "fd00:1::1"},
        "h2": {"::/0": "fd00:2::1"},
    }
    assert [(r.src, r.ingress, r.transit, r.egress) for r in topo.roles] == [
        ("h1", "r1", ["r2"], "r3"),
        ("h2", "r3", ["r2"], "r1"),
    ]
    assert Topology.load("default.yaml") == topo
    assert Topology.load(topo.source or "") == topo


def test_lab_names_and_ports() -> None:
    topo = Topology.parse(GOOD)
    lab = Lab(topo)
    assert lab.prefix == "t"
    assert lab.netns("r1") == "t-r1"
    assert lab.interface("r1", "h1") == "r1-h1"
    assert lab.grpc_address("r2") == "127.0.0.1:50062"
    lab2 = Lab(topo, prefix="other", base_port=7000)
    assert lab2.netns("h1") == "other-h1"
    assert [lab2.grpc_port(r) for r in topo.routers] == [7000, 7001]
    argv = lab2.node_manager_argv("r2")
    assert argv[1:] == [
        "-m",
        "srv6pm.node_manager",
        "--node-id",
        "r2",
        "--netns",
        "other-r2",
        "--listen",
        "127.0.0.1:7001",
        "--bpf-dir",
        "/sys/fs/bpf/srv6pm/other-r2",
        "--state-dir",
        "/run/srv6pm/lab/other/r2",
        "--period-s",
        "10",
        "--clock-sync",
        "yes",
        "--metrics-listen",
        "127.0.0.1:7003",  # after the gRPC ports of the two routers
    ]
    assert Lab(topo, "x", 7000, {"kafka_bootstrap": "k:9092"}).node_manager_argv("r1")[-2:] == [
        "--kafka-bootstrap",
        "k:9092",
    ]
    with pytest.raises(Exception, match="invalid prefix"):
        Lab(topo, prefix="Bad Prefix")


def test_long_interface_names_are_truncated() -> None:
    text = GOOD.replace("r2", "router_number_2")
    topo = Topology.parse(text)
    assert Lab(topo).interface("r1", "router_number_2") == "r1-router_numbe"
    assert Lab(topo).interface("router_number_2", "r1") == "router_number_2"


def test_shortest_path_locator_routes() -> None:
    # a square r1-r2-r3-r4-r1: ties go to the neighbour whose link comes first in the YAML
    text = """
name: sq
routers:
  r1: {grpc_port: 1, locator: "fc00:1::/48"}
  r2: {grpc_port: 2, locator: "fc00:2::/48"}
  r3: {grpc_port: 3, locator: "fc00:3::/48"}
  r4: {grpc_port: 4}
links:
  - ends: {r1: "fcf0:12::1/64", r2: "fcf0:12::2/64"}
  - ends: {r2: "fcf0:23::2/64", r3: "fcf0:23::3/64"}
  - ends: {r3: "fcf0:34::3/64", r4: "fcf0:34::4/64"}
  - ends: {r4: "fcf0:14::4/64", r1: "fcf0:14::1/64"}
"""
    topo = Topology.parse(text)
    assert {str(r.dst): str(r.via) for r in topo.routes("r1")} == {
        "fc00:2::/48": "fcf0:12::2",
        "fc00:3::/48": "fcf0:12::2",
    }
    assert {str(r.dst): str(r.via) for r in topo.routes("r4")} == {
        "fc00:1::/48": "fcf0:14::1",
        "fc00:2::/48": "fcf0:34::3",
        "fc00:3::/48": "fcf0:34::3",
    }
    assert topo.routers["r1"].locator == IPv6Network("fc00:1::/48")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("  r2: {grpc_port", "  r1: {grpc_port"), "found duplicate key 'r1'"),
        (("hosts:\n  h1: {}", "hosts:\n  h1: {}\n  r2: {}"), "duplicate node name 'r2'"),
        (('{h1: "fd00:1::2/64"', '{h9: "fd00:1::2/64"'), "unknown node 'h9'"),
        (('"fd00:1::2/64"', '"fd00:1::zz/64"'), "links.0.ends.h1"),
        (('"fd00:1::2/64"', '"10.0.0.1/24"'), "links.0.ends.h1"),
        (('"fd00:1::2/64"', '"fd00:9::2/64"'), "different subnets"),
        (('"fd00:1::2/64"', '"fd00:1::1/64"'), "both ends have address"),
        (("grpc_port: 50062", "grpc_port: 50061"), "grpc_port 50061 already used by r1"),
        (("grpc_port: 50062", "grpc_port: 70000"), "routers.r2.grpc_port"),
        (('"fc00:0:2::/48"', '"fc00:0:1:8000::/64"'), "overlaps"),
        (('"fc00:0:2::/48"', '"fc00:0:2::1/48"'), "routers.r2.locator"),
        (("name: t", "name: t\ncolour: red"), "colour: Extra inputs are not permitted"),
        (("name: t", "name: T!"), "name: String should match pattern"),
        (("  r2: {", "  R2: {"), "routers.R2.[key]"),
        (("r1: {grpc_port: 50061,", "r1: {"), "routers.r1.grpc_port: Field required"),
        (
            (
                "  - ends: {h1",
                '  - ends: {r2: "fcf0:12::3/64", r1: "fcf0:12::4/64"}\n  - ends: {h1',
            ),
            "duplicate link between r1 and r2",
        ),
        (('  - ends: {h1: "fd00:1::2/64", r1: "fd00:1::1/64"}\n', ""), "hosts.h1: not linked"),
        (("links:", "links: [\n"), "invalid YAML"),
    ],
)
def test_invalid_topologies(change: tuple[str, str], message: str) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(TopologyError) as info:
        Topology.parse(text)
    assert message in str(info.value)


def test_roles_are_checked() -> None:
    text = GOOD + "roles:\n  - {src: h1, dst: h1, ingress: r1, transit: [h1], egress: r9}\n"
    with pytest.raises(TopologyError) as info:
        Topology.parse(text)
    assert "unknown router 'h1'" in str(info.value)
    assert "unknown router 'r9'" in str(info.value)


def test_missing_topology() -> None:
    with pytest.raises(TopologyError, match="shipped: default"):
        Topology.load("no-such-topology")


def test_cli_rejects_bad_yaml_and_creates_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace('{h1: "fd00:1::2/64"', '{h9: "fd00:1::2/64"'))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "srv6pm.lab.cli",
            "lab",
            "up",
            str(bad),
            "--prefix",
            "ltbad",
            "--no-node-managers",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2
    assert "unknown node 'h9'" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (RUN_ROOT / "ltbad").exists()
    assert not any(NETNS_DIR.glob("ltbad-*"))
