"""``srv6pm`` command line: ``srv6pm lab up|down|status|drop|drops FILE ...``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from .errors import LabError
from .lab import Lab
from .topology import Topology, TopologyError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``srv6pm lab ...``)."""
    parser = argparse.ArgumentParser(prog="srv6pm", description="srv6pm tools")
    tools = parser.add_subparsers(dest="tool", required=True, metavar="TOOL")
    lab = tools.add_parser(
        "lab",
        help="SRv6 lab of network namespaces",
        description="Build and drive a lab of network namespaces.",
    )
    cmds = lab.add_subparsers(dest="command", required=True, metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "file",
        metavar="FILE",
        help="topology YAML file, or the name of a shipped one (e.g. default)",
    )
    common.add_argument("--prefix", help="namespace prefix (default: the topology's name)")
    common.add_argument(
        "--base-port",
        type=int,
        metavar="N",
        help="renumber the node managers' gRPC ports N, N+1, ...",
    )

    up = cmds.add_parser("up", parents=[common], help="create the lab and start node managers")
    up.add_argument("--no-node-managers", action="store_true", help="build the network only")
    up.add_argument(
        "--tls",
        action="store_true",
        help="node managers serve mutual TLS only, with a throwaway PKI in the lab's state "
        "directory (client certificate for grpcurl & co: see the output)",
    )
    up.add_argument(
        "--keep-on-error",
        action="store_true",
        help="leave a half-built lab for inspection instead of tearing it down",
    )
    cmds.add_parser("down", parents=[common], help="stop node managers, delete the lab")
    cmds.add_parser("status", parents=[common], help="show the lab's state as JSON")

    drop = cmds.add_parser(
        "drop", parents=[common], help="drop exactly K packets forwarded by a node toward a peer"
    )
    drop.add_argument("--node", required=True)
    drop.add_argument("--to", required=True, metavar="PEER")
    drop.add_argument("--count", required=True, type=int, metavar="K")
    drop.add_argument(
        "--dst",
        metavar="SID_OR_ADDR",
        help="only packets with this (outer) IPv6 destination address or prefix",
    )
    drops = cmds.add_parser("drops", parents=[common], help="show a node's drop rule counters")
    drops.add_argument("--node", required=True)
    drops.add_argument("--clear", action="store_true", help="remove the node's drop rules")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`srv6pm lab ...` (srv6pm-cli forwards its arguments here) and `python3 -m srv6pm.lab.cli`."""
    args = build_parser().parse_args(argv)
    try:
        lab = Lab(
            Topology.load(args.file),
            prefix=args.prefix,
            base_port=args.base_port,
            tls=getattr(args, "tls", False),
        )
        return _run(lab, args)
    except TopologyError as e:
        print(f"srv6pm: error: {e}", file=sys.stderr)
        return 2
    except LabError as e:
        print(f"srv6pm: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _run(lab: Lab, args: argparse.Namespace) -> int:
    if args.command == "up":
        lab.up(start_node_managers=not args.no_node_managers, keep_on_error=args.keep_on_error)
        for router in lab.topology.routers:
            pid = lab.pid(router)
            manager = f"grpc {lab.grpc_address(router)} pid {pid} log {lab.log_path(router)}"
            vpp = lab.vpp(router) if lab.topology.is_vpp(router) else None
            print(
                f"{router}: netns {lab.netns(router)}"
                + (f", vpp pid {lab.vpp_pid(router)} cli {vpp.sockets.cli}" if vpp else "")
                + (f", {manager}" if pid else "")
            )
        for host in lab.topology.hosts:
            print(f"{host}: netns {lab.netns(host)}")
        if lab.tls:
            pki = lab.pki
            print(f"mutual TLS: ca {pki.ca} client cert {pki.client_cert} key {pki.client_key}")
    elif args.command == "down":
        if not lab.is_up():
            print(f"srv6pm: lab {lab.prefix!r} is not up; cleaning up anyway", file=sys.stderr)
        problems = lab.down()
        for problem in problems:
            print(f"srv6pm: warning: {problem}", file=sys.stderr)
        return 1 if problems else 0
    elif args.command == "status":
        status = lab.status()
        print(json.dumps(status, indent=2))
        return 0 if status["up"] else 3
    elif args.command == "drop":
        _require_up(lab)
        rule = lab.drop(args.node, args.to, args.count, args.dst)
        print(json.dumps(asdict(rule)))
    elif args.command == "drops":
        _require_up(lab)
        if args.clear:
            lab.clear_drops(args.node)
        for rule in lab.drop_counters(args.node).values():
            print(json.dumps(asdict(rule)))
    return 0


def _require_up(lab: Lab) -> None:
    if not lab.is_up():
        raise LabError(f"lab {lab.prefix!r} is not up")


if __name__ == "__main__":
    sys.exit(main())
