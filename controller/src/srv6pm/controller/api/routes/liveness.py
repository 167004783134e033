"""/v1/sessions/{name}/liveness and /v1/policies/{name}/liveness: the state of each probed
segment list now, and its changes in a time range (from the `liveness` points)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...service.fleet import POLICY, SESSION
from ...service.results import Scope
from .. import schemas
from ..deps import Reader, Svc
from .results import End, SegmentList, Start, window

router = APIRouter(tags=["liveness"])
Changes = Annotated[int, Query(ge=1, le=10_000, description="changes per page")]


def _liveness(
    svc: Svc, scope: Scope, start: int | None, end: int | None, limit: int
) -> dict[str, Any]:
    span = window(start, end, limit, -1)
    changes, next_start = svc.liveness.changes(scope, span)
    return {
        "current": svc.liveness.current(scope),
        "changes": changes,
        "next_start": next_start,
    }


@router.get("/v1/sessions/{name}/liveness", response_model=schemas.SessionLiveness)
def session_liveness(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Changes = 1000,
    segment_list: SegmentList = None,
) -> schemas.SessionLiveness:
    """Up or down now, per segment list the session probes, and the changes in the range."""
    svc.fleet.get(SESSION, name)
    found = _liveness(svc, Scope("session", name, segment_list), start, end, limit)
    return schemas.SessionLiveness.model_validate({"session": name, **found})


@router.get("/v1/policies/{name}/liveness", response_model=schemas.PolicyLiveness)
def policy_liveness(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Changes = 1000,
    segment_list: SegmentList = None,
) -> schemas.PolicyLiveness:
    """Up or down now, per segment list of the policy (and session probing it), and the
    changes in the range."""
    svc.fleet.get(POLICY, name)
    found = _liveness(svc, Scope("policy", name, segment_list), start, end, limit)
    return schemas.PolicyLiveness.model_validate({"policy": name, **found})
