"""Fixtures that start real things: a lab of network namespaces with one node manager per
router. Each test session uses its own namespace prefix and ports, and tears down on failure.

Namespace prefixes are PREFIX_START + 6 random hex digits; SRV6PM_TEST_PREFIX changes
PREFIX_START (default "t"), e.g. to tell one's labs apart on a shared machine."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from srv6pm.lab import scenario
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import (
    FORWARD_SIDS,
    H1,
    H2,
    R1_PROBE_ADDRESS,
    R3_REFLECTOR_ADDRESS,
    REVERSE_SIDS,
    SESSION,
    SSID,
)
from srv6pm.lab.topology import Topology
from srv6pm.proto.v1 import node_manager_pb2 as pb

PERIOD_S = 2.0
PREFIX_START = os.environ.get("SRV6PM_TEST_PREFIX", "t")
GUARD_S = 0.5  # node manager default guard_ms


def free_port_block(n: int) -> int:
    """A base port with n free ports after it (checked, not reserved)."""
    for _ in range(50):
        base = 20000 + secrets.randbelow(30000)
        try:
            for port in range(base, base + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def marking_mode() -> pb.MarkingMode:
    """The marking mode of the module's lab; a module overrides it to run in several."""
    return pb.MARKING_MODE_ALTMARK


@contextlib.contextmanager
def running_lab(
    request: pytest.FixtureRequest,
    marking_mode: pb.MarkingMode,
    node_manager_settings: dict[str, str] | None = None,
    *,
    tls: bool = False,
    prefix_start: str = PREFIX_START,
    apply_scenario: bool = True,
    capabilities: tuple[str, ...] | None = None,
    topology_name: str = "default",
) -> Iterator[Lab]:
    """A lab of the default topology in the scenario's state, with UDP listeners on both hosts;
    torn down on exit, with the node managers' logs printed if a test of the module failed.

    With ``tls`` the node managers serve mutual TLS only (``Lab(tls=True)``): the scenario
    and every ``scenario.stub`` go over it with the lab's client certificate. Without
    ``apply_scenario`` the node managers start empty (the controller programs them)."""
    if os.geteuid() != 0:
        pytest.fail("lab tests need root (network namespaces, eBPF)")
    topology = Topology.load(topology_name).model_copy(update={"period_s": PERIOD_S})
    instance = Lab(
        topology,
        prefix=f"{prefix_start}{secrets.token_hex(3)}",
        base_port=free_port_block(2 * len(topology.routers)),  # gRPC, then Prometheus ports
        node_manager_settings=node_manager_settings,
        tls=tls,
        capabilities=capabilities,
    )
    try:
        instance.up()
        if apply_scenario:
            scenario.apply(instance, marking_mode)
        with contextlib.ExitStack() as sinks:
            # Listeners on both hosts: a closed port would answer with ICMPv6 errors, which are
            # real packets of the reverse flow and would be counted.
            for host in ("h1", "h2"):
                sinks.enter_context(instance.receive_udp(host, idle=3600, timeout=3600))
            failed_before = request.session.testsfailed
            yield instance
            if request.session.testsfailed > failed_before:
                capture = request.config.pluginmanager.getplugin("capturemanager")
                with capture.global_and_fixture_disabled():  # the logs go with the lab
                    for router in instance.topology.routers:
                        tail = instance.log_path(router).read_text().splitlines()[-25:]
                        print(f"--- {router} node manager log ---", *tail, sep="\n")
    finally:
        instance.down()


@pytest.fixture(scope="module")
def lab(request: pytest.FixtureRequest, marking_mode: pb.MarkingMode) -> Iterator[Lab]:
    with running_lab(request, marking_mode) as instance:
        yield instance


