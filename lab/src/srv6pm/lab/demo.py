"""`make demo`: the product on one machine, driven as an operator drives it.

Starts Kafka, InfluxDB and the collector, builds the diamond h1 - r1 - (r2 | r3) - r4 - h2 in
network namespaces, r2 a VPP router and the others Linux ones, with one node manager per router
(mutual TLS only), and the controller. Then,
through the controller's REST API only: registers the routers as nodes, their SIDs, three SR
policies between the same two routers r1 and r4 (via-r2, via-r3, and `hashed`, whose flows are
hashed over two segment lists, one through each, with protection) and the way back, a
measurement profile (a probe every 100 ms, liveness, delay histogram bins) and a session per
policy. It sends traffic while r3 -> r4 is 20 ms slower, drops a known number of via-r2's packets
on r2 -> r4 in one block and cuts r3 -> r4 for a second in another, and shows with the `srv6pm`
CLI: each policy's delay apart (the same two routers, different paths), the loss localised to
the segment it was injected on, the policy over its segment lists, the liveness events of the
cut, and a PNG plot. Everything is torn down on exit or Ctrl-C.
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

from . import diamond, drops, fleet
from .diamond import HASHED_ADDRESS, VIA_R2, VIA_R2_ADDRESS, VIA_R3_ADDRESS
from .lab import Lab
from .pipeline import ResultsPipeline
from .servers import ControllerProcess
from .topology import Topology

TOPOLOGY = "diamond-vpp"  # r2 is a VPP router: the demo measures Linux and VPP nodes alike
DROPS = 5
DELAY_MS = 20
CUT_S = 1.0
FLOWS = 8  # UDP flows to the hashed policy (hashed by their ports over its segment lists)


def run(period_s: float, prefix: str, base_port: int | None, blocks: int, plot: Path) -> int:
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="srv6pm-demo-")))
        print("starting Kafka, InfluxDB and the collector ...")
        pipeline = stack.enter_context(ResultsPipeline(workdir / "pipeline"))
        print(f"  Kafka {pipeline.kafka.bootstrap}, InfluxDB {pipeline.influx.url}")

        topology = Topology.load(TOPOLOGY).model_copy(update={"period_s": period_s})
        lab = Lab(topology, prefix, base_port, pipeline.node_manager_settings, tls=True)
        print(f"building the lab (namespaces {prefix}-*), one node manager per router (mTLS) ...")
        stack.callback(_down, lab)
        lab.up()
        diamond.host_addresses(lab)
        lab.network.sysctl("r1", {"net.ipv6.fib_multipath_hash_policy": 1})

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

        print("registering nodes, SIDs, policies, a profile and sessions (REST API only) ...")
        diamond.register(api, lab)
        diamond.add_sessions(api)
        fleet.wait_applied(api)
        cli("nodes", "list")  # r2 is a VPP router: the same API, the same results
        cli("policies", "list")
        cli("sessions", "list")

        stack.enter_context(lab.receive_udp("h1", idle=3600))
        stack.enter_context(lab.receive_udp("h2", idle=3600))
        first = int(time.time() // period_s) + 1
        loss_block, cut_block = first + 1, first + 2
        print(
            f"traffic in blocks {first}..{first + blocks - 1} with r3 -> r4 {DELAY_MS} ms slower: "
            f"block {loss_block} loses {DROPS} of via-r2's packets on r2 -> r4, block "
            f"{cut_block} has r3 -> r4 cut for {CUT_S:.0f} s"
        )
        with lab.delay("r3", "r4", DELAY_MS):
            for block in range(first, first + blocks):
                _traffic(lab, block, period_s, loss_block, cut_block)
        print("the live table of via-r2 (srv6pm results watch), until its last block is in:")
        cli("results", "watch", "via-r2", "--count", str(int(2 * period_s) + 4))
        print("\nthe same two routers, two paths: delay per block of each policy")
        for policy in ("via-r2", "via-r3"):
            cli("results", "delay", policy)
        print(f"\nwhere block {loss_block}'s loss happened (srv6pm results hops):")
        cli("results", "hops", "via-r2", "--block", str(loss_block))
        print("\nthe hashed policy, per segment list and in all (srv6pm results policy):")
        cli("results", "policy", "hashed")
        print(f"\nliveness: the cut in block {cut_block} (srv6pm liveness policy):")
        for policy in ("via-r3", "hashed"):
            cli("liveness", "policy", policy, "--since", "10m")
        cli("results", "plot", "via-r3", "--out", str(plot), "--since", "10m")
        print(f"plot of loss and delay per block: {plot}")
        print("tearing everything down ...")
    return 0


def _traffic(lab: Lab, block: int, period_s: float, loss_block: int, cut_block: int) -> None:
    """One block's traffic to every policy, and its impairment, from just after the block
    begins to just before it ends."""
    time.sleep(max(0.0, block * period_s + 0.1 - time.time()))
    if block == loss_block:
        lab.drop("r2", "r4", DROPS, dst=VIA_R2.segments[-1])
    if block == cut_block:
        lab.drop("r3", "r4", drops.MAX_COUNT)
    for address in (VIA_R2_ADDRESS, VIA_R3_ADDRESS):
        lab.send_udp("h1", address, 100, interval=0.001)
    for _ in range(FLOWS):
        lab.send_udp("h1", HASHED_ADDRESS, 25, interval=0.001)
    if block == cut_block:
        time.sleep(max(0.0, block * period_s + 0.1 + CUT_S - time.time()))
    lab.clear_drops("r2")
    lab.clear_drops("r3")
    time.sleep(max(0.0, (block + 1) * period_s - 0.1 - time.time()))


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
