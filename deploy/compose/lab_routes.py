"""Entry point of the Docker Compose lab's routers: static routes, then the node manager.

    python lab_routes.py PREFIX=GATEWAY ... -- COMMAND [ARG...]

Adds (or replaces) one IPv6 route per PREFIX=GATEWAY in the container's own network namespace,
then execs COMMAND in its place, so the node manager is the container's main process and gets
its signals. The routes reach the other routers' SRv6 locators through a neighbour on a shared
link, as the namespace lab's topology ``locator:`` does: compose has no way to add a route to a
container, and the node manager programs only SR policies and local SIDs. They are
``proto static``, so the node manager, which removes only routes of its own protocol, never
touches them. Needs CAP_NET_ADMIN, which the node manager has anyway, and
pyroute2, which it depends on.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Sequence

from pyroute2 import IPRoute

Route = tuple[ipaddress.IPv6Network, ipaddress.IPv6Address]


def parse(argv: Sequence[str]) -> tuple[list[Route], list[str]]:
    """The routes before ``--`` and the command after it; ValueError says what is wrong."""
    if "--" not in argv:
        raise ValueError("usage: lab_routes.py PREFIX=GATEWAY ... -- COMMAND [ARG...]")
    split = list(argv).index("--")
    specs, command = argv[:split], list(argv[split + 1 :])
    if not command:
        raise ValueError("no command after --")
    routes: list[Route] = []
    for spec in specs:
        prefix, sep, gateway = spec.partition("=")
        if not sep:
            raise ValueError(f"{spec!r}: expected PREFIX=GATEWAY")
        routes.append((ipaddress.IPv6Network(prefix), ipaddress.IPv6Address(gateway)))
    return routes, command


def add_routes(routes: Sequence[Route]) -> None:
    with IPRoute() as ipr:
        for prefix, gateway in routes:
            # replace: a container restarted in place finds its routes still there
            ipr.route(
                "replace",
                family=socket.AF_INET6,
                dst=str(prefix.network_address),
                dst_len=prefix.prefixlen,
                gateway=str(gateway),
            )


def main(argv: Sequence[str]) -> int:
    try:
        routes, command = parse(argv)
    except ValueError as e:
        print(f"lab_routes: {e}", file=sys.stderr)
        return 2
    try:
        add_routes(routes)
    except Exception as e:  # pyroute2's NetlinkError and OSError: say which route, then stop
        print(f"lab_routes: adding {routes}: {e}", file=sys.stderr)
        return 1
    for prefix, gateway in routes:
        print(f"lab_routes: {prefix} via {gateway}", file=sys.stderr)
    os.execvp(command[0], command)  # noqa: S606 (the compose file's own command line)
    return 0  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
