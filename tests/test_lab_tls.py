"""The node managers' gRPC API over mutual TLS, in a real lab (Lab(tls=True)): the scenario
runs over it, clients without the lab CA's certificate and plaintext are refused, and a node
manager refuses to serve plaintext anywhere but loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import block_packets, free_port_block, running_lab
from srv6pm.controller.adapters.nodes import NodeClients, NodeUnavailable, Tls
from srv6pm.lab import pki as lab_pki
from srv6pm.lab.lab import Lab
from srv6pm.lab.scenario import FORWARD, H2, REVERSE
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

ROUTERS = ("r1", "r2", "r3")
TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def tls_lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    with running_lab(request, pb.MARKING_MODE_ALTMARK, tls=True, prefix_start="tlsx") as lab:
        yield lab


def _get_info(lab: Lab, router: str, credentials: grpc.ChannelCredentials | None) -> str:
    """GetInfo from ``router``'s node manager over a channel of our own; its node id."""
    address = lab.grpc_address(router)
    if credentials is None:
        channel = grpc.insecure_channel(address)
    else:
        options = [("grpc.ssl_target_name_override", router)]
        channel = grpc.secure_channel(address, credentials, options=options)
    with channel:
        reply = pb_grpc.NodeManagerStub(channel).GetInfo(pb.GetInfoRequest(), timeout=TIMEOUT_S)
    return str(reply.node_id)


def _credentials(ca: Path, cert: Path | None = None, key: Path | None = None):
    return grpc.ssl_channel_credentials(
        root_certificates=ca.read_bytes(),
        private_key=key.read_bytes() if key else None,
        certificate_chain=cert.read_bytes() if cert else None,
    )


def _assert_refused(lab: Lab, credentials: grpc.ChannelCredentials | None) -> None:
    for router in ROUTERS:
        with pytest.raises(grpc.RpcError) as e:
            _get_info(lab, router, credentials)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE, router


@pytest.mark.root
@pytest.mark.slow
def test_scenario_applies_and_blocks_are_read_over_mutual_tls(tls_lab, blocks):
    # running_lab applied the scenario through scenario.stub, i.e. Lab.channel
    for router in ROUTERS:
        assert f"mode=mutual-tls client_ca={tls_lab.pki.ca}" in tls_lab.log_path(router).read_text()
    block = blocks.next()
    tls_lab.send_udp("h1", H2, 120, interval=0.0005)
    blocks.wait_readable(block)
    for router in ROUTERS:
        assert block_packets(tls_lab, router, block) == {FORWARD: 120, REVERSE: 0}, router


@pytest.mark.root
@pytest.mark.slow
def test_the_lab_pki_is_in_the_state_dir_with_private_keys_0600(tls_lab):
    pki = tls_lab.pki
    assert pki.directory == tls_lab.state_dir / "pki"
    keys = [pki.client_key, *(pki.server_key(r) for r in ROUTERS)]
    assert all(k.stat().st_mode & 0o777 == 0o600 for k in keys)
    assert "--tls-key" in tls_lab.node_manager_argv("r1")
    assert str(pki.server_key("r1")) in tls_lab.node_manager_argv("r1")


