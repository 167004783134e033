"""A lab's throwaway PKI for mutual TLS (``Lab(tls=True)``, the kube-apiserver of
:mod:`.kube`): one CA, a server certificate per router and one client certificate (CN
"controller"), PEM files in one directory, keys mode 0600. The certificates are the product's
(:mod:`srv6pm.common.pki`, behind ``srv6pm pki``); only this layout is the lab's.

The CA's key is never written, so nothing can be added to the PKI later (to add a router, make
the whole PKI again) and nothing outlives the lab (``Lab.down`` removes the directory with the
lab's state). For real certificates: ``srv6pm pki init`` and ``srv6pm pki issue`` (docs/CLI.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from srv6pm.common.pki import CLIENT_NAME, LEAF_DAYS, CertificateAuthority, write_cert


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
    ca = CertificateAuthority.new(ca_name, LEAF_DAYS)
    write_cert(pki.ca, ca.cert)
    for router in routers:
        ca.server(router).write(pki.server_cert(router), pki.server_key(router))
    ca.client(CLIENT_NAME).write(pki.client_cert, pki.client_key)
    return pki
