"""`make demo`: a real SRv6 lab, monitored end to end through the node managers' gRPC API.

Builds h1 - r1 - r2 - r3 - h2 in network namespaces, programs the SR policies and per-flow
monitoring, sends traffic both ways for a few blocks, drops a known number of packets between r2
and r3 in one block, and prints what every router counted, block by block, with the loss per
segment, then what STAMP measured, then the same results as they reached InfluxDB (node journal
-> Kafka -> collector), then a TCP transfer counted segment by segment. Runs its own Kafka,
InfluxDB and collector (`make servers` installed them) and tears everything down at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from srv6pm.proto.v1 import node_manager_pb2 as pb

from . import scenario
from .lab import Lab
from .pipeline import ResultsPipeline
from .topology import Topology

ROUTERS = ("r1", "r2", "r3")


def _read(lab: Lab, block: int) -> dict[str, dict[str, int]]:
    """{flow: {router: packets}} for one block."""
    out: dict[str, dict[str, int]] = {}
    for router in ROUTERS:
        reply = scenario.stub(lab, router).ReadBlock(pb.ReadBlockRequest(block=block))
        for f in reply.flows:
            out.setdefault(f.flow, {})[router] = f.packets
    return out


def _report(block: int, counts: dict[str, dict[str, int]], dropped: int) -> None:
    path = {scenario.FORWARD: ("r1", "r2", "r3"), scenario.REVERSE: ("r3", "r2", "r1")}
    for flow, (ingress, transit, egress) in path.items():
        c = counts[flow]
        print(
            f"  block {block} {flow}: {ingress}={c[ingress]:>5} {transit}={c[transit]:>5} "
            f"{egress}={c[egress]:>5} | lost {ingress}->{transit}: {c[ingress] - c[transit]}, "
            f"{transit}->{egress}: {c[transit] - c[egress]}, end to end: "
            f"{c[ingress] - c[egress]}"
        )
    if dropped:
        print(f"  (injected in block {block}: {dropped} drops on r2 -> r3, 3 on r2 -> r1)")


def _report_stamp(lab: Lab, first: int, blocks: int) -> None:
    """What r1's STAMP session measured: loss per block both ways, delay per probe."""
    results = scenario.stub(lab, "r1").ReadResults(
        pb.ReadResultsRequest(session=scenario.SESSION, since_block=first)
    )
    print(f"STAMP session {scenario.SESSION} (r1 -> r3, replies on the return SID list):")
    for r in sorted(results.loss, key=lambda r: r.block):
        if r.block >= first + blocks:
            continue
        if not r.valid:
            print(f"  block {r.block}: invalid ({r.reason})")
            continue
        print(
            f"  block {r.block}: forward tx {r.forward.tx} rx {r.forward.rx} lost "
            f"{r.forward.lost} | reverse tx {r.reverse.tx} rx {r.reverse.rx} lost "
            f"{r.reverse.lost}"
        )
    delays = sorted(d.two_way_ns / 1e3 for d in results.probes)
    if delays:
        print(
            f"  two-way delay over {len(delays)} probes: median {delays[len(delays) // 2]:.0f} "
            f"us, min {delays[0]:.0f} us, max {delays[-1]:.0f} us"
        )
    print("  (each block also carries the previous block's probe and its reply)")


def _report_influxdb(pipeline: ResultsPipeline, first: int, blocks: int) -> None:
    """The same blocks as InfluxDB holds them, once the collector has written the last one."""
    where = f"block >= {first} AND block < {first + blocks}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        loss = pipeline.query(
            f"SELECT block, tx, rx, lost, valid FROM loss WHERE {where} GROUP BY direction"
        )
        if sum(len(s["values"]) for s in loss) >= 2 * blocks:
            break
        time.sleep(0.5)
    print(f"InfluxDB ({pipeline.influx.url}, database srv6pm), written by the collector:")
    for series in loss:
        direction = series["tags"]["direction"]
        for _, block, tx, rx, lost, valid in series["values"]:
            shown = f"tx {tx} rx {rx} lost {lost}" if valid else "invalid"
            print(f"  loss {direction:>7} block {block}: {shown}")
    flows = pipeline.query(
        f"SELECT block, packets FROM flow WHERE {where} AND flow = '{scenario.FORWARD}' "
        "GROUP BY node"
    )
    for series in flows:
        counts = ", ".join(f"{b}: {p}" for _, b, p in series["values"])
        print(f"  flow {scenario.FORWARD} counted by {series['tags']['node']}: {counts}")
    print(
        "  (Grafana: provision dashboards/provisioning and dashboards/generated; see "
        "dashboards/README.md)"
    )