@pytest.mark.root
@pytest.mark.slow
def test_another_process_lab_sees_tls_from_the_state_file(tls_lab):
    """`srv6pm lab status` builds its Lab without --tls: the state file says TLS, and its
    health checks go over mutual TLS."""
    cli = [sys.executable, "-m", "srv6pm.lab.cli", "lab", "status", "default"]
    r = subprocess.run(
        [*cli, "--prefix", tls_lab.prefix, "--base-port", str(tls_lab.base_port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert status["tls"] is True
    assert all(m["serving"] for m in status["node_managers"].values()), status
    assert Lab(tls_lab.topology, prefix=tls_lab.prefix, base_port=tls_lab.base_port).tls


@pytest.mark.root
@pytest.mark.slow
def test_the_lab_client_certificate_is_admitted_and_checks_which_router_answers(tls_lab):
    pki = tls_lab.pki
    creds = _credentials(pki.ca, pki.client_cert, pki.client_key)
    assert [_get_info(tls_lab, r, creds) for r in ROUTERS] == list(ROUTERS)
    # r2's node manager cannot pass for r1: its certificate names r2
    channel = grpc.secure_channel(
        tls_lab.grpc_address("r2"), creds, options=[("grpc.ssl_target_name_override", "r1")]
    )
    with channel, pytest.raises(grpc.RpcError):
        pb_grpc.NodeManagerStub(channel).GetInfo(pb.GetInfoRequest(), timeout=TIMEOUT_S)


@pytest.mark.root
@pytest.mark.slow
def test_the_controller_checks_certificates_against_its_tls_server_name(tls_lab):
    # a DaemonSet shares one certificate: the controller checks that name, not each address
    pki = tls_lab.pki
    tls = Tls(pki.ca, pki.client_cert, pki.client_key)
    for name, admitted in (("r2", True), ("r1", False)):
        clients = NodeClients(tls, TIMEOUT_S, server_name=name)
        try:
            if admitted:
                assert clients.info("r2", tls_lab.grpc_address("r2")).driver
            else:
                with pytest.raises(NodeUnavailable):
                    clients.info("r2", tls_lab.grpc_address("r2"))
        finally:
            clients.close()


@pytest.mark.root
@pytest.mark.slow
def test_a_client_without_certificate_is_refused(tls_lab):
    _assert_refused(tls_lab, _credentials(tls_lab.pki.ca))


@pytest.mark.root
@pytest.mark.slow
def test_a_client_whose_certificate_another_ca_signed_is_refused(tls_lab, tmp_path):
    other = lab_pki.create(tmp_path / "pki", [], ca_name="not the lab's CA")
    # the client trusts the lab's CA (so the server is accepted) but presents the other's cert
    _assert_refused(tls_lab, _credentials(tls_lab.pki.ca, other.client_cert, other.client_key))


@pytest.mark.root
@pytest.mark.slow
def test_plaintext_to_the_tls_port_fails(tls_lab):
    _assert_refused(tls_lab, None)


def _node_manager(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A node manager run that must stop at its settings, before touching the system."""
    argv = [sys.executable, "-m", "srv6pm.node_manager", "--node-id", "tlsx"]
    argv += ["--state-dir", str(tmp_path / "state"), "--bpf-dir", str(tmp_path / "bpf"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]"])
def test_node_manager_without_tls_exits_when_listening_off_loopback(tmp_path, host):
    listen = f"{host}:{free_port_block(1)}"
    r = _node_manager(tmp_path, "--listen", listen)
    assert r.returncode != 0
    assert f"listen '{listen}' is not a loopback address and TLS is off" in r.stderr
    assert "Set tls_ca, tls_cert and tls_key" in r.stderr
    assert not (tmp_path / "state").exists()  # refused before anything was made


def test_node_manager_refuses_partial_tls_settings(tmp_path):
    pki = lab_pki.create(tmp_path / "pki", ["r1"])
    listen = f"127.0.0.1:{free_port_block(1)}"
    r = _node_manager(
        tmp_path, "--listen", listen, "--tls-cert", str(pki.server_cert("r1")), "--tls-key",
        str(pki.server_key("r1")),
    )  # fmt: skip
    assert r.returncode != 0
    assert "mutual TLS needs tls_ca, tls_cert and tls_key together, but tls_ca is not set" in (
        r.stderr
    )
    assert not (tmp_path / "state").exists()


def test_node_manager_with_an_unreadable_tls_file_exits_naming_it(tmp_path):
    pki = lab_pki.create(tmp_path / "pki", ["r1"])
    missing = tmp_path / "missing.key"
    listen = f"[::]:{free_port_block(1)}"
    r = _node_manager(
        tmp_path, "--listen", listen, "--tls-ca", str(pki.ca), "--tls-cert",
        str(pki.server_cert("r1")), "--tls-key", str(missing),
    )  # fmt: skip
    assert r.returncode != 0
    assert f"cannot start: cannot read tls_key {missing}: No such file or directory" in r.stderr
    assert not (tmp_path / "state").exists()
