"""The default lab described to the controller through its REST API only: the routers as nodes,
their SIDs, the SR policies h1 <-> h2 over r1 - r2 - r3 and monitoring sessions on them. The
demo and the controller tests drive the product this way, as an operator would."""

from __future__ import annotations

import time
from typing import Any

import httpx

from .lab import Lab
from .scenario import FORWARD_SIDS, H1, H2, REVERSE_SIDS

# STAMP addresses: each router's address on its link toward r2 (r2's toward r1)
PROBE_ADDRESSES = {"r1": "fcf0:12::1", "r2": "fcf0:12::2", "r3": "fcf0:23::3"}
HOST_OF = {"r1": "h1", "r3": "h2"}  # the interfaces toward hosts are the domain's boundary
SIDS = (
    {"sid": "fc00:0:1::d6", "node": "r1", "behaviour": "End.DT6"},
    {"sid": "fc00:0:2::e", "node": "r2", "behaviour": "End"},
    {"sid": "fc00:0:3::d6", "node": "r3", "behaviour": "End.DT6"},
)
TO_H2, TO_H1 = "to-h2", "to-h1"
POLICIES = (
    {
        "name": TO_H2,
        "head_node": "r1",
        "tail_node": "r3",
        "segments": list(FORWARD_SIDS),
        "prefix": H2.rsplit(":", 1)[0] + ":/64",
    },
    {
        "name": TO_H1,
        "head_node": "r3",
        "tail_node": "r1",
        "segments": list(REVERSE_SIDS),
        "prefix": H1.rsplit(":", 1)[0] + ":/64",
    },
)
# Measured from each end: h1-h2's sender is r1, h2-h1's is r3.
SESSIONS = {
    "h1-h2": {"policy": TO_H2, "return_policy": TO_H1},
    "h2-h1": {"policy": TO_H1, "return_policy": TO_H2},
}


class ApiError(RuntimeError):
    """The controller answered with a problem; the message is its title and detail."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(f"{status} {problem.get('title')}: {problem.get('detail')}")
        self.status = status
        self.problem = problem


class Api:
    """A small REST client of the controller (the CLI is the operators' one)."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        reply = self.http.request(method, path, **kwargs)
        if reply.status_code >= 400:
            raise ApiError(reply.status_code, reply.json())
        return reply.json() if reply.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("POST", path, json=body)

    def close(self) -> None:
        self.http.close()


def register(api: Api, lab: Lab) -> None:
    """The lab's routers as nodes, with their SIDs and the two policies."""
    register_nodes(api, lab, PROBE_ADDRESSES, HOST_OF)
    for sid in SIDS:
        api.post("/v1/local-sids", sid)
    for policy in POLICIES:
        api.post("/v1/policies", policy)


def register_nodes(
    api: Api, lab: Lab, probe_addresses: dict[str, str], host_of: dict[str, str]
) -> None:
    """The lab's routers as nodes: their STAMP address, and the interfaces toward hosts as the
    domain's boundary."""
    for router in lab.topology.routers:
        host = host_of.get(router)
        api.post(
            "/v1/nodes",
            {
                "name": router,
                "endpoint": lab.grpc_address(router),
                "probe_address": probe_addresses[router],
                "boundary_interfaces": [lab.interface(router, host)] if host else [],
            },
        )


def add_sessions(api: Api, names: tuple[str, ...] = ("h1-h2",), **settings: Any) -> None:
    for name in names:
        api.post("/v1/sessions", {"name": name, **SESSIONS[name], **settings})


def wait_applied(api: Api, timeout: float = 60.0) -> None:
    """Until every node, policy and session is applied; raises with what is not."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = [
            f"{kind} {item.get('name', item.get('sid'))}: {item['status']['state']} "
            f"{item['status']['message']}".strip()
            for kind in ("nodes", "local-sids", "policies", "sessions")
            for item in api.get(f"/v1/{kind}", limit=1000)["items"]
            if item["status"]["state"] != "applied"
        ]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("not applied: " + "; ".join(waiting))
        time.sleep(0.2)


def session_loss(api: Api, session: str, block: int, timeout: float = 30.0) -> dict[str, Any]:
    """The session's loss record of `block` as the REST API serves it, once both directions are
    in (waits for it)."""
    deadline = time.monotonic() + timeout
    while True:
        page = api.get(f"/v1/sessions/{session}/loss", after_block=block - 1, limit=1)
        items = page["items"]
        if items and items[0]["block"] == block and items[0]["forward"] and items[0]["reverse"]:
            return dict(items[0])
        if time.monotonic() > deadline:
            raise TimeoutError(f"no loss of block {block} for {session}: {page}")
        time.sleep(0.5)


def session_hops(
    api: Api, session: str, block: int, timeout: float = 30.0
) -> dict[str, dict[str, Any]]:
    """The session's per-hop counts of `block` by direction, once every node's count is in."""
    deadline = time.monotonic() + timeout
    while True:
        found = api.get(f"/v1/sessions/{session}/hops", block=block)
        directions = {d["direction"]: d for d in found["directions"]}
        if all(c["packets"] is not None for d in directions.values() for c in d["counts"]):
            return directions
        if time.monotonic() > deadline:
            raise TimeoutError(f"hops of block {block} incomplete: {found}")
        time.sleep(0.5)