def _tcp(lab: Lab, period_s: float, nbytes: int = 50 << 20) -> None:
    """A TCP bulk transfer with the hosts' offloads on: every router counts each segment."""
    scenario.apply(lab)  # no STAMP session now: its probes would be counted with the flows
    first = int(time.time() // period_s) + 1
    time.sleep(first * period_s + 0.1 - time.time())
    sent, received = lab.tcp_transfer("h1", "h2", scenario.H2, nbytes)
    last = int(time.time() // period_s)
    time.sleep(max(0.0, (last + 1) * period_s + period_s / 2 - time.time()))
    print(f"TCP h1 -> h2, {nbytes >> 20} MiB with offloads on (blocks {first}..{last}):")
    print(f"  h1's kernel sent {sent.segments} segments, h2's sent {received.segments}")
    for router in ROUTERS:
        totals = {scenario.FORWARD: 0, scenario.REVERSE: 0}
        for block in range(first, last + 1):
            for flow, packets in _read(lab, block).items():
                totals[flow] += packets.get(router, 0)
        print(
            f"  {router} counted {totals[scenario.FORWARD]} packets h1 -> h2, "
            f"{totals[scenario.REVERSE]} h2 -> h1"
        )


def run(period_s: float, prefix: str, base_port: int | None, blocks: int) -> int:
    with tempfile.TemporaryDirectory(prefix="srv6pm-demo-") as workdir:
        print("starting Kafka, InfluxDB and the collector ...")
        with ResultsPipeline(Path(workdir)) as pipeline:
            print(f"  Kafka {pipeline.kafka.bootstrap}, InfluxDB {pipeline.influx.url}")
            return _run_lab(pipeline, period_s, prefix, base_port, blocks)


def _run_lab(
    pipeline: ResultsPipeline, period_s: float, prefix: str, base_port: int | None, blocks: int
) -> int:
    topology = Topology.load("default").model_copy(update={"period_s": period_s})
    lab = Lab(topology, prefix, base_port, pipeline.node_manager_settings)
    print(f"building the lab (namespaces {prefix}-*), one node manager per router ...")
    lab.up()
    try:
        states = scenario.stamp_states(lab, delay_interval_ms=500)
        for router, reply in scenario.apply_states(lab, states).items():
            print(
                f"  {router}: policies +{reply.policies.added}, local SIDs "
                f"+{reply.local_sids.added}, monitored flows +{reply.flows.added}"
            )
        info = scenario.stub(lab, "r1").GetInfo(pb.GetInfoRequest())
        behaviours = ", ".join(
            pb.Behaviour.Name(b).removeprefix("BEHAVIOUR_") for b in info.behaviours
        )
        print(f"  r1 kernel supports: {behaviours}; T = {info.period_ns / 1e9:g} s")
        with lab.receive_udp("h1", idle=3600), lab.receive_udp("h2", idle=3600):
            first = int(time.time() // period_s) + 1
            time.sleep(first * period_s + 0.1 - time.time())
            injected = {}
            for i in range(blocks):
                block = first + i
                if i == 1:
                    injected[block] = lab.drop("r2", "r3", 5, dst=scenario.FORWARD_SIDS[1])
                    lab.drop("r2", "r1", 3, dst=scenario.REVERSE_SIDS[1])
                lab.send_udp("h1", scenario.H2, 200 + 50 * i, interval=0.001)
                lab.send_udp("h2", scenario.H1, 100 + 10 * i, interval=0.001)
                time.sleep(max(0.0, (block + 1) * period_s + 0.1 - time.time()))
                if block in injected:
                    lab.clear_drops("r2")
            print("waiting for the last block's safe read window (T/2 after it ends) ...")
            time.sleep(max(0.0, (first + blocks) * period_s + period_s / 2 - time.time()))
            print("packets counted per block (read through gRPC ReadBlock):")
            for i in range(blocks):
                block = first + i
                _report(block, _read(lab, block), 5 if block in injected else 0)
            time.sleep(max(0.0, (first + blocks + 1) * period_s + 0.5 - time.time()))
            _report_stamp(lab, first, blocks)
            _report_influxdb(pipeline, first, blocks)
            _tcp(lab, period_s)
    finally:
        print("tearing the lab down ...")
        lab.down()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="srv6pm-demo", description=__doc__)
    parser.add_argument("--period", type=float, default=4.0, help="marking period T, seconds")
    parser.add_argument("--prefix", default="srv6pm-demo", help="namespace prefix")
    parser.add_argument("--base-port", type=int, default=None, help="first gRPC port")
    parser.add_argument("--blocks", type=int, default=3, help="blocks of traffic to send")
    args = parser.parse_args(argv)
    return run(args.period, args.prefix, args.base_port, args.blocks)


if __name__ == "__main__":
    sys.exit(main())
