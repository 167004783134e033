"""`make demo`: the product on one machine, driven as an operator drives it.

Starts Kafka, InfluxDB and the collector, builds h1 - r1 - r2 - r3 - h2 in network namespaces with
one node manager per router (mutual TLS only), and the controller. Then, through the controller's
REST API only: registers the routers as nodes, their SIDs and the SR policies h1 <-> h2, and
creates two monitoring sessions (one from each end). It sends traffic, drops a known number of
packets on r2 -> r3 and r2 -> r1 in one block and delays r2 -> r3 by a known amount in another,
and shows with the `srv6pm` CLI the live table of loss and delay per block, the loss localised
to the segment it was injected on, and a PNG plot. Everything is torn down on exit or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import fleet
from .lab import Lab
from .pipeline import ResultsPipeline
from .scenario import FORWARD_SIDS, H1, H2, REVERSE_SIDS
from .servers import ControllerProcess
from .topology import Topology

FORWARD_DROPS, REVERSE_DROPS = 5, 3
DELAY_MS = 20
SESSIONS = ("h1-h2", "h2-h1")


def run(period_s: float, prefix: str, base_port: int | None, blocks: int, plot: Path) -> int:
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="srv6pm-demo-")))
        print("starting Kafka, InfluxDB and the collector ...")
        pipeline = stack.enter_context(ResultsPipeline(workdir / "pipeline"))
        print(f"  Kafka {pipeline.kafka.bootstrap}, InfluxDB {pipeline.influx.url}")

        topology = Topology.load("default").model_copy(update={"period_s": period_s})
        lab = Lab(topology, prefix, base_port, pipeline.node_manager_settings, tls=True)
        print(f"building the lab (namespaces {prefix}-*), one node manager per router (mTLS) ...")
        stack.callback(_down, lab)
        lab.up()

        controller = ControllerProcess(
            workdir / "controller",
            {
                "influx_url": pipeline.influx.url,
                "tls_ca": str(lab.pki.ca),
                "tls_cert": str(lab.pki.client_cert),
                "tls_key": str(lab.pki.client_key),
                "resync_s": "5",
            },
        )
        stack.enter_context(controller)
        print(f"controller: {controller.url} (API docs: {controller.url}/docs)")
        api = fleet.Api(controller.url, controller.token)
        stack.callback(api.close)
        cli = Cli(controller.url, controller.token)

        print("registering nodes, SIDs and policies, creating sessions (REST API only) ...")
        fleet.register(api, lab)
        fleet.add_sessions(api, SESSIONS, delay_interval_ms=200)
        fleet.wait_applied(api)
        cli("sessions", "list")

        stack.enter_context(lab.receive_udp("h1", idle=3600))
        stack.enter_context(lab.receive_udp("h2", idle=3600))
        first = int(time.time() // period_s) + 1
        loss_block, delay_block = first + 1, first + 2
        print(
            f"traffic in blocks {first}..{first + blocks - 1}: block {loss_block} loses "
            f"{FORWARD_DROPS} packets on r2 -> r3 and {REVERSE_DROPS} on r2 -> r1, block "
            f"{delay_block} is delayed {DELAY_MS} ms on r2 -> r3"
        )
        for block in range(first, first + blocks):
            # impairments last from just after a block begins to just before it ends
            time.sleep(max(0.0, block * period_s + 0.1 - time.time()))
            with contextlib.ExitStack() as impairments:
                if block == loss_block:
                    lab.drop("r2", "r3", FORWARD_DROPS, dst=FORWARD_SIDS[1])
                    lab.drop("r2", "r1", REVERSE_DROPS, dst=REVERSE_SIDS[1])
                    impairments.callback(lab.clear_drops, "r2")
                if block == delay_block:
                    impairments.enter_context(lab.delay("r2", "r3", DELAY_MS))
                lab.send_udp("h1", H2, 200, interval=0.001)
                lab.send_udp("h2", H1, 100, interval=0.001)
                time.sleep(max(0.0, (block + 1) * period_s - 0.1 - time.time()))
        print("the live table (srv6pm results watch), until the last block has reached InfluxDB:")
        cli("results", "watch", SESSIONS[0], "--count", str(int(2 * period_s) + 4))
        print(f"\nwhere block {loss_block}'s loss happened (srv6pm results hops):")
        cli("results", "hops", SESSIONS[0], "--block", str(loss_block))
        cli("results", "plot", SESSIONS[0], "--out", str(plot), "--since", "10m")
        print(f"plot of loss and delay per block: {plot}")
        print("tearing everything down ...")
    return 0


class Cli:
    """The operators' CLI, run as they run it (SRV6PM_URL and SRV6PM_TOKEN set)."""

    def __init__(self, url: str, token: str) -> None:
        self._env = {**os.environ, "SRV6PM_URL": url, "SRV6PM_TOKEN": token}

    def __call__(self, *args: str) -> None:
        subprocess.run([sys.executable, "-m", "srv6pm.cli", *args], env=self._env, check=True)


def _down(lab: Lab) -> None:
    for problem in lab.down():
        print(f"warning: {problem}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="srv6pm-demo", description=__doc__)
    parser.add_argument("--period", type=float, default=4.0, help="marking period T, seconds")
    parser.add_argument("--prefix", default="srv6pm-demo", help="namespace prefix")
    parser.add_argument("--base-port", type=int, default=None, help="first gRPC port")
    parser.add_argument("--blocks", type=int, default=4, help="blocks of traffic to send")
    parser.add_argument(
        "--plot", type=Path, default=Path("srv6pm-demo.png"), help="where the PNG plot goes"
    )
    args = parser.parse_args(argv)
    try:
        return run(args.period, args.prefix, args.base_port, args.blocks, args.plot.resolve())
    except KeyboardInterrupt:
        print("interrupted: everything was torn down", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
