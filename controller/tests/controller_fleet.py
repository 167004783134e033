"""The lab-like fleet the controller's tests describe (r1 - r2 - r3, policies to-h2 and to-h1), a
small client of the REST API over FastAPI's TestClient with one token, and what the fixtures
share (conftest.py is not imported by tests: other folders have one of the same name)."""

from __future__ import annotations

import socket
import warnings
from typing import Any

import httpx

with warnings.catch_warnings():
    # starlette's test client asks for httpx2, which nothing here installs; httpx still works
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

PROBE = {"r1": "fcf0:12::1", "r2": "fcf0:12::2", "r3": "fcf0:23::3"}
BOUNDARY = {"r1": ["eth-h1"], "r3": ["eth-h2"]}
NODES = tuple(
    {
        "name": name,
        "endpoint": f"127.0.0.1:{50051 + i}",
        "probe_address": PROBE[name],
        "boundary_interfaces": BOUNDARY.get(name, []),
    }
    for i, name in enumerate(("r1", "r2", "r3"))
)
SIDS = (
    {"sid": "fc00:0:1::d6", "node": "r1", "behaviour": "End.DT6"},
    {"sid": "fc00:0:2::e", "node": "r2", "behaviour": "End"},
    {"sid": "fc00:0:3::d6", "node": "r3", "behaviour": "End.DT6"},
)
FORWARD_SIDS = ["fc00:0:2::e", "fc00:0:3::d6"]
REVERSE_SIDS = ["fc00:0:2::e", "fc00:0:1::d6"]
TO_H2 = {
    "name": "to-h2",
    "head_node": "r1",
    "tail_node": "r3",
    "segments": FORWARD_SIDS,
    "prefix": "fd00:2::/64",
}
TO_H1 = {
    "name": "to-h1",
    "head_node": "r3",
    "tail_node": "r1",
    "segments": REVERSE_SIDS,
    "prefix": "fd00:1::/64",
}
POLICIES = (TO_H2, TO_H1)
S1 = {"name": "s1", "policy": "to-h2", "return_policy": "to-h1"}
S2 = {"name": "s2", "policy": "to-h1", "return_policy": "to-h2"}
# the settings beyond probe interval, liveness and histogram that a session or profile has
# unless given: one probe per burst, per block only, no delay thresholds, loss measured
NO_THRESHOLDS = {
    "percent": 0.0,
    "absolute_us": 0,
    "check_each_burst": False,
    "min_report_interval_ms": 0,
    "metrics": [],
}
DEFAULT_SETTINGS = {
    "burst_size": 1,
    "computation_interval_ms": 0,
    "thresholds": NO_THRESHOLDS,
    "loss": True,
}
INFLUX_DATABASE = "srv6pm"
NODE_INFO = {"driver": "linux", "version": "x", "period_ns": 2_000_000_000, "interfaces": ["eth0"]}


def closed_port() -> int:
    """A port nothing listens on (checked, not reserved)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Api:
    """Requests with one token (or none); the reply as it is, for its status and headers."""

    def __init__(self, client: TestClient, token: str | None) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, path, headers=self.headers, **kwargs)

    def get(self, path: str, **params: Any) -> httpx.Response:
        # a query in `path` stays (httpx would replace it with even an empty `params`)
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.request("POST", path, json=body)

    def put(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.request("PUT", path, json=body)

    def patch(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.request("PATCH", path, json=body)

    def delete(self, path: str) -> httpx.Response:
        return self.request("DELETE", path)

    def ok(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON of a 2xx reply (fails the test with the problem otherwise)."""
        reply = self.request(method, path, json=body)
        assert reply.is_success, f"{method} {path}: {reply.status_code} {reply.text}"
        return reply.json() if reply.content else None

    def create(self, collection: str, body: dict[str, Any]) -> Any:
        reply = self.post(f"/v1/{collection}", body)
        assert reply.status_code == 201, f"POST /v1/{collection}: {reply.status_code} {reply.text}"
        return reply.json()


def add_lab(api: Api, sessions: tuple[dict[str, Any], ...] = ()) -> None:
    """Nodes r1, r2, r3, their SIDs, policies to-h2 and to-h1, and the given sessions."""
    for node in NODES:
        api.create("nodes", node)
    for sid in SIDS:
        api.create("local-sids", sid)
    for policy in POLICIES:
        api.create("policies", policy)
    for session in sessions:
        api.create("sessions", session)


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    """The RFC 9457 problem details of an error reply, checked for their shape."""
    assert reply.status_code == status, f"{reply.status_code} {reply.text[:1000]}"
    assert reply.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = reply.json()
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    return body


def fields(body: dict[str, Any]) -> set[str]:
    """The fields a 422 problem names."""
    return {e["field"] for e in body["errors"]}
