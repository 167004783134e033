"""A throwaway PKI for a lab's mutual TLS: one CA, a server certificate per router and one
client certificate (CN "controller"), as PEM files in one directory, keys mode 0600.

Lab use only: the CA's key is never written, so nothing can be added to the PKI later and
nothing outlives the lab (``Lab.down`` removes the directory with the lab's state). For
production certificates see docs/CONFIGURATION.md ("Securing the node manager").
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_NAME = "controller"
VALIDITY = datetime.timedelta(days=365)
CLOCK_SKEW = datetime.timedelta(hours=1)  # not_before in the past: a peer's clock may lag


@dataclass(frozen=True)
class Pki:
    """Where a lab's PKI files are (they exist once :func:`create` has run)."""

    directory: Path

    @property
    def ca(self) -> Path:
        """The CA certificate: node managers trust clients it signed, clients trust servers."""
        return self.directory / "ca.pem"

    @property
    def client_cert(self) -> Path:
        """The client certificate (CN "controller") every gRPC client of the lab presents."""
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        """The client certificate's private key."""
        return self.directory / "client.key"

    def server_cert(self, router: str) -> Path:
        """``router``'s node manager certificate (SAN: router name, localhost, 127.0.0.1, ::1)."""
        return self.directory / f"server-{router}.pem"

    def server_key(self, router: str) -> Path:
        """``router``'s node manager private key."""
        return self.directory / f"server-{router}.key"


def create(directory: Path, routers: Iterable[str], ca_name: str = "srv6pm lab CA") -> Pki:
    """Make a new CA and, signed by it, a server certificate per router and the client
    certificate, in ``directory`` (created mode 0700 if missing; files overwritten)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    pki = Pki(directory)
    ca_key = _new_key()
    ca_cert = _ca_certificate(ca_key, ca_name)
    _write_cert(pki.ca, ca_cert)
    for router in routers:
        key = _new_key()
        names: list[x509.GeneralName] = [
            x509.DNSName(router),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        cert = _leaf(ca_key, ca_cert, key, router, ExtendedKeyUsageOID.SERVER_AUTH, names)
        _write_key(pki.server_key(router), key)
        _write_cert(pki.server_cert(router), cert)
    key = _new_key()
    cert = _leaf(ca_key, ca_cert, key, CLIENT_NAME, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    _write_key(pki.client_key, key)
    _write_cert(pki.client_cert, cert)
    return pki


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256: what every TLS stack accepts, and milliseconds to generate (RSA takes longer)
    return ec.generate_private_key(ec.SECP256R1())


def _builder(
    subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _ca_certificate(key: ec.EllipticCurvePrivateKey, name: str) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        _builder(name, subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    cert: x509.Certificate = builder.sign(key, hashes.SHA256())
    return cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    name: str,
    usage: x509.ObjectIdentifier,
    alt_names: list[x509.GeneralName],
) -> x509.Certificate:
    builder = (
        _builder(name, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert: x509.Certificate = builder.sign(ca_key, hashes.SHA256())
    return cert


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.chmod(0o644)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # created 0600, never readable by others even for a moment; an old file is fixed too
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)
