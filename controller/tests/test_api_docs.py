"""The OpenAPI document, Swagger UI and ReDoc: served by the controller itself, with no asset from
a CDN (operators' networks often have no way out), plus /healthz and /metrics."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


def test_the_openapi_document_describes_every_route_and_the_bearer_token(anonymous):
    reply = anonymous.get("/openapi.json")
    assert reply.status_code == 200
    document = reply.json()
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "srv6pm controller"
    paths = document["paths"]
    for path in (
        "/v1/nodes",
        "/v1/nodes/{name}",
        "/v1/local-sids/{sid}",
        "/v1/policies",
        "/v1/sessions/{name}",
        "/v1/sessions/{name}/loss",
        "/v1/sessions/{name}/hops",
        "/v1/sessions/{name}/threshold",
        "/v1/tokens",
        "/v1/audit",
    ):
        assert path in paths, path
    schemes = document["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]
    for operations in paths.values():
        for operation in operations.values():
            assert operation["security"] == [{name: []} for name in schemes]
            assert {"401", "403", "422"} <= set(operation["responses"])
    assert "/docs" not in paths
    assert "/healthz" not in paths


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_only_local_assets(anonymous, page):
    reply = anonymous.get(page)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/html")
    html = reply.text
    assert re.findall(r"https?://", html) == []
    assets = ASSET.findall(html)
    assert any(a.endswith(".js") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/"), asset
        served = anonymous.get(asset)
        assert served.status_code == 200, asset
        assert served.content
    assert "/openapi.json" in html


def test_the_static_scripts_are_served(anonymous):
    for name in ("swagger-ui-bundle.js", "redoc.standalone.js"):
        reply = anonymous.get(f"/static-offline-docs/{name}")
        assert reply.status_code == 200
        assert "javascript" in reply.headers["content-type"]
        assert len(reply.content) > 100_000


def test_health_and_metrics_need_no_token(anonymous):
    assert anonymous.get("/healthz").json() == {"status": "ok"}
    metrics = anonymous.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")


def test_unknown_paths_and_methods_are_problems(anonymous):
    reply = anonymous.get("/v2/nodes")
    assert reply.status_code == 404
    assert reply.headers["content-type"] == "application/problem+json"
    reply = anonymous.request("PUT", "/v1/nodes")
    assert reply.status_code == 405
    assert reply.json()["title"] == "Method Not Allowed"
