"""`python -m srv6pm.common.healthcheck SETTING`: a container health check. GET /healthz at the
address the named setting (an env var such as SRV6PM_LISTEN) holds, so that the check follows
the service when an operator moves its port. Exit 0 when healthy, 1 otherwise."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

WILDCARDS = {"", "0.0.0.0", "::", "[::]"}  # noqa: S104 (parsed, never bound)


def url_of(listen: str) -> str:
    """The /healthz URL of a host:port listen address; a wildcard host is probed on loopback."""
    host, _, port = listen.rpartition(":")
    if host in WILDCARDS:
        host = "127.0.0.1" if host in ("", "0.0.0.0") else "[::1]"  # noqa: S104
    return f"http://{host}:{port}/healthz"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not os.environ.get(argv[0]):
        print("usage: python -m srv6pm.common.healthcheck ENV_VAR (holding host:port)")
        return 2
    url = url_of(os.environ[argv[0]])
    try:
        with urllib.request.urlopen(url, timeout=3) as reply:  # noqa: S310 (http only, ours)
            return 0 if reply.status == 200 else 1
    except (OSError, urllib.error.URLError) as e:
        print(f"{url}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
