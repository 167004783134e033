"""/v1/profiles: measurement profiles (probe interval, liveness, delay histogram bins) that
sessions name instead of repeating them; a session's own settings override its profile's."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ...domain.model import LivenessSettings, Measurement, Profile
from ...service.fleet import PROFILE
from .. import schemas, views
from ..deps import Admin, Reader, Svc

router = APIRouter(prefix="/v1/profiles", tags=["profiles"])


def liveness(body: schemas.LivenessIn) -> LivenessSettings:
    return LivenessSettings(**body.model_dump())


def _domain(body: schemas.ProfileIn) -> Profile:
    return Profile(
        body.name,
        Measurement(
            delay_interval_ms=body.delay_interval_ms,
            liveness=liveness(body.liveness),
            histogram_edges_us=tuple(body.histogram_edges_us),
        ),
    )


def _changes(patch: schemas.ProfilePatch, held: Profile) -> dict[str, Any]:
    m = held.measurement
    if patch.delay_interval_ms is not None:
        m = dataclasses.replace(m, delay_interval_ms=patch.delay_interval_ms)
    if patch.liveness is not None:
        m = dataclasses.replace(m, liveness=liveness(patch.liveness))
    if patch.histogram_edges_us is not None:
        m = dataclasses.replace(m, histogram_edges_us=tuple(patch.histogram_edges_us))
    return {"measurement": m}


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
