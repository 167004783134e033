"""/v1/nodes: routers and their node managers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ...domain.model import Node
from ...service.fleet import NODE
from .. import schemas, views
from ..deps import Admin, Reader, Svc

router = APIRouter(prefix="/v1/nodes", tags=["nodes"])


def _domain(body: schemas.NodeIn) -> Node:
    return Node(
        name=body.name,
        endpoint=body.endpoint,
        probe_address=str(body.probe_address) if body.probe_address else "",
        core_interfaces=tuple(body.core_interfaces),
        boundary_interfaces=tuple(body.boundary_interfaces),
    )


def changes(patch: schemas.NodePatch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in patch.model_dump(exclude_unset=True).items():
        if name == "probe_address":
            out[name] = str(value) if value else ""
        elif isinstance(value, list):
            out[name] = tuple(value)
        elif value is not None:
            out[name] = value
    return out


@router.post("", status_code=201, response_model=schemas.NodeOut)
def create_node(body: schemas.NodeIn, svc: Svc, who: Admin) -> schemas.NodeOut:
    node, revision = svc.fleet.create(NODE, _domain(body), who.name)
    return views.node(node, revision, svc.fleet.node_status())


@router.get("", response_model=schemas.NodeList)
def list_nodes(
    svc: Svc,
    _: Reader,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.NodeList:
    found, total = svc.fleet.page(NODE, {}, limit, offset)
    held = svc.fleet.node_status()
    items = [views.node(n, r, held) for n, r in found]
    return schemas.NodeList(items=items, total=total, limit=limit, offset=offset)


@router.get("/{name}", response_model=schemas.NodeOut)
def get_node(name: str, svc: Svc, _: Reader) -> schemas.NodeOut:
    node, revision = svc.fleet.get(NODE, name)
    return views.node(node, revision, svc.fleet.node_status())


@router.patch("/{name}", response_model=schemas.NodeOut)
def update_node(name: str, body: schemas.NodePatch, svc: Svc, who: Admin) -> schemas.NodeOut:
    node, revision = svc.fleet.update(NODE, name, changes(body), who.name)
    return views.node(node, revision, svc.fleet.node_status())


@router.delete("/{name}", status_code=204)
def delete_node(name: str, svc: Svc, who: Admin) -> Response:
    svc.fleet.delete(NODE, name, who.name)
    return Response(status_code=204)
