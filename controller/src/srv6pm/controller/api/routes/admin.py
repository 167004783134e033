"""/v1/tokens and /v1/audit: who may call the API, and what they changed."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from .. import schemas
from ..deps import Admin, Reader, Svc

router = APIRouter(tags=["administration"])


@router.post("/v1/tokens", status_code=201, response_model=schemas.TokenCreated)
def create_token(body: schemas.TokenIn, svc: Svc, who: Admin) -> schemas.TokenCreated:
    token = svc.auth.create(body.name, body.scope, who.name)
    return schemas.TokenCreated(name=body.name, scope=body.scope, token=token)


@router.get("/v1/tokens", response_model=list[schemas.TokenOut])
def list_tokens(svc: Svc, _: Admin) -> list[schemas.TokenOut]:
    return [schemas.TokenOut.model_validate(t) for t in svc.auth.tokens()]


@router.delete("/v1/tokens/{name}", status_code=204)
def delete_token(name: str, svc: Svc, who: Admin) -> Response:
    svc.auth.delete(name, who.name)
    return Response(status_code=204)


@router.get("/v1/audit", response_model=schemas.AuditPage)
def audit_log(
    svc: Svc,
    _: Reader,
    kind: str | None = None,
    name: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.AuditPage:
    """Every change, newest first: who, what, when, before and after (keys never shown)."""
    rows, total = svc.auth.audit_log(kind, name, limit, offset)
    items = [schemas.AuditEntry.model_validate(r, from_attributes=True) for r in rows]
    return schemas.AuditPage(items=items, total=total, limit=limit, offset=offset)
