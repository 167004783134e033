"""The node manager with the container's capability set (docs/DEPLOY.md): inside its router's
namespace, as root with only NET_ADMIN, NET_BIND_SERVICE, BPF and PERFMON in its bounding set,
as the DaemonSet and the compose file run it. It programs policies, marks and counts exactly; with
less (no PERFMON) the kernel refuses the programs and the start says which."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import block_packets, running_lab
from srv6pm.lab import LabError, scenario
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import FORWARD, H1, H2, REVERSE
from srv6pm.proto.v1 import node_manager_pb2 as pb

CONTAINER_CAPABILITIES = ("NET_ADMIN", "NET_BIND_SERVICE", "BPF", "PERFMON")
ROUTERS = ("r1", "r2", "r3")


@pytest.fixture(scope="module")
def caps_lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    with running_lab(
        request, pb.MARKING_MODE_ALTMARK, prefix_start="capx", capabilities=CONTAINER_CAPABILITIES
    ) as lab:
        yield lab


def _effective_capabilities(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no CapEff in /proc/{pid}/status")


@pytest.mark.root
@pytest.mark.slow
def test_node_managers_run_with_the_container_capabilities_only(caps_lab):
    # NET_BIND_SERVICE 10, NET_ADMIN 12, PERFMON 38, BPF 39: nothing else, SYS_ADMIN (21) above all
    expected = (1 << 10) | (1 << 12) | (1 << 38) | (1 << 39)
    for router in ROUTERS:
        pid = caps_lab.pid(router)
        assert pid is not None
        assert _effective_capabilities(pid) == expected, router


@pytest.mark.root
@pytest.mark.slow
def test_with_those_capabilities_both_directions_are_counted_exactly(caps_lab, blocks):
    block = blocks.next()
    caps_lab.send_udp("h1", H2, 150, interval=0.0005)
    caps_lab.send_udp("h2", H1, 40, interval=0.0005)
    blocks.wait_readable(block)
    for router in ROUTERS:
        assert block_packets(caps_lab, router, block) == {FORWARD: 150, REVERSE: 40}, router


@pytest.mark.root
@pytest.mark.slow
def test_without_perfmon_the_verifier_refuses_the_programs_and_the_start_says_so(request):
    with (
        pytest.raises(LabError, match="prog 'srv6pm_mark': failed to load"),
        running_lab(
            request,
            pb.MARKING_MODE_ALTMARK,
            prefix_start="capy",
            capabilities=("NET_ADMIN", "NET_BIND_SERVICE", "BPF"),
        ),
    ):
        pass


@pytest.mark.root
@pytest.mark.slow
def test_with_those_capabilities_stamp_reflects_on_port_862_and_measures(caps_lab, blocks):
    # the reflector binds a privileged port: NET_BIND_SERVICE
    scenario.apply_states(caps_lab, scenario.stamp_states(caps_lab))
    try:
        blocks.next()
        block = blocks.next()
        deadline = blocks.start(block + 4)
        while True:
            reply = scenario.stub(caps_lab, "r1").ReadResults(
                pb.ReadResultsRequest(session=scenario.SESSION, since_block=block)
            )
            found = [r for r in reply.loss if r.block == block]
            if found or time.time() > deadline:
                break
            time.sleep(0.2)
        assert found and found[-1].valid, [(r.block, r.valid, r.reason) for r in reply.loss]
    finally:
        scenario.apply(caps_lab)
