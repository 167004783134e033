"""API tokens: random, shown once, stored as SHA-256 (a 256-bit random token needs no slow hash:
there is nothing to guess), with a read-only or admin scope. Plus the audit log's reads."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..adapters.sql import store
from ..adapters.sql.store import Store
from ..adapters.sql.tables import AuditRow, TokenRow
from ..domain.errors import Conflict, NotFound

Scope = Literal["read", "admin"]
PREFIX = "s6pm_"


@dataclass(frozen=True)
class Principal:
    name: str
    scope: Scope


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AuthService:
    def __init__(self, db: Store) -> None:
        self._store = db

    def authenticate(self, token: str) -> Principal | None:
        with self._store.read() as db:
            row = db.scalar(select(TokenRow).where(TokenRow.sha256 == digest(token)))
            return Principal(row.name, row.scope) if row else None  # type: ignore[arg-type]

    def create(self, name: str, scope: Scope, actor: str, token: str | None = None) -> str:
        """A new token (shown once); `token` installs a given one (a deployment's secret)."""
        token = token or PREFIX + secrets.token_urlsafe(32)
        with self._store.write() as db:
            if db.get(TokenRow, name) is not None:
                raise Conflict(f"token {name} already exists")
            db.add(TokenRow(name=name, scope=scope, sha256=digest(token), created_at=_now()))
            _audit(db, actor, "create", name, None, {"name": name, "scope": scope})
        return token

    def ensure(self, name: str, scope: Scope, token: str) -> None:
        """Install `token` under `name` unless it is there (idempotent, for bootstrap)."""
        with self._store.read() as db:
            if db.get(TokenRow, name) is not None:
                return
        self.create(name, scope, "bootstrap", token)

    def tokens(self) -> list[dict[str, Any]]:
        with self._store.read() as db:
            return [
                {"name": r.name, "scope": r.scope, "created_at": r.created_at}
                for r in db.scalars(select(TokenRow).order_by(TokenRow.name))
            ]

    def delete(self, name: str, actor: str) -> None:
        with self._store.write() as db:
            row = db.get(TokenRow, name)
            if row is None:
                raise NotFound(f"token {name} does not exist")
            _audit(db, actor, "delete", name, {"name": name, "scope": row.scope}, None)
            db.delete(row)

    def audit_log(
        self, kind: str | None, name: str | None, limit: int, offset: int
    ) -> tuple[list[AuditRow], int]:
        """Changes, newest first."""
        query = select(AuditRow)
        if kind:
            query = query.where(AuditRow.kind == kind)
        if name:
            query = query.where(AuditRow.name == name)
        with self._store.read() as db:
            total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
            newest = query.order_by(AuditRow.id.desc())
            # past the end is an empty page (an offset beyond 64 bits would not reach SQL)
            rows = list(db.scalars(newest.limit(limit).offset(min(offset, total))))
            return rows, total


def _now() -> datetime:
    return datetime.now(UTC)


def _audit(db: Session, actor: str, action: str, name: str, before: Any, after: Any) -> None:
    store.audit(db, actor, action, "token", name, before, after)
