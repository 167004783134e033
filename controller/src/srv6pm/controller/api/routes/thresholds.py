"""/v1/sessions/{name}/threshold and /v1/thresholds: objectives and their state."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from srv6pm.common.alert_rules import alert_rules, to_yaml
from srv6pm.common.objectives import Objective

from ...service.thresholds import Threshold
from .. import schemas
from ..deps import Admin, Reader, Svc

router = APIRouter(tags=["thresholds"])


def _out(threshold: Threshold) -> schemas.ThresholdOut:
    return schemas.ThresholdOut.model_validate(
        {
            "session": threshold.session,
            **asdict(threshold.objective),
            "state": threshold.state,
            "since": threshold.since,
            "detail": threshold.detail,
        }
    )


@router.put("/v1/sessions/{name}/threshold", response_model=schemas.ThresholdOut)
def set_threshold(
    name: str, body: schemas.ThresholdIn, svc: Svc, who: Admin
) -> schemas.ThresholdOut:
    return _out(svc.thresholds.set(name, Objective(**body.model_dump()), who.name))


@router.get("/v1/sessions/{name}/threshold", response_model=schemas.ThresholdOut)
def get_threshold(name: str, svc: Svc, _: Reader) -> schemas.ThresholdOut:
    return _out(svc.thresholds.get(name))


@router.delete("/v1/sessions/{name}/threshold", status_code=204)
def delete_threshold(name: str, svc: Svc, who: Admin) -> Response:
    svc.thresholds.delete(name, who.name)
    return Response(status_code=204)


@router.get(
    "/v1/thresholds/grafana-alert-rules",
    response_class=PlainTextResponse,
    responses={200: {"content": {"application/yaml": {}}}},
)
def grafana_alert_rules(svc: Svc, _: Reader) -> PlainTextResponse:
    """Grafana alert-rule provisioning (YAML) for every session's own objective: drop it in
    Grafana's provisioning/alerting folder (dashboards/README.md)."""
    objectives = {t.session: t.objective for t in svc.thresholds.all()}
    return PlainTextResponse(to_yaml(alert_rules(objectives)), media_type="application/yaml")


@router.get("/v1/thresholds", response_model=list[schemas.ThresholdOut])
def list_thresholds(svc: Svc, _: Reader) -> list[schemas.ThresholdOut]:
    return [_out(t) for t in svc.thresholds.all()]
