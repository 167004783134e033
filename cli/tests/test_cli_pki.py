"""`srv6pm pki init|issue`: a CA and the node managers' and controller's identities that verify
(cryptography's X.509 verification, as a strict peer checks them) and complete a real mutual-TLS
handshake; bad input refused with a message and status, files never silently replaced."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cli_harness import CLEAN_ENV
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    DNSName,
    IPAddress,
    PolicyBuilder,
    Store,
    VerificationError,
)
from srv6pm.cli.app import app
from srv6pm.common import pki
from typer.testing import CliRunner, Result

ROUTERS = ("r1", "r2", "r3")


def srv6pm(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env=CLEAN_ENV)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    """A CA in ca/ and, in tls/, r1 r2 r3 (node managers; r1 with more names) and controller."""
    ok(srv6pm("pki", "init", "--dir", tmp_path / "ca"))
    for router in ROUTERS:
        extra = ["--san", "r1.example.net", "--san", "2001:db8::1"] if router == "r1" else []
        ok(
            srv6pm(
                "pki", "issue", router, "--dir", tmp_path / "ca", "--out", tmp_path / "tls",
                "--role", "node-manager", *extra,
            )
        )  # fmt: skip
    ok(
        srv6pm(
            "pki", "issue", "controller", "--dir", tmp_path / "ca", "--out", tmp_path / "tls",
            "--role", "controller",
        )
    )  # fmt: skip
    return tmp_path


def test_init_makes_a_ca_that_signs_certificates_only(tmp_path: Path) -> None:
    result = ok(srv6pm("pki", "init", "--dir", tmp_path / "ca", "--ca-name", "acme srv6pm CA"))
    assert str(tmp_path / "ca" / "ca.crt") in result.stdout
    ca = load(tmp_path / "ca" / "ca.crt")
    assert ca.subject.rfc4514_string() == "CN=acme srv6pm CA"
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca and constraints.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign and not usage.digital_signature
    assert mode(tmp_path / "ca") == 0o700
    assert mode(tmp_path / "ca" / "ca.key") == 0o600


def test_issued_identities_have_the_files_names_and_usages_each_side_checks(stack: Path) -> None:
    ca = load(stack / "ca" / "ca.crt")
    for name in (*ROUTERS, "controller"):
        folder = stack / "tls" / name
        assert sorted(p.name for p in folder.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
        assert mode(folder) == 0o700 and mode(folder / "tls.key") == 0o600
        assert load(folder / "ca.crt") == ca, "one CA for the whole stack"
        cert = load(folder / "tls.crt")
        cert.verify_directly_issued_by(ca)
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        assert usage.digital_signature and not usage.key_cert_sign
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        eku = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        if name == "controller":
            assert eku == [ExtendedKeyUsageOID.CLIENT_AUTH]
            assert san.get_values_for_type(x509.DNSName) == ["controller"]
        else:
            assert eku == [ExtendedKeyUsageOID.SERVER_AUTH]
            assert {name, "localhost"} <= set(san.get_values_for_type(x509.DNSName))
    r1 = load(stack / "tls" / "r1" / "tls.crt")
    san = r1.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "r1.example.net" in san.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("2001:db8::1") in san.get_values_for_type(x509.IPAddress)


def test_the_certificates_pass_cryptography_verification_for_their_names_only(
    stack: Path,
) -> None:
    store = Store([load(stack / "ca" / "ca.crt")])
    r1 = load(stack / "tls" / "r1" / "tls.crt")
    for subject in (
        DNSName("r1"),
        DNSName("r1.example.net"),
        DNSName("localhost"),
        IPAddress(ipaddress.ip_address("::1")),
        IPAddress(ipaddress.ip_address("2001:db8::1")),
    ):
        chain = PolicyBuilder().store(store).build_server_verifier(subject).verify(r1, [])
        assert chain[-1] == load(stack / "ca" / "ca.crt")
    with pytest.raises(VerificationError, match="subjectAltName"):
        PolicyBuilder().store(store).build_server_verifier(DNSName("r2")).verify(r1, [])
    controller = load(stack / "tls" / "controller" / "tls.crt")
    verified = PolicyBuilder().store(store).build_client_verifier().verify(controller, [])
    assert verified.subjects == [x509.DNSName("controller")]
    # a server certificate is no client's, nor the other way round
    with pytest.raises(VerificationError):
        PolicyBuilder().store(store).build_client_verifier().verify(r1, [])
    with pytest.raises(VerificationError):
        verifier = PolicyBuilder().store(store).build_server_verifier(DNSName("controller"))
        verifier.verify(controller, [])


def handshake(server: Path, client: Path, name: str) -> None:
    """Mutual TLS between two identity folders, in memory, as gRPC does it: the server requires
    a client certificate from its CA, the client checks the server's certificate names ``name``."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(server / "tls.crt", server / "tls.key")
    server_ctx.load_verify_locations(server / "ca.crt")
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_cert_chain(client / "tls.crt", client / "tls.key")
    client_ctx.load_verify_locations(client / "ca.crt")
    pipes = [ssl.MemoryBIO() for _ in range(4)]
    s = server_ctx.wrap_bio(pipes[0], pipes[1], server_side=True)
    c = client_ctx.wrap_bio(pipes[2], pipes[3], server_hostname=name)
    for _ in range(10):
        done = 0
        for side, out_bio, in_bio in ((c, pipes[3], pipes[0]), (s, pipes[1], pipes[2])):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
            in_bio.write(out_bio.read())
        if done == 2:
            assert s.getpeercert() is not None  # the server saw the client's certificate
            return
    raise AssertionError("handshake did not finish")


