"""The FastAPI application: routes, problem details, docs served without a CDN, health, metrics."""

from __future__ import annotations

from fastapi import FastAPI, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .. import __doc__ as about
from . import problems
from .deps import Services
from .routes import admin, local_sids, nodes, policies, results, sessions, thresholds


def create_app(services: Services, registry: CollectorRegistry | None = None) -> FastAPI:
    app = FastAPIOffline(
        title="srv6pm controller",
        version="1",
        description=about or "",
        responses={
            401: {"description": "no or unknown token (problem details)"},
            403: {"description": "read-only token (problem details)"},
            422: {"description": "invalid request (problem details)"},
        },
    )
    app.state.services = services
    problems.install(app)
    for module in (nodes, local_sids, policies, sessions, results, thresholds, admin):
        app.include_router(module.router)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        body = generate_latest(registry) if registry else b""
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return app
