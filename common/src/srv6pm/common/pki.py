"""The certificates of srv6pm's mutual TLS: a CA, a server certificate per node manager and a
client certificate for the controller (and any operator tool), EC P-256 keys written mode 0600.

The node manager admits every client certificate the CA signed and the controller checks each
node manager's certificate against the node's name (docs/CONFIGURATION.md, "Securing the node
manager"), so:

- a node manager's certificate (:attr:`Role.NODE_MANAGER`): serverAuth, and as subject
  alternative names its name, ``localhost``, 127.0.0.1 and ::1 (tools on the router itself),
  plus any names or addresses the controller reaches it by;
- the controller's (:attr:`Role.CONTROLLER`): clientAuth, its name as the only alternative
  name (the node manager admits any client the CA signed, whatever its name);
- the CA: CA:TRUE, path length 0, keyCertSign and cRLSign only.

Each identity is a folder holding ``ca.crt``, ``tls.crt`` and ``tls.key``: the names every
srv6pm image reads from /etc/srv6pm/tls (a kubernetes.io/tls Secret's keys).

``srv6pm pki init`` and ``srv6pm pki issue`` (srv6pm.cli) are the operator's commands over
:func:`init_ca` and :func:`issue`.
"""

from __future__ import annotations

import datetime
import enum
import ipaddress
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_NAME = "controller"
# The file names every srv6pm image reads its identity from, in /etc/srv6pm/tls/
CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"
CA_KEY_FILE = "ca.key"  # beside CA_FILE in the CA's own directory, never in an identity's
CA_DAYS = 3650
LEAF_DAYS = 365
CLOCK_SKEW = datetime.timedelta(hours=1)  # not_before in the past: a peer's clock may lag

# A host name (labels of letters, digits, '-' and '_', dot-separated): what a node is called,
# what the controller connects to, and a folder's name.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


class PkiError(Exception):
    """The certificates cannot be made as asked; the message says why and what to do."""


class InvalidName(PkiError, ValueError):
    """A name or subject alternative name that cannot be one."""


class Role(enum.StrEnum):
    """What a certificate is for."""

    NODE_MANAGER = "node-manager"  # serves gRPC: serverAuth, with names
    CONTROLLER = "controller"  # the node managers' client: clientAuth


def check_name(name: str) -> str:
    """``name`` if it can name a node manager or the controller (a host name); else
    :class:`InvalidName`."""
    if len(name) > 253 or not _NAME.fullmatch(name):
        raise InvalidName(
            f"{name!r} is not a valid name: use a host name (letters, digits, '-', '_', "
            "dot-separated labels), as the controller addresses the node"
        )
    return name


def alt_name(value: str) -> x509.GeneralName:
    """A subject alternative name from an IPv4/IPv6 address or a DNS name."""
    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        pass
    try:
        return x509.DNSName(check_name(value))
    except InvalidName:
        raise InvalidName(f"--san {value!r} is neither an IP address nor a DNS name") from None


@dataclass(frozen=True)
class Identity:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def write(self, cert_path: Path, key_path: Path) -> None:
        """The key (mode 0600) then the certificate, as PEM; files overwritten."""
        write_key(key_path, self.key)
        write_cert(cert_path, self.cert)


@dataclass(frozen=True)
class CertificateAuthority:
    """The CA's certificate and key: signs node managers' and the controller's certificates."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def new(cls, name: str, days: int = CA_DAYS) -> CertificateAuthority:
        """A new CA called ``name``, valid ``days`` days."""
        key = _new_key()
        return cls(_ca_certificate(key, name, datetime.timedelta(days=days)), key)

    @classmethod
    def load(cls, directory: Path) -> CertificateAuthority:
        """The CA :func:`init_ca` wrote in ``directory`` (ca.crt, ca.key)."""
        cert_path, key_path = directory / CA_FILE, directory / CA_KEY_FILE
        missing = [str(p) for p in (cert_path, key_path) if not p.is_file()]
        if missing:
            raise PkiError(
                f"no CA in {directory} ({', '.join(missing)} missing): "
                f"run `srv6pm pki init --dir {directory}` first"
            )
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as e:
            raise PkiError(f"cannot read the CA in {directory}: {e}") from e
        if not isinstance(key, ec.EllipticCurvePrivateKey) or _spki(key.public_key()) != _spki(
            cert.public_key()
        ):
            raise PkiError(f"{key_path} is not the key of {cert_path}")
        return cls(cert, key)

    def server(
        self, name: str, extra_names: Sequence[x509.GeneralName] = (), days: int = LEAF_DAYS
    ) -> Identity:
        """A node manager's certificate: its name, loopback for tools on the router, and
        ``extra_names`` (the names and addresses the controller connects to)."""
        names: list[x509.GeneralName] = [
            x509.DNSName(name),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        names += [n for n in extra_names if n not in names]
        return self._issue(name, ExtendedKeyUsageOID.SERVER_AUTH, names, days)

    def client(self, name: str, days: int = LEAF_DAYS) -> Identity:
        """A client certificate (the controller's, or an operator tool's). Node managers do
        not look at its name; it is a subject alternative name too, which strict verifiers
        (RFC 5280 profiles without a subject CN) require of a client."""
        return self._issue(name, ExtendedKeyUsageOID.CLIENT_AUTH, [x509.DNSName(name)], days)

    def _issue(
        self,
        name: str,
        usage: x509.ObjectIdentifier,
        alt_names: list[x509.GeneralName],
        days: int,
    ) -> Identity:
        key = _new_key()
        validity = datetime.timedelta(days=days)
        return Identity(_leaf(self, key, name, usage, alt_names, validity), key)

    def write_identity(self, folder: Path, identity: Identity) -> None:
        """``folder`` (made mode 0700) with ca.crt, tls.crt and tls.key (mode 0600)."""
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_cert(folder / CA_FILE, self.cert)
        identity.write(folder / CERT_FILE, folder / KEY_FILE)


def init_ca(
    directory: Path, name: str = "srv6pm CA", days: int = CA_DAYS, force: bool = False
) -> Path:
    """Make a new CA in ``directory`` (created mode 0700): ca.crt and ca.key (0600). Files
    already there are kept (:class:`PkiError`) unless ``force``. Returns ca.crt's path."""
    if days < 1:
        raise PkiError(f"--days must be at least 1, got {days}")
    if not name.strip():
        raise InvalidName("the CA's name is empty")
    _refuse_existing([directory / CA_FILE, directory / CA_KEY_FILE], force)
    _make_dir(directory)
    ca = CertificateAuthority.new(name, days)
    write_key(directory / CA_KEY_FILE, ca.key)
    write_cert(directory / CA_FILE, ca.cert)
    return directory / CA_FILE


