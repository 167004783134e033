"""/v1/profiles: measurement profiles (probe interval, liveness, delay histogram bins, bursts,
computation intervals, delay thresholds, loss or delay only) that sessions name instead of
repeating them; a session's own settings override its profile's."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ...domain.model import Measurement, Profile
from ...service.fleet import PROFILE
from .. import measurement, schemas, views
from ..deps import Admin, Reader, Svc

router = APIRouter(prefix="/v1/profiles", tags=["profiles"])


def _domain(body: schemas.ProfileIn) -> Profile:
    return Profile(body.name, Measurement(**measurement.given(body)))


def _changes(patch: schemas.ProfilePatch, held: Profile) -> dict[str, Any]:
    # a profile's fields cannot be cleared: null (or absent) keeps the value held
    return {"measurement": dataclasses.replace(held.measurement, **measurement.given(patch))}


@router.post("", status_code=201, response_model=schemas.ProfileOut)
def create_profile(body: schemas.ProfileIn, svc: Svc, who: Admin) -> schemas.ProfileOut:
    profile, revision = svc.fleet.create(PROFILE, _domain(body), who.name)
    return views.profile(profile, revision, [])


@router.get("", response_model=schemas.ProfileList)
def list_profiles(
    svc: Svc,
    _: Reader,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> schemas.ProfileList:
    found, total = svc.fleet.page(PROFILE, {}, limit, offset)
    items = [views.profile(p, r, svc.fleet.profile_users(p.name)) for p, r in found]
    return schemas.ProfileList(items=items, total=total, limit=limit, offset=offset)


@router.get("/{name}", response_model=schemas.ProfileOut)
def get_profile(name: str, svc: Svc, _: Reader) -> schemas.ProfileOut:
    profile, revision = svc.fleet.get(PROFILE, name)
    return views.profile(profile, revision, svc.fleet.profile_users(name))


@router.patch("/{name}", response_model=schemas.ProfileOut)
def update_profile(
    name: str, body: schemas.ProfilePatch, svc: Svc, who: Admin
) -> schemas.ProfileOut:
    held, _ = svc.fleet.get(PROFILE, name)
    profile, revision = svc.fleet.update(PROFILE, name, _changes(body, held), who.name)
    return views.profile(profile, revision, svc.fleet.profile_users(name))


@router.delete("/{name}", status_code=204)
def delete_profile(name: str, svc: Svc, who: Admin) -> Response:
    svc.fleet.delete(PROFILE, name, who.name)
    return Response(status_code=204)
