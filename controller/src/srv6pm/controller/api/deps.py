"""What every route gets: the services, and the caller's identity and scope (Bearer token)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..service.auth import AuthService, Principal
from ..service.delay_intervals import DelayIntervalService
from ..service.fleet import FleetService
from ..service.liveness import LivenessService
from ..service.reconciler import Reconciler
from ..service.results import ResultsService
from ..service.threshold_events import ThresholdEventService
from ..service.thresholds import ThresholdService


@dataclass
class Services:
    fleet: FleetService
    auth: AuthService
    results: ResultsService
    liveness: LivenessService
    thresholds: ThresholdService
    threshold_events: ThresholdEventService
    delay_intervals: DelayIntervalService
    reconciler: Reconciler | None
    default_stamp_key: bytes = b""  # sessions created without hmac_key get it


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


_bearer = HTTPBearer(auto_error=False, description="an API token (srv6pm-controller token)")


def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None:
        raise HTTPException(
            401,
            "an API token is needed: Authorization: Bearer <token>",
            {"WWW-Authenticate": "Bearer"},
        )
    principal = services(request).auth.authenticate(credentials.credentials)
    if principal is None:
        raise HTTPException(401, "unknown API token", {"WWW-Authenticate": "Bearer"})
    return principal


def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    if principal.scope != "admin":
        raise HTTPException(
            403, f"token {principal.name} is read-only: changes need an admin token"
        )
    return principal


Svc = Annotated[Services, Depends(services)]
Reader = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]
