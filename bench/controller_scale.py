#!/usr/bin/env python3
"""The controller at scale: a fleet of real node managers in network namespaces and a session
between every ordered pair of them.

Topology: a hub router and ``--spokes`` spoke routers, each spoke with a locator routed through
the hub, one node manager per router (mutual TLS). Each spoke has an End.DT6 SID; for every
ordered pair (A, B) of spokes a policy A -> B with the SID list [B's End.DT6] and a session
measuring it with the policy B -> A as its return: spokes * (spokes - 1) sessions and policies.

Phases, one controller process over one SQLite file:

1. stage: the controller runs with ``reconcile=false``; nodes, SIDs, policies and sessions are
   created through the REST API (one request each, one client): requests per second.
2. apply: the controller is restarted with reconciliation on, over an empty fleet of node
   managers; time until every session's status is ``applied`` (polled through the API).
3. restart: the controller is killed (-9) and started again; time until it has checked every
   node (every node's last_attempt after the restart) and every session is still ``applied``;
   the node managers' ApplyState counts before and after (nothing should be re-applied).
4. results: ``--blocks`` blocks of loss points for every session are written to a real InfluxDB;
   then ``--requests`` GETs of /v1/sessions/{random}/loss?limit=10 and of /hops: p50/p99.
Controller memory: its peak RSS (VmHWM) after each phase.

Needs root, ``make servers`` (InfluxDB). Run it with ``python3 -m bench.controller_scale`` or
``python3 bench/controller_scale.py`` (``--quick`` for a smoke run). Results go to
bench/results/controller-scale-<YYYYMMDD-HHMMSS>.json (the run id); method and figures:
docs/BENCHMARKS.md, "Controller at scale".
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # python3 bench/controller_scale.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import random
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from typing import TypedDict

import httpx
from srv6pm.lab import Lab, LabError, Topology
from srv6pm.lab.fleet import Api
from srv6pm.lab.servers import ControllerProcess, InfluxServer, free_ports

from bench.harness import provenance
from bench.harness.meters import rss_kib
from bench.harness.run import RESULTS, Run, execute, log
from bench.harness.stats import percentile

HUB = "hub"
BATCH = 10  # node managers started at once


class Stage(TypedDict):
    """Creating the fleet through the REST API."""

    objects: int
    seconds: float
    per_s: float


class RouteLatency(TypedDict):
    """Response times of one REST route."""

    requests: int
    p50_ms: float
    p99_ms: float
    max_ms: float


class ScaleResult(TypedDict):
    machine: provenance.Machine
    spokes: int
    sessions: int
    lab_up_s: float
    stage: Stage
    apply_from_start_s: float
    rss_after_apply_mb: float
    restart_reconciled_s: float
    restart_sessions_applied: str  # applied/total
    restart_reapplied_nodes: int
    rss_after_restart_mb: float
    influx_points: int
    loss_route: RouteLatency
    hops_route: RouteLatency
    rss_final_mb: float


def spoke(i: int) -> str:
    return f"s{i}"


def topology(spokes: int, period_s: float, base_port: int, name: str) -> Topology:
    routers: dict[str, dict[str, int | str]] = {HUB: {"grpc_port": base_port}}
    links: list[dict[str, dict[str, str]]] = []
    for i in range(1, spokes + 1):
        routers[spoke(i)] = {"grpc_port": base_port + i, "locator": f"fc00:{i:x}::/32"}
        links.append({"ends": {HUB: f"fcf0:0:{i:x}::1/64", spoke(i): f"fcf0:0:{i:x}::2/64"}})
    return Topology.model_validate(
        {"name": name, "period_s": period_s, "routers": routers, "links": links}
    )


def probe_address(i: int) -> str:
    return f"fcf0:0:{i:x}::2"


def sid(i: int) -> str:
    return f"fc00:{i:x}::d6"


def stage(api: Api, spokes: int, lab: Lab) -> Stage:
    created = 0
    started = time.perf_counter()
    for i in range(1, spokes + 1):
        name = spoke(i)
        api.post(
            "/v1/nodes",
            {
                "name": name,
                "endpoint": lab.grpc_address(name),
                "probe_address": probe_address(i),
                "core_interfaces": [lab.interface(name, HUB)],
            },
        )
        api.post("/v1/local-sids", {"sid": sid(i), "node": name, "behaviour": "End.DT6"})
        created += 2
    for a in range(1, spokes + 1):
        for b in range(1, spokes + 1):
            if a != b:
                api.post(
                    "/v1/policies",
                    {
                        "name": f"p{a}-{b}",
                        "head_node": spoke(a),
                        "tail_node": spoke(b),
                        "segments": [sid(b)],
                        "prefix": f"fd{a:02x}:{b:x}::/64",
                    },
                )
                created += 1
        log(f"  policies from {spoke(a)} created")
    for a in range(1, spokes + 1):
        for b in range(1, spokes + 1):
            if a != b:
                api.post(
                    "/v1/sessions",
                    {"name": f"m{a}-{b}", "policy": f"p{a}-{b}", "return_policy": f"p{b}-{a}"},
                )
                created += 1
        log(f"  sessions from {spoke(a)} created")
    seconds = time.perf_counter() - started
    return {"objects": created, "seconds": seconds, "per_s": created / seconds}


def sessions_applied(api: Api) -> tuple[int, int]:
    applied = total = 0
    offset = 0
    while True:
        page = api.get("/v1/sessions", limit=1000, offset=offset)
        total = page["total"]
        applied += sum(s["status"]["state"] == "applied" for s in page["items"])
        offset += len(page["items"])
        if offset >= total or not page["items"]:
            return applied, total


def wait_all_applied(api: Api, timeout: float) -> float:
    started = time.perf_counter()
    while True:
        applied, total = sessions_applied(api)
        if applied == total:
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{applied} of {total} sessions applied after {timeout} s")
        time.sleep(0.5)


def apply_counts(lab: Lab, routers: list[str]) -> dict[str, float]:
    counts = {}
    for router in routers:
        url = f"http://127.0.0.1:{lab.metrics_port(router)}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            lines = r.read().decode().splitlines()
        counts[router] = next(
            (float(x.split()[-1]) for x in lines if x.startswith("srv6pm_apply_seconds_count")),
            0.0,
        )
    return counts


def peak_rss_mb(pid: int) -> float:
    return rss_kib(pid, "VmHWM") / 1024


def fill_influx(influx: InfluxServer, spokes: int, blocks: int, period_ns: int) -> tuple[int, int]:
    """Loss and flow points of `blocks` blocks before now for every session; (points, the
    last block)."""
    now_block = time.time_ns() // period_ns
    points = 0
    client = httpx.Client(base_url=influx.url, timeout=60)
    for k in range(now_block - blocks, now_block):
        lines = []
        for a in range(1, spokes + 1):
            for b in range(1, spokes + 1):
                if a == b:
                    continue
                for direction in ("forward", "reverse"):
                    lines.append(
                        f"loss,session=m{a}-{b},policy=p{a}-{b},direction={direction},"
                        f"src_node=s{a},dst_node=s{b} block={k}i,tx=1000i,rx=999i,lost=1i,"
                        f'loss_ratio=0.001,valid=true,reason="" {k * period_ns}'
                    )
                for node, flow in ((f"s{a}", f"p{a}-{b}"), (f"s{b}", f"p{a}-{b}")):
                    role = "ingress" if node == f"s{a}" else "egress"
                    lines.append(
                        f"flow,node={node},flow={flow},role={role} block={k}i,packets=1000i,"
                        f'bytes=64000i,flow_mon_id=1i,valid=true,reason="" {k * period_ns}'
                    )
        reply = client.post(
            "/write", params={"db": "srv6pm", "precision": "ns"}, content="\n".join(lines)
        )
        reply.raise_for_status()
        points += len(lines)
    client.close()
    return points, now_block - 1


def latency(api: Api, spokes: int, requests: int, path: str, **params: int) -> RouteLatency:
    samples = []
    for _ in range(requests):
        a, b = random.sample(range(1, spokes + 1), 2)
        started = time.perf_counter()
        api.get(path.format(session=f"m{a}-{b}"), **params)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {
        "requests": requests,
        "p50_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 99, "lower"),
        "max_ms": samples[-1],
    }


def run(args: argparse.Namespace) -> ScaleResult:
    machine = provenance.machine()
    workdir = Path(tempfile.mkdtemp(prefix="srv6pm-bench-scale-"))
    base_port = free_ports(1)[0]
    lab = Lab(
        topology(args.spokes, args.period, base_port, args.prefix), prefix=args.prefix, tls=True
    )
    influx_port, rpc_port, http_port = free_ports(3)
    influx = InfluxServer(workdir / "influx", influx_port, rpc_port)
    controller: ControllerProcess | None = None
    try:
        log(f"lab: hub + {args.spokes} spokes, {args.spokes + 1} node managers ...")
        started = time.perf_counter()
        lab.up(start_node_managers=False)
        routers = list(lab.topology.routers)
        for i in range(0, len(routers), BATCH):  # 100 at once would miss their health deadline
            for router in routers[i : i + BATCH]:
                lab.start_node_manager(router, wait=False)
            for router in routers[i : i + BATCH]:
                lab.wait_serving(router, timeout=120)
        lab_up_s = time.perf_counter() - started
        log(f"  up in {lab_up_s:.1f} s")
        influx.start()
        influx.create_database("srv6pm")
        settings = {
            "influx_url": influx.url,
            "tls_ca": str(lab.pki.ca),
            "tls_cert": str(lab.pki.client_cert),
            "tls_key": str(lab.pki.client_key),
            "reconcile": "false",
        }
        controller = ControllerProcess(workdir / "controller", settings, http_port)
        controller.start()
        api = Api(controller.url, controller.token, timeout=120)
        log("stage: creating the fleet through the REST API ...")
        staged = stage(api, args.spokes, lab)
        log(f"  {staged}")
        controller.stop()

        controller.settings["reconcile"] = "true"
        controller.settings["resync_s"] = "30"
        log("apply: controller with reconciliation over empty node managers ...")
        started = time.perf_counter()
        controller.start()
        wait_all_applied(api, args.timeout)
        apply_from_start_s = time.perf_counter() - started
        rss_after_apply_mb = peak_rss_mb(controller.pid or 0)
        log(f"  applied in {apply_from_start_s:.1f} s")

        spokes = [spoke(i) for i in range(1, args.spokes + 1)]
        before = apply_counts(lab, spokes)
        log("restart: kill -9, start, wait for every node to be checked ...")
        controller.kill()
        restarted = time.time()
        started = time.perf_counter()
        controller.start()
        while True:
            nodes = api.get("/v1/nodes", limit=1000)["items"]
            checked = [
                n
                for n in nodes
                if n["last_attempt"]
                and datetime.fromisoformat(n["last_attempt"]).timestamp() > restarted - 1
            ]
            if len(checked) == len(nodes):
                break
            time.sleep(0.2)
        restart_reconciled_s = time.perf_counter() - started
        applied, total = sessions_applied(api)
        after = apply_counts(lab, spokes)
        restart_reapplied_nodes = sum(after[r] != before[r] for r in spokes)
        rss_after_restart_mb = peak_rss_mb(controller.pid or 0)
        log(f"  reconciled in {restart_reconciled_s:.1f} s, {applied}/{total} applied")

        log(f"results: {args.blocks} blocks of points for every session ...")
        influx_points, last = fill_influx(influx, args.spokes, args.blocks, int(args.period * 1e9))
        loss_route = latency(
            api, args.spokes, args.requests, "/v1/sessions/{session}/loss", limit=10
        )
        hops_route = latency(
            api, args.spokes, args.requests // 5, "/v1/sessions/{session}/hops", block=last
        )
        rss_final_mb = peak_rss_mb(controller.pid or 0)
        log(f"  loss route {loss_route}")
        api.close()
    finally:
        if controller:
            controller.stop()
        influx.stop()
        for problem in lab.down():
            log(f"warning: {problem}")
    return {
        "machine": machine,
        "spokes": args.spokes,
        "sessions": args.spokes * (args.spokes - 1),
        "lab_up_s": lab_up_s,
        "stage": staged,
        "apply_from_start_s": apply_from_start_s,
        "rss_after_apply_mb": rss_after_apply_mb,
        "restart_reconciled_s": restart_reconciled_s,
        "restart_sessions_applied": f"{applied}/{total}",
        "restart_reapplied_nodes": restart_reapplied_nodes,
        "rss_after_restart_mb": rss_after_restart_mb,
        "influx_points": influx_points,
        "loss_route": loss_route,
        "hops_route": hops_route,
        "rss_final_mb": rss_final_mb,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spokes", type=int, default=100)
    parser.add_argument("--period", type=float, default=10.0)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--prefix", default="bscale", help="lab namespaces (default: bscale)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (under a minute): 3 spokes, 4 s blocks, 3 blocks, 50 requests",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.spokes, args.period, args.blocks, args.requests = 3, 4.0, 3, 50

    this_run = Run("controller-scale", "bench/controller_scale.py")

    def report(_result: ScaleResult) -> None:
        print(json.dumps(this_run.document, indent=2, default=str))

    # the lab and servers are torn down on SIGINT and SIGTERM even in the background
    return execute(
        this_run,
        lambda _run: run(args),
        out=args.out,
        needs_root="namespaces",
        errors=(LabError, TimeoutError),
        report=report,
    )


if __name__ == "__main__":
    sys.exit(main())