def issue(
    ca_dir: Path,
    name: str,
    role: Role | str,
    out_dir: Path | None = None,
    sans: Iterable[str] = (),
    days: int = LEAF_DAYS,
    force: bool = False,
) -> Path:
    """Issue ``name``'s certificate for ``role`` with the CA in ``ca_dir``, in
    ``<out_dir>/<name>/`` (``out_dir`` defaults to ``ca_dir``): ca.crt, tls.crt, tls.key.
    Files already there are kept (:class:`PkiError`) unless ``force``. Returns the folder."""
    check_name(name)
    try:
        role = Role(role)
    except ValueError:
        choices = ", ".join(r.value for r in Role)
        raise PkiError(f"unknown role {role!r}: one of {choices}") from None
    extra = [alt_name(s) for s in sans]
    if extra and role is not Role.NODE_MANAGER:
        raise PkiError(
            f"--san is for node-manager certificates (the names clients connect to); "
            f"a {role.value} certificate names only {name!r}"
        )
    if days < 1:
        raise PkiError(f"--days must be at least 1, got {days}")
    ca = CertificateAuthority.load(ca_dir)
    folder = (out_dir or ca_dir) / name
    _refuse_existing([folder / f for f in (CA_FILE, CERT_FILE, KEY_FILE)], force)
    not_after = ca.cert.not_valid_after_utc
    now = datetime.datetime.now(datetime.UTC)
    if now + datetime.timedelta(days=days) > not_after:
        raise PkiError(
            f"the CA expires on {not_after:%Y-%m-%d}, before {days} days from now: "
            "use fewer --days or a new CA"
        )
    identity = ca.server(name, extra, days) if role is Role.NODE_MANAGER else ca.client(name, days)
    _make_dir(folder.parent)
    ca.write_identity(folder, identity)
    return folder


def create_per_service(
    directory: Path,
    routers: Iterable[str],
    client: str = CLIENT_NAME,
    ca_name: str = "srv6pm compose CA",
) -> dict[str, Path]:
    """A throwaway CA (its key never written) and one folder per service in ``directory``:
    ``<client>/`` with the controller's client certificate and ``<router>/`` with each router's
    server certificate; each holds ca.crt, tls.crt and tls.key. Folders are created mode 0700,
    files overwritten. Returns the folder of each name."""
    routers = list(routers)
    for name in (client, *routers):
        check_name(name)
    if client in routers:
        raise ValueError(f"{client!r} names both the client and a router")
    _make_dir(directory)
    ca = CertificateAuthority.new(ca_name, LEAF_DAYS)
    leaves = {client: ca.client(client), **{router: ca.server(router) for router in routers}}
    folders: dict[str, Path] = {}
    for name, leaf in leaves.items():
        ca.write_identity(directory / name, leaf)
        folders[name] = directory / name
    return folders


def write_cert(path: Path, cert: x509.Certificate) -> None:
    """A certificate as PEM, mode 0644."""
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.chmod(0o644)


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """A private key as unencrypted PKCS#8 PEM, mode 0600 from its creation on."""
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


def _refuse_existing(paths: Iterable[Path], force: bool) -> None:
    there = [str(p) for p in paths if p.exists()]
    if there and not force:
        raise PkiError(f"{', '.join(there)} already exist: keep them, or pass --force to replace")


def _make_dir(directory: Path) -> None:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise PkiError(f"cannot make {directory}: {e}") from e
    if not directory.is_dir():
        raise PkiError(f"{directory} is not a directory")


def _spki(public_key: object) -> bytes:
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        return b""
    return public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256: what every TLS stack accepts, and milliseconds to generate (RSA takes longer)
    return ec.generate_private_key(ec.SECP256R1())


def _builder(
    subject: str,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    validity: datetime.timedelta,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, sign_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not sign_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=sign_certificates,
        crl_sign=sign_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey, name: str, validity: datetime.timedelta
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        _builder(name, subject, key.public_key(), validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(sign_certificates=True), critical=True)
    )
    cert: x509.Certificate = builder.sign(key, hashes.SHA256())
    return cert


def _leaf(
    ca: CertificateAuthority,
    key: ec.EllipticCurvePrivateKey,
    name: str,
    usage: x509.ObjectIdentifier,
    alt_names: list[x509.GeneralName],
    validity: datetime.timedelta,
) -> x509.Certificate:
    builder = (
        _builder(name, ca.cert.subject, key.public_key(), validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(sign_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert: x509.Certificate = builder.sign(ca.key, hashes.SHA256())
    return cert
