"""A throwaway PKI for a lab's mutual TLS: one CA, a server certificate per router and one
client certificate (CN "controller"), keys mode 0600. Two layouts:

- :func:`create`: PEM files in one directory, for the namespace lab (``Lab(tls=True)``);
- :func:`create_per_service`: one folder per service holding ``ca.crt``, ``tls.crt`` and
  ``tls.key``, the names the images read from /etc/srv6pm/tls (a kubernetes.io/tls Secret's
  keys), for the Docker Compose stack: ``python -m srv6pm.lab.pki DIR r1 r2 r3``.

Lab use only: the CA's key is never written, so nothing can be added to the PKI later (to add a
router, make the whole PKI again) and nothing outlives the lab (``Lab.down`` removes the
directory with the lab's state). For production certificates see docs/CONFIGURATION.md
("Securing the node manager").
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Iterable, Sequence
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
    ca = _Ca.new(ca_name)
    _write_cert(pki.ca, ca.cert)
    for router in routers:
        ca.server(router).write(pki.server_cert(router), pki.server_key(router))
    ca.client(CLIENT_NAME).write(pki.client_cert, pki.client_key)
    return pki


# The file names every srv6pm image reads its identity from, in /etc/srv6pm/tls/
CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"


def create_per_service(
    directory: Path,
    routers: Iterable[str],
    client: str = CLIENT_NAME,
    ca_name: str = "srv6pm compose CA",
) -> dict[str, Path]:
    """Make a new CA and one folder per service in ``directory``: ``<client>/`` with the
    client certificate (the controller's identity towards node managers) and ``<router>/``
    with each router's server certificate (SAN: the router's name, which is how the
    controller addresses it). Each folder holds ca.crt, tls.crt and tls.key (mode 0600);
    folders are created mode 0700, files overwritten. Returns the folder of each name."""
    routers = list(routers)
    if client in routers:
        raise ValueError(f"{client!r} names both the client and a router")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca = _Ca.new(ca_name)
    leaves = {client: ca.client(client), **{router: ca.server(router) for router in routers}}
    folders: dict[str, Path] = {}
    for name, leaf in leaves.items():
        folder = directory / name
        folder.mkdir(mode=0o700, exist_ok=True)
        _write_cert(folder / CA_FILE, ca.cert)
        leaf.write(folder / CERT_FILE, folder / KEY_FILE)
        folders[name] = folder
    return folders


@dataclass(frozen=True)
class _Leaf:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def write(self, cert_path: Path, key_path: Path) -> None:
        _write_key(key_path, self.key)
        _write_cert(cert_path, self.cert)


@dataclass(frozen=True)
class _Ca:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def new(cls, name: str) -> _Ca:
        key = _new_key()
        return cls(_ca_certificate(key, name), key)

    def server(self, router: str) -> _Leaf:
        """A node manager's certificate: its name, and loopback for tools on the router."""
        names: list[x509.GeneralName] = [
            x509.DNSName(router),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        return self._issue(router, ExtendedKeyUsageOID.SERVER_AUTH, names)

    def client(self, name: str) -> _Leaf:
        return self._issue(name, ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def _issue(
        self, name: str, usage: x509.ObjectIdentifier, alt_names: list[x509.GeneralName]
    ) -> _Leaf:
        key = _new_key()
        return _Leaf(_leaf(self.key, self.cert, key, name, usage, alt_names), key)


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m srv6pm.lab.pki DIR ROUTER...``: :func:`create_per_service` in DIR."""
    parser = argparse.ArgumentParser(
        prog="python -m srv6pm.lab.pki",
        description="A throwaway CA and, per service, ca.crt, tls.crt and tls.key: DIR/<client>/ "
        "holds the client certificate, DIR/<router>/ each router's server certificate.",
    )
    parser.add_argument("directory", type=Path, metavar="DIR")
    parser.add_argument("routers", nargs="+", metavar="ROUTER")
    parser.add_argument(
        "--client", default=CLIENT_NAME, help="name of the client's folder and certificate"
    )
    args = parser.parse_args(argv)
    try:
        folders = create_per_service(args.directory, args.routers, args.client)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name, folder in folders.items():
        print(f"{name}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