def test_controller_and_node_manager_complete_a_mutual_tls_handshake(stack: Path) -> None:
    tls = stack / "tls"
    handshake(tls / "r1", tls / "controller", "r1")
    handshake(tls / "r1", tls / "controller", "r1.example.net")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(tls / "r1", tls / "controller", "r2")  # r1's certificate is not r2's


def test_a_client_of_another_ca_is_refused(stack: Path, tmp_path: Path) -> None:
    ok(srv6pm("pki", "init", "--dir", tmp_path / "other"))
    ok(srv6pm("pki", "issue", "controller", "--dir", tmp_path / "other", "--role", "controller"))
    with pytest.raises(ssl.SSLError):
        handshake(stack / "tls" / "r1", tmp_path / "other" / "controller", "r1")


def error(result: Result, status: int, message: str) -> None:
    assert result.exit_code == status, result.output
    assert message in " ".join(result.stderr.replace("│", " ").split()), result.stderr
    assert "Traceback" not in result.output


def test_existing_files_are_kept_unless_forced(stack: Path) -> None:
    key = stack / "tls" / "r1" / "tls.key"
    before = key.read_bytes()
    again = ("pki", "issue", "r1", "--dir", stack / "ca", "--out", stack / "tls")
    error(srv6pm(*again, "--role", "node-manager"), 1, "tls.key already exist")
    error(srv6pm("pki", "init", "--dir", stack / "ca"), 1, "ca.key already exist")
    assert key.read_bytes() == before
    ok(srv6pm(*again, "--role", "node-manager", "--force"))
    assert key.read_bytes() != before
    load(stack / "tls" / "r1" / "tls.crt").verify_directly_issued_by(load(stack / "ca" / "ca.crt"))


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["bad/name", "--role", "node-manager"], 2, "'bad/name' is not a valid name"),
        (["-r1", "--role", "node-manager"], 2, "No such option"),
        (["r1", "--role", "router"], 2, "'router' is not one of 'node-manager', 'controller'"),
        (["r1", "--role", "node-manager", "--san", "not a name"], 2, "neither an IP address"),
        (["ops", "--role", "controller", "--san", "ops.example"], 1, "--san is for node-manager"),
        (["r1", "--role", "node-manager", "--days", "4000"], 1, "the CA expires on"),
        (["r1", "--role", "node-manager", "--days", "0"], 2, "--days"),
    ],
)
def test_bad_input_is_refused_with_the_reason(
    tmp_path: Path, args: list[str], status: int, message: str
) -> None:
    ok(srv6pm("pki", "init", "--dir", tmp_path / "ca", "--days", "3650"))
    error(srv6pm("pki", "issue", *args[:1], "--dir", tmp_path / "ca", *args[1:]), status, message)
    assert sorted(p.name for p in (tmp_path / "ca").iterdir()) == ["ca.crt", "ca.key"]


def test_issue_without_a_ca_says_to_run_init(tmp_path: Path) -> None:
    result = srv6pm("pki", "issue", "r1", "--dir", tmp_path / "none", "--role", "node-manager")
    error(result, 1, f"no CA in {tmp_path / 'none'}")
    error(result, 1, "run `srv6pm pki init --dir")
    assert not (tmp_path / "none").exists()


def test_a_key_that_is_not_the_cas_is_refused(tmp_path: Path) -> None:
    ok(srv6pm("pki", "init", "--dir", tmp_path / "a"))
    ok(srv6pm("pki", "init", "--dir", tmp_path / "b"))
    (tmp_path / "a" / "ca.key").write_bytes((tmp_path / "b" / "ca.key").read_bytes())
    result = srv6pm("pki", "issue", "r1", "--dir", tmp_path / "a", "--role", "node-manager")
    error(result, 1, "is not the key of")


def test_per_service_folders_for_the_compose_stack(tmp_path: Path) -> None:
    folders = pki.create_per_service(tmp_path / "tls", ROUTERS)
    assert sorted(folders) == ["controller", *ROUTERS]
    handshake(folders["r2"], folders["controller"], "r2")
    with pytest.raises(ValueError, match="names both the client and a router"):
        pki.create_per_service(tmp_path / "again", ["controller"])