class Blocks:
    """Wall-clock block helpers for a lab running with PERIOD_S."""

    @staticmethod
    def current() -> int:
        return int(time.time() // PERIOD_S)

    @staticmethod
    def start(block: int) -> float:
        return block * PERIOD_S

    @classmethod
    def next(cls, margin: float = 0.15) -> int:
        """Sleep until `margin` into the next block; its number."""
        block = cls.current() + 1
        time.sleep(max(0.0, cls.start(block) + margin - time.time()))
        return block

    @classmethod
    def wait_readable(cls, block: int) -> None:
        time.sleep(max(0.0, cls.start(block + 1) + GUARD_S + 0.1 - time.time()))


def block_packets(lab: Lab, router: str, block: int) -> dict[str, int]:
    reply = scenario.stub(lab, router).ReadBlock(pb.ReadBlockRequest(block=block))
    return {f.flow: f.packets for f in reply.flows}


def block_counts(lab: Lab, router: str, block: int) -> dict[str, tuple[int, int]]:
    """Packets and bytes of each flow in `block`."""
    reply = scenario.stub(lab, router).ReadBlock(pb.ReadBlockRequest(block=block))
    return {f.flow: (f.packets, f.bytes) for f in reply.flows}


@pytest.fixture
def blocks() -> type[Blocks]:
    return Blocks


@pytest.fixture(scope="module")
def stamp_suite() -> str:
    root = Path(os.environ.get("SRV6PM_CACHE", Path.home() / ".cache/srv6pm"))
    binary = root / "stamp-suite/bin/stamp-suite"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run scripts/install-deps.sh")
    return str(binary)


def run_sender(lab: Lab, binary: str, args: list[str]) -> dict[str, Any]:
    """stamp-suite as Session-Sender on r1, from r1's probe address to r3's reflector (the
    SR policy r1 has for it); its JSON summary."""
    argv = [binary, "--remote-addr", R3_REFLECTOR_ADDRESS, "--remote-port", "862"]
    argv += ["--local-addr", R1_PROBE_ADDRESS, "--ssid", str(SSID), "--clock-synchronized"]
    done = lab.exec(
        "r1", [*argv, *args, "--output-format", "json"], capture_output=True, text=True, timeout=60
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stderr[-2000:]
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def stamp_results(lab: Lab, since_block: int = 0, since_ns: int = 0) -> pb.ReadResultsResponse:
    """r1's results of the scenario's STAMP session (scenario.stamp_states)."""
    return scenario.stub(lab, "r1").ReadResults(
        pb.ReadResultsRequest(session=SESSION, since_block=since_block, since_unix_ns=since_ns)
    )


def loss_of(lab: Lab, block: int, blocks: type[Blocks], timeout_blocks: int = 3) -> pb.LossResult:
    """The loss result of `block`, once its probe came back (or timed out)."""
    deadline = blocks.start(block + 1 + timeout_blocks)
    while True:
        found = [r for r in stamp_results(lab, since_block=block).loss if r.block == block]
        if found:
            return found[-1]
        if time.time() > deadline:
            break
        time.sleep(0.2)
    seen = [(r.block - block, r.valid, r.reason) for r in stamp_results(lab).loss]
    raise AssertionError(f"no loss result for block {block}; seen (block - {block}): {seen}")


FORWARD_DROPS, REVERSE_DROPS = 5, 3


def controller_settings(lab: Lab, influx_url: str, **more: str) -> dict[str, str]:
    """A controller of the lab's node managers (mutual TLS with the lab's client certificate)
    reading results from `influx_url`, resynchronising every 2 s."""
    return {
        "influx_url": influx_url,
        "tls_ca": str(lab.pki.ca),
        "tls_cert": str(lab.pki.client_cert),
        "tls_key": str(lab.pki.client_key),
        "resync_s": "2",
        **more,
    }


DATA_SIZE, DATA_MIN_LENGTH = 400, 300  # data packets told from probes by their length


def inject_drops(lab: Lab, blocks: type[Blocks], data_only: bool = False) -> int:
    """The next block with 100 packets h1 -> h2 and 60 back, 5 of them dropped at r2 -> r3 and 3
    at r2 -> r1 (FORWARD_DROPS, REVERSE_DROPS); that block. `data_only`: longer data packets,
    and only they are dropped (not a STAMP packet, however many the sessions send)."""
    block = blocks.next()
    size, min_length = (DATA_SIZE, DATA_MIN_LENGTH) if data_only else (64, None)
    forward = lab.drop("r2", "r3", FORWARD_DROPS, dst=FORWARD_SIDS[1], min_length=min_length)
    reverse = lab.drop("r2", "r1", REVERSE_DROPS, dst=REVERSE_SIDS[1], min_length=min_length)
    lab.send_udp("h1", H2, 100, interval=0.0005, size=size)
    lab.send_udp("h2", H1, 60, interval=0.0005, size=size)
    time.sleep(max(0.0, blocks.start(block) + 0.5 - time.time()))
    lab.clear_drops("r2")
    assert forward.handle != reverse.handle
    return block


def loss_with_injected_drops(lab: Lab, blocks: type[Blocks]) -> tuple[int, pb.LossResult]:
    """inject_drops, and the scenario session's loss result of its block."""
    block = inject_drops(lab, blocks)
    return block, loss_of(lab, block, blocks)
