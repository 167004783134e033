"""/v1/sessions: monitoring sessions (a policy's segment lists, or one of them, its return policy,
STAMP between their ends with a Session-Sender per segment list)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ...domain.model import Fleet, Session
from ...service.fleet import SESSION
from .. import measurement, schemas, views
from ..deps import Admin, Reader, Services, Svc

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


def _domain(body: schemas.SessionIn, default_key: bytes) -> Session:
    return Session(
        name=body.name,
        policy=body.policy,
        return_policy=body.return_policy,
        segment_list=body.segment_list or "",
        return_segment_list=body.return_segment_list or "",
        profile=body.profile or "",
        hmac_key=default_key if body.hmac_key is None else bytes.fromhex(body.hmac_key),
        **measurement.given(body),
    )


# null clears these: back to every segment list, the first, no profile, the profile's settings
_CLEARED: dict[str, Any] = {
    "segment_list": "",
    "return_segment_list": "",
    "profile": "",
    **dict.fromkeys(measurement.SETTINGS),
}


def _changes(patch: schemas.SessionPatch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in patch.model_fields_set:
        value = getattr(patch, name)
        if value is None:
            if name in _CLEARED:
                out[name] = _CLEARED[name]
            continue
        if name == "hmac_key":
            value = bytes.fromhex(value)
        elif name in measurement.SETTINGS:
            value = measurement.value(name, value)
        out[name] = value
    return out


def _around(svc: Services, sessions: list[Session]) -> Fleet:
    return svc.fleet.around(p for s in sessions for p in (s.policy, s.return_policy))


@router.post("", status_code=201, response_model=schemas.SessionOut)
def create_session(body: schemas.SessionIn, svc: Svc, who: Admin) -> schemas.SessionOut:
    session, revision = svc.fleet.create(SESSION, _domain(body, svc.default_stamp_key), who.name)
    return views.session(session, revision, _around(svc, [session]), svc.fleet.node_status())


@router.get("", response_model=schemas.SessionList)
def list_sessions(
    svc: Svc,
    _: Reader,
    policy: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.SessionList:
    found, total = svc.fleet.page(SESSION, {"policy": policy} if policy else {}, limit, offset)
    fleet, held = _around(svc, [s for s, _ in found]), svc.fleet.node_status()
    items = [views.session(s, r, fleet, held) for s, r in found]
    return schemas.SessionList(items=items, total=total, limit=limit, offset=offset)


@router.get("/{name}", response_model=schemas.SessionOut)
def get_session(name: str, svc: Svc, _: Reader) -> schemas.SessionOut:
    session, revision = svc.fleet.get(SESSION, name)
    return views.session(session, revision, _around(svc, [session]), svc.fleet.node_status())


@router.patch("/{name}", response_model=schemas.SessionOut)
def update_session(
    name: str, body: schemas.SessionPatch, svc: Svc, who: Admin
) -> schemas.SessionOut:
    session, revision = svc.fleet.update(SESSION, name, _changes(body), who.name)
    return views.session(session, revision, _around(svc, [session]), svc.fleet.node_status())


@router.delete("/{name}", status_code=204)
def delete_session(name: str, svc: Svc, who: Admin) -> Response:
    svc.fleet.delete(SESSION, name, who.name)
    return Response(status_code=204)
