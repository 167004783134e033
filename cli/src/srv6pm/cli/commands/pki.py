"""`srv6pm pki init|issue`: the mutual-TLS certificates between the controller and the node
managers, made on the operator's machine (no controller needed): a CA, then one folder per
identity with ca.crt, tls.crt and tls.key, the files every srv6pm image reads from
/etc/srv6pm/tls. The certificates themselves: srv6pm.common.pki.

srv6pm.common.pki (and cryptography) is imported only when these commands run.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..common import CommandError, UsageProblem

if TYPE_CHECKING:
    from types import ModuleType

app = typer.Typer(
    no_args_is_help=True,
    help="Certificates for mutual TLS: a CA (init), then each node manager's and the "
    "controller's identity (issue).",
)


class Role(enum.StrEnum):
    """srv6pm.common.pki.Role's values, known without importing it."""

    NODE_MANAGER = "node-manager"
    CONTROLLER = "controller"


Directory = Annotated[
    Path,
    typer.Option(
        "--dir",
        file_okay=False,
        help="The CA's directory: ca.crt and ca.key (keep it private; offline is best).",
    ),
]
Force = Annotated[bool, typer.Option("--force", help="Replace files that exist.")]


def _pki() -> ModuleType:
    try:
        from srv6pm.common import pki  # noqa: PLC0415 (cryptography only for these commands)
    except ImportError as e:
        raise CommandError(
            f"srv6pm pki needs srv6pm-common with cryptography ({e}): "
            "pip install 'srv6pm-common[pki]' (or pip install -e './common[pki]' in a checkout)"
        ) from None
    return pki


def _run(pki: ModuleType, call: Callable[[], Path]) -> Path:
    try:
        folder: Path = call()
    except pki.InvalidName as e:
        raise UsageProblem(str(e)) from None
    except pki.PkiError as e:
        raise CommandError(str(e)) from None
    except OSError as e:
        raise CommandError(f"{e.filename or ''}: {e.strerror or e}") from None
    return folder


@app.command("init")
def init(
    directory: Directory,
    ca_name: Annotated[str, typer.Option(help="The CA's common name.")] = "srv6pm CA",
    days: Annotated[int, typer.Option(min=1, help="Validity of the CA.")] = 3650,
    force: Force = False,
) -> None:
    """Make a new CA in --dir: ca.crt, and ca.key (mode 0600; the directory 0700)."""
    pki = _pki()
    ca = _run(pki, lambda: pki.init_ca(directory, ca_name, days, force))
    typer.echo(f"CA: {ca} (key {directory / pki.CA_KEY_FILE})")


@app.command("issue")
def issue(
    name: Annotated[
        str,
        typer.Argument(
            help="The node's name as the controller knows it (node-manager), or the "
            "client's name (controller). Also the folder's name."
        ),
    ],
    directory: Directory,
    role: Annotated[
        Role,
        typer.Option(
            case_sensitive=False,
            help="node-manager: a server certificate naming NAME, localhost, 127.0.0.1, ::1 "
            "and every --san; controller: a client certificate.",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            file_okay=False,
            show_default=False,
            help="Where NAME/ is written. Default: --dir.",
        ),
    ] = None,
    san: Annotated[
        list[str] | None,
        typer.Option(
            "--san",
            metavar="NAME_OR_ADDRESS",
            show_default=False,
            help="Another DNS name or IP address the controller reaches the node manager by "
            "(repeat the option). node-manager only.",
        ),
    ] = None,
    days: Annotated[int, typer.Option(min=1, help="Validity of the certificate.")] = 365,
    force: Force = False,
) -> None:
    """Issue NAME's certificate with the CA in --dir: NAME/ca.crt, NAME/tls.crt and
    NAME/tls.key (mode 0600), to mount as /etc/srv6pm/tls (or give to --tls-ca, --tls-cert,
    --tls-key)."""
    pki = _pki()
    folder = _run(
        pki,
        lambda: pki.issue(directory, name, role.value, out, san or [], days, force),
    )
    typer.echo(f"{name} ({role.value}): {folder}")
