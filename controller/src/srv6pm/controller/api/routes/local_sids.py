"""/v1/local-sids: SIDs instantiated on nodes (what a policy's SID list goes through)."""

from __future__ import annotations

from ipaddress import IPv6Address
from typing import Annotated

from fastapi import APIRouter, Query, Response

from ...domain.model import LocalSid
from ...service.fleet import LOCAL_SID
from .. import schemas, views
from ..deps import Admin, Reader, Svc

router = APIRouter(prefix="/v1/local-sids", tags=["local SIDs"])


def _domain(body: schemas.LocalSidIn) -> LocalSid:
    return LocalSid(
        sid=str(body.sid),
        node=body.node,
        behaviour=body.behaviour,
        nexthop=str(body.nexthop) if body.nexthop else "",
        lookup_table=body.lookup_table,
        device=body.device,
        table=body.table,
    )


def _body(s: LocalSid) -> dict[str, object]:
    return {**s.__dict__, "nexthop": s.nexthop or None}


@router.post("", status_code=201, response_model=schemas.LocalSidOut)
def create_local_sid(body: schemas.LocalSidIn, svc: Svc, who: Admin) -> schemas.LocalSidOut:
    sid, revision = svc.fleet.create(LOCAL_SID, _domain(body), who.name)
    return views.local_sid(sid, revision, svc.fleet.node_status())


@router.get("", response_model=schemas.LocalSidList)
def list_local_sids(
    svc: Svc,
    _: Reader,
    node: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.LocalSidList:
    found, total = svc.fleet.page(LOCAL_SID, {"node": node} if node else {}, limit, offset)
    held = svc.fleet.node_status()
    items = [views.local_sid(s, r, held) for s, r in found]
    return schemas.LocalSidList(items=items, total=total, limit=limit, offset=offset)


@router.get("/{sid}", response_model=schemas.LocalSidOut)
def get_local_sid(sid: IPv6Address, svc: Svc, _: Reader) -> schemas.LocalSidOut:
    found, revision = svc.fleet.get(LOCAL_SID, str(sid))
    return views.local_sid(found, revision, svc.fleet.node_status())


@router.patch("/{sid}", response_model=schemas.LocalSidOut)
def update_local_sid(
    sid: IPv6Address, body: schemas.LocalSidPatch, svc: Svc, who: Admin
) -> schemas.LocalSidOut:
    held, _ = svc.fleet.get(LOCAL_SID, str(sid))
    merged = schemas.LocalSidIn.model_validate(  # the behaviour/nexthop rules, on the result
        {**_body(held), **body.model_dump(exclude_unset=True)}
    )
    fields = _domain(merged).__dict__
    found, revision = svc.fleet.update(LOCAL_SID, str(sid), fields, who.name)
    return views.local_sid(found, revision, svc.fleet.node_status())


@router.delete("/{sid}", status_code=204)
def delete_local_sid(sid: IPv6Address, svc: Svc, who: Admin) -> Response:
    svc.fleet.delete(LOCAL_SID, str(sid), who.name)
    return Response(status_code=204)
