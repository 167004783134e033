"""/v1/policies: SR policies (a head-end steers a prefix into a SID list, or hashes flows over
several weighted segment lists)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from srv6pm.common.srv6 import EncapMode

from ...domain.errors import Invalid
from ...domain.model import Policy, SegmentList
from ...service.fleet import POLICY
from .. import schemas, views
from ..deps import Admin, Reader, Svc

router = APIRouter(prefix="/v1/policies", tags=["policies"])


def _lists(
    segments: list[schemas.IPv6] | None, lists: list[schemas.SegmentListIn] | None, first: str
) -> tuple[SegmentList, ...]:
    """The segment lists of a body: `segments` is the one-list form (named `first`)."""
    if segments is not None:
        return (SegmentList(tuple(str(s) for s in segments), first),)
    return tuple(
        SegmentList(tuple(str(s) for s in sl.segments), sl.name or f"sl{i}", sl.weight)
        for i, sl in enumerate(lists or ())
    )


def _domain(body: schemas.PolicyIn) -> Policy:
    return Policy(
        name=body.name,
        head_node=body.head_node,
        tail_node=body.tail_node,
        segment_lists=_lists(body.segments, body.segment_lists, "sl0"),
        prefix=str(body.prefix),
        encap_mode=body.encap_mode,
        device=body.device,
        table=body.table,
        protection=body.protection,
    )


def _changes(patch: schemas.PolicyPatch, held: Policy) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in patch.model_fields_set - {"segments", "segment_lists"}:
        value = getattr(patch, name)
        if value is not None:
            out[name] = str(value) if name == "prefix" else value
    if patch.segments is not None or patch.segment_lists is not None:
        # one SID list replaces the only one in place (keeping its name and FlowMonID)
        first = held.segment_lists[0].name if len(held.segment_lists) == 1 else "sl0"
        out["segment_lists"] = _lists(patch.segments, patch.segment_lists, first)
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
    changes = _changes(body, held)
    mode, device = changes.get("encap_mode", held.encap_mode), changes.get("device", held.device)
    if mode is EncapMode.L2ENCAP and not device:  # the rule of PolicyIn, on the result
        raise Invalid("l2encap needs a device")
    policy, revision = svc.fleet.update(POLICY, name, changes, who.name)
    return views.policy(policy, revision, svc.fleet.around([policy.name]), svc.fleet.node_status())


@router.delete("/{name}", status_code=204)
def delete_policy(name: str, svc: Svc, who: Admin) -> Response:
    svc.fleet.delete(POLICY, name, who.name)
    return Response(status_code=204)
