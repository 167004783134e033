"""`srv6pm-controller`: run the controller, or manage API tokens (`srv6pm-controller token ...`)."""

from __future__ import annotations

import argparse
import sys

from srv6pm.common.process import configure_logging, serve
from srv6pm.common.settings import parse

from .config import Settings
from .domain.errors import ControllerError
from .server import ControllerServer, build


def token(argv: list[str]) -> int:
    """Create, list or delete API tokens in the database directly (the first admin token)."""
    parser = argparse.ArgumentParser(prog="srv6pm-controller token", description=token.__doc__)
    parser.add_argument("action", choices=("create", "list", "delete"))
    parser.add_argument("name", nargs="?")
    parser.add_argument("--scope", choices=("read", "admin"), default="read")
    parser.add_argument("--database-url", help="as the controller's setting")
    args = parser.parse_args(argv)
    overrides = ["--database-url", args.database_url] if args.database_url else []
    services, db, _ = build(parse(Settings, overrides, "srv6pm-controller", None), False)
    try:
        if args.action == "list":
            for t in services.auth.tokens():
                print(f"{t['name']}\t{t['scope']}\t{t['created_at']:%Y-%m-%d %H:%M:%S}")
        elif not args.name:
            parser.error(f"{args.action} needs a NAME")
        elif args.action == "create":
            print(services.auth.create(args.name, args.scope, "srv6pm-controller token"))
        else:
            services.auth.delete(args.name, "srv6pm-controller token")
    except ControllerError as e:
        print(f"srv6pm-controller: error: {e}", file=sys.stderr)
        return 1
    finally:
        db.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["token"]:
        return token(argv[1:])
    settings = parse(Settings, argv, "srv6pm-controller", __doc__)
    configure_logging(settings.log_level)
    return serve(ControllerServer(settings))


if __name__ == "__main__":
    sys.exit(main())
