"""The FastAPI application: routes, problem details, docs served without a CDN, health, metrics."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .. import __doc__ as about
from . import problems
from .deps import Services
from .routes import (
    admin,
    liveness,
    local_sids,
    nodes,
    policies,
    policy_results,
    profiles,
    results,
    sessions,
    threshold_events,
    thresholds,
)

Responses = dict[int | str, dict[str, Any]]
_NOT_FOUND: Responses = {404: {"description": "no such object (problem details)"}}
_CONFLICT: Responses = {409: {"description": "clashes with what exists (problem details)"}}
_UNAVAILABLE: Responses = {503: {"description": "InfluxDB could not answer (problem details)"}}
_EXHAUSTED: Responses = {507: {"description": "no identifier left to allocate (problem details)"}}
# The problems each group of routes may answer besides 400, 401, 403 and 422 (api/problems.py)
ERRORS: dict[str, Responses] = {
    nodes.__name__: {**_NOT_FOUND, **_CONFLICT},
    local_sids.__name__: {**_NOT_FOUND, **_CONFLICT},
    policies.__name__: {**_NOT_FOUND, **_CONFLICT, **_EXHAUSTED},
    profiles.__name__: {**_NOT_FOUND, **_CONFLICT},
    sessions.__name__: {**_NOT_FOUND, **_CONFLICT, **_EXHAUSTED},
    results.__name__: {**_NOT_FOUND, **_UNAVAILABLE},
    policy_results.__name__: {**_NOT_FOUND, **_UNAVAILABLE},
    liveness.__name__: {**_NOT_FOUND, **_UNAVAILABLE},
    threshold_events.__name__: {**_NOT_FOUND, **_UNAVAILABLE},
    thresholds.__name__: _NOT_FOUND,
    admin.__name__: {**_NOT_FOUND, **_CONFLICT},
}


def create_app(services: Services, registry: CollectorRegistry | None = None) -> FastAPI:
    app = FastAPIOffline(
        title="srv6pm controller",
        version="1",
        description=about or "",
        responses={
            400: {"description": "a body that is not JSON (problem details)"},
            401: {"description": "no or unknown token (problem details)"},
            403: {"description": "read-only token (problem details)"},
            422: {"description": "invalid request (problem details)"},
        },
    )
    app.state.services = services
    problems.install(app)
    routes = (nodes, local_sids, policies, profiles, sessions, results, policy_results, liveness)
    for module in (*routes, threshold_events, thresholds, admin):
        app.include_router(module.router, responses=ERRORS[module.__name__])

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        body = generate_latest(registry) if registry else b""
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return app
