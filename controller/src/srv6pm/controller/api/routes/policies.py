"""/v1/policies: SR policies (a head-end steers a prefix into a SID list)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ...domain.model import Policy
from ...service.fleet import POLICY
from .. import schemas, views
from ..deps import Admin, Reader, Svc

router = APIRouter(prefix="/v1/policies", tags=["policies"])


def _domain(body: schemas.PolicyIn) -> Policy:
    return Policy(
        name=body.name,
        head_node=body.head_node,
        tail_node=body.tail_node,
        segments=tuple(str(s) for s in body.segments),
        prefix=str(body.prefix),
        encap_mode=body.encap_mode,
        device=body.device,
        table=body.table,
    )


def _changes(patch: schemas.PolicyPatch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in patch.model_fields_set:
        value = getattr(patch, name)
        if value is None:
            continue
        if name == "segments":
            value = tuple(str(s) for s in value)
        elif name == "prefix":
            value = str(value)
        out[name] = value
    return out


@router.post("", status_code=201, response_model=schemas.PolicyOut)
def create_policy(body: schemas.PolicyIn, svc: Svc, who: Admin) -> schemas.PolicyOut:
    policy, revision = svc.fleet.create(POLICY, _domain(body), who.name)
    return views.policy(policy, revision, svc.fleet.around([policy.name]), svc.fleet.node_status())


@router.get("", response_model=schemas.PolicyList)
def list_policies(
    svc: Svc,
    _: Reader,
    head_node: str | None = None,
    tail_node: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.PolicyList:
    filters = {k: v for k, v in (("head_node", head_node), ("tail_node", tail_node)) if v}
    found, total = svc.fleet.page(POLICY, filters, limit, offset)
    fleet, held = svc.fleet.around(p.name for p, _ in found), svc.fleet.node_status()
    items = [views.policy(p, r, fleet, held) for p, r in found]
    return schemas.PolicyList(items=items, total=total, limit=limit, offset=offset)


@router.get("/{name}", response_model=schemas.PolicyOut)
def get_policy(name: str, svc: Svc, _: Reader) -> schemas.PolicyOut:
    policy, revision = svc.fleet.get(POLICY, name)
    return views.policy(policy, revision, svc.fleet.around([policy.name]), svc.fleet.node_status())


@router.patch("/{name}", response_model=schemas.PolicyOut)
def update_policy(name: str, body: schemas.PolicyPatch, svc: Svc, who: Admin) -> schemas.PolicyOut:
    held, _ = svc.fleet.get(POLICY, name)
    merged = {**held.__dict__, **body.model_dump(exclude_unset=True, exclude_none=True)}
    merged.pop("flow_mon_id")
    schemas.PolicyIn.model_validate(merged)  # the encap mode / device rule, on the result
    policy, revision = svc.fleet.update(POLICY, name, _changes(body), who.name)
    return views.policy(policy, revision, svc.fleet.around([policy.name]), svc.fleet.node_status())


@router.delete("/{name}", status_code=204)
def delete_policy(name: str, svc: Svc, who: Admin) -> Response:
    svc.fleet.delete(POLICY, name, who.name)
    return Response(status_code=204)
