"""The controller's REST API over HTTP: JSON in and out, errors as typed exceptions.

Error replies are RFC 9457 problem details (title, status, detail, and `errors`, one per invalid
field, for validation failures); anything else that is not a 2xx (a proxy's HTML page) becomes
the same exception with the status line as its title.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

from . import __version__


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str


@dataclass
class ApiError(Exception):
    """The controller refused the request (a problem details reply, or another error reply)."""

    status: int
    title: str
    detail: str
    errors: list[FieldError] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.title}: {self.detail}" if self.detail else self.title


class Unreachable(Exception):
    """No answer from the controller: refused, unresolvable, TLS, timed out."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the controller at {url}: {reason}")
        self.url = url


def path(*parts: str | int) -> str:
    """An API path from its segments, each percent-encoded (a SID's colons, a name's dots)."""
    return "/" + "/".join(quote(str(p), safe="") for p in parts)


def _field(location: str) -> str:
    """`body.core_interfaces.0` -> `core_interfaces.0`: where the value came from is the CLI's."""
    head, _, rest = location.partition(".")
    return rest if head in ("body", "query", "path") and rest else location


def problem_of(reply: httpx.Response) -> ApiError:
    """The ApiError an error reply describes."""
    try:
        body = reply.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "title" in body:
        found = [
            FieldError(_field(str(e.get("field", ""))), str(e.get("message", "")))
            for e in body.get("errors") or []
            if isinstance(e, dict)
        ]
        return ApiError(
            int(body.get("status") or reply.status_code),
            str(body["title"]),
            str(body.get("detail") or ""),
            found,
        )
    text = " ".join(reply.text.split())[:300]
    return ApiError(reply.status_code, f"HTTP {reply.status_code} {reply.reason_phrase}", text)


class Api:
    """A client of one controller. Paths are the API's (`/v1/nodes`); bodies are JSON values."""

    def __init__(self, url: str, token: str | None, timeout_s: float) -> None:
        headers = {"User-Agent": f"srv6pm-cli/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self._timeout = timeout_s
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def request(
        self,
        method: str,
        where: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        """The reply's JSON (None for 204); ApiError or Unreachable otherwise."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            reply = self._client.request(
                method, where, params=query, json=body if body is not None else None
            )
        except httpx.TimeoutException:
            raise Unreachable(self.url, f"no answer within {self._timeout:g} s") from None
        except httpx.HTTPError as e:
            raise Unreachable(self.url, str(e) or type(e).__name__) from None
        if reply.status_code >= 400:
            raise problem_of(reply)
        if reply.status_code == 204 or not reply.content:
            return None
        try:
            return reply.json()
        except ValueError:
            raise ApiError(
                reply.status_code, "Not JSON", f"{method} {where} answered {reply.text[:200]!r}"
            ) from None

    def get(self, where: str, **params: Any) -> Any:
        return self.request("GET", where, params)

    def post(self, where: str, body: Any) -> Any:
        return self.request("POST", where, body=body)

    def put(self, where: str, body: Any) -> Any:
        return self.request("PUT", where, body=body)

    def patch(self, where: str, body: Any) -> Any:
        return self.request("PATCH", where, body=body)

    def delete(self, where: str) -> None:
        self.request("DELETE", where)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
