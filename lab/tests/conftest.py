"""Fixtures for the lab tests: unique prefixes/ports and labs that are always torn down."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator

import pytest
from srv6pm.lab import Lab, Topology


def _unique_prefix() -> str:
    return "lt" + secrets.token_hex(2)


def _free_base_port(count: int) -> int:
    for _ in range(50):
        base = 20000 + secrets.randbelow(20000)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                socks.append(socket.socket())
                socks[-1].bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


@pytest.fixture
def prefix() -> str:
    """A namespace prefix no other test run uses: "lt" + 4 random hex digits."""
    return _unique_prefix()


@pytest.fixture
def base_port() -> int:
    """The first of 10 consecutive free ports on 127.0.0.1."""
    return _free_base_port(10)


@pytest.fixture(scope="module")
def net_lab() -> Iterator[Lab]:
    """The default topology, network only (no node managers), shared by a test module."""
    lab = Lab(Topology.load("default"), prefix=_unique_prefix())
    try:
        lab.up(start_node_managers=False)
        yield lab
    finally:
        lab.down()
