"""/v1/sessions/{name}/threshold-events and /v1/policies/{name}/threshold-events: the delay
threshold crossings of each probed segment list (from the `threshold` points): each metric's last
report, and the events in a time range. Not /threshold: that is the session's objective."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...service.fleet import POLICY, SESSION
from ...service.results import Scope
from .. import schemas
from ..deps import Reader, Svc
from .results import End, SegmentList, Start, window

router = APIRouter(tags=["threshold events"])
Events = Annotated[int, Query(ge=1, le=10_000, description="events per page")]
Metric = Annotated[schemas.ThresholdMetric | None, Query(description="only this metric")]


def _events(
    svc: Svc, scope: Scope, start: int | None, end: int | None, limit: int, metric: str | None
) -> dict[str, Any]:
    span = window(start, end, limit, -1)
    events, next_start = svc.threshold_events.events(scope, span, metric)
    return {
        "latest": svc.threshold_events.latest(scope, metric),
        "events": events,
        "next_start": next_start,
    }


@router.get("/v1/sessions/{name}/threshold-events", response_model=schemas.SessionThresholdEvents)
def session_threshold_events(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Events = 1000,
    segment_list: SegmentList = None,
    metric: Metric = None,
) -> schemas.SessionThresholdEvents:
    """Each metric's last report per segment list the session probes, and the crossings in the
    range."""
    svc.fleet.get(SESSION, name)
    found = _events(svc, Scope("session", name, segment_list), start, end, limit, metric)
    return schemas.SessionThresholdEvents.model_validate({"session": name, **found})


@router.get("/v1/policies/{name}/threshold-events", response_model=schemas.PolicyThresholdEvents)
def policy_threshold_events(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Events = 1000,
    segment_list: SegmentList = None,
    metric: Metric = None,
) -> schemas.PolicyThresholdEvents:
    """Each metric's last report per segment list of the policy (and session probing it), and
    the crossings in the range."""
    svc.fleet.get(POLICY, name)
    found = _events(svc, Scope("policy", name, segment_list), start, end, limit, metric)
    return schemas.PolicyThresholdEvents.model_validate({"policy": name, **found})
