"""`srv6pm lab ...`: the lab's own command line (srv6pm.lab.cli, argparse), arguments unchanged.

srv6pm.lab is imported only when this command runs: the operators' CLI does not need the lab
(pyroute2, namespaces, root) to be installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import typer

from ..common import CommandError

LAB_MODULES = ("srv6pm", "srv6pm.lab", "srv6pm.lab.cli")
# Everything after `lab` is the lab's, --help included.
CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _lab_main() -> Callable[[list[str]], Any]:
    try:
        module = importlib.import_module("srv6pm.lab.cli")
    except ImportError as e:
        if e.name in LAB_MODULES:
            raise CommandError(
                "srv6pm lab needs srv6pm.lab, which is not installed: "
                "pip install srv6pm-lab (or pip install -e ./lab in a checkout)"
            ) from None
        raise CommandError(f"srv6pm.lab cannot be loaded: {e}") from None
    main: Callable[[list[str]], Any] = module.main
    return main


def lab(ctx: typer.Context) -> None:
    """SRv6 lab of network namespaces (up, down, status, drop, drops): srv6pm lab --help."""
    main = _lab_main()
    try:
        code = main(["lab", *ctx.args])
    except SystemExit as e:  # argparse: --help, or a usage error (2)
        code = e.code
    if code is None:
        code = 0
    raise typer.Exit(code if isinstance(code, int) else 1)
