"""The lab's throwaway PKI (``Lab(tls=True)``, kube.py): the product's certificates
(srv6pm.common.pki) in the lab's one-directory layout, keys 0600."""

from __future__ import annotations

import stat
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from srv6pm.lab import pki


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_namespace_labs_pki_layout_has_a_server_per_router_and_one_client(
    tmp_path: Path,
) -> None:
    made = pki.create(tmp_path / "pki", ["r1", "r2"])
    assert sorted(p.name for p in made.directory.iterdir()) == [
        "ca.pem",
        "client.key",
        "client.pem",
        "server-r1.key",
        "server-r1.pem",
        "server-r2.key",
        "server-r2.pem",
    ]
    assert stat.S_IMODE(made.directory.stat().st_mode) == 0o700
    ca = load(made.ca)
    pairs = [(made.server_cert(r), made.server_key(r)) for r in ("r1", "r2")]
    for cert, key in [*pairs, (made.client_cert, made.client_key)]:
        load(cert).verify_directly_issued_by(ca)
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    server = load(made.server_cert("r2"))
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["r2", "localhost"]
    client = load(made.client_cert)
    eku = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not (tmp_path / "pki" / "ca.key").exists(), "the lab's CA key is never written"
