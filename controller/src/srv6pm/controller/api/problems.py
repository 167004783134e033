"""Errors as RFC 9457 problem details (application/problem+json), mapped here and only here."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from ..domain import errors

STATUS = {
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.Invalid: 422,
    errors.Exhausted: 507,
}
MEDIA_TYPE = "application/problem+json"


def problem(status: int, title: str, detail: str, request: Request, **extra: Any) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)


def install(app: FastAPI) -> None:
    @app.exception_handler(errors.ControllerError)
    async def _domain(request: Request, e: errors.ControllerError) -> JSONResponse:
        return problem(STATUS.get(type(e), 400), e.title, str(e), request)

    @app.exception_handler(errors.ResultsUnavailable)
    async def _results(request: Request, e: errors.ResultsUnavailable) -> JSONResponse:
        return problem(503, "Results unavailable", str(e), request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        found = [
            {
                "field": ".".join(str(p) for p in err["loc"]),
                "message": err["msg"],
            }
            for err in e.errors()
        ]
        detail = "; ".join(f"{f['field']}: {f['message']}" for f in found)
        return problem(422, "Invalid request", detail, request, errors=found)

    @app.exception_handler(ValidationError)
    async def _invalid_result(request: Request, e: ValidationError) -> JSONResponse:
        found = [
            {"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in e.errors()
        ]
        detail = "; ".join(f"{f['field']}: {f['message']}" for f in found) or str(e)
        return problem(422, "Invalid request", detail, request, errors=found)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, e: HTTPException) -> JSONResponse:
        response = problem(e.status_code, _title(e.status_code), str(e.detail), request)
        response.headers.update(e.headers or {})
        return response


def _title(status: int) -> str:
    return HTTPStatus(status).phrase
