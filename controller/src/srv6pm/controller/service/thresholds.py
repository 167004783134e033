"""Service-level objectives per session, evaluated over the last blocks InfluxDB holds.

A session violates its objective when, over its last `window_blocks` blocks, a block lost more
than `loss_ratio_max` in either direction, a block's two-way delay p99 exceeded
`delay_p99_max_ms`, or more than `invalid_blocks_max` blocks could not be measured. The state and
the time it last changed are stored with the objective.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from ..adapters.influx import InfluxResults, ResultsUnavailable, quote
from ..adapters.sql import store
from ..adapters.sql.store import Store
from ..adapters.sql.tables import SessionRow, ThresholdRow
from ..domain.errors import NotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Objective:
    loss_ratio_max: float | None = None
    delay_p99_max_ms: float | None = None
    invalid_blocks_max: int | None = None
    window_blocks: int = 6


def violations(
    objective: Objective, loss: list[dict[str, Any]], delay: list[dict[str, Any]]
) -> list[str]:
    """Why the blocks break the objective (empty: they do not). Pure, for tests."""
    found = []
    if objective.loss_ratio_max is not None:
        for row in loss:
            ratio = row.get("loss_ratio")
            if row.get("valid") and ratio is not None and ratio > objective.loss_ratio_max:
                found.append(
                    f"block {row['block']} {row['direction']} loss ratio {ratio:.4g} > "
                    f"{objective.loss_ratio_max:g}"
                )
    if objective.delay_p99_max_ms is not None:
        for row in delay:
            p99 = row.get("p99_ns")
            if row.get("valid") and p99 is not None and p99 / 1e6 > objective.delay_p99_max_ms:
                found.append(
                    f"block {row['block']} two-way p99 {p99 / 1e6:.3f} ms > "
                    f"{objective.delay_p99_max_ms:g} ms"
                )
    if objective.invalid_blocks_max is not None:
        invalid = {r["block"] for r in loss if not r.get("valid")}
        if len(invalid) > objective.invalid_blocks_max:
            found.append(
                f"{len(invalid)} blocks not measured > {objective.invalid_blocks_max} "
                f"(last {objective.window_blocks})"
            )
    return found


def objective_of(row: ThresholdRow) -> Objective:
    return Objective(
        row.loss_ratio_max, row.delay_p99_max_ms, row.invalid_blocks_max, row.window_blocks
    )


class ThresholdService:
    def __init__(self, db: Store, influx: InfluxResults) -> None:
        self._store = db
        self._influx = influx
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set(self, session: str, objective: Objective, actor: str) -> ThresholdRow:
        with self._store.write() as db:
            if db.get(SessionRow, session) is None:
                raise NotFound(f"session {session} does not exist")
            row = db.get(ThresholdRow, session)
            before = _audited(row) if row else None
            revision = store.audit(
                db,
                actor,
                "update" if row else "create",
                "threshold",
                session,
                before,
                objective.__dict__,
            )
            if row is None:
                row = ThresholdRow(session=session, revision=revision)
                db.add(row)
            for name, value in objective.__dict__.items():
                setattr(row, name, value)
            row.revision, row.state, row.since, row.detail = revision, "unknown", None, ""
        return row

    def get(self, session: str) -> ThresholdRow:
        with self._store.read() as db:
            row = db.get(ThresholdRow, session)
            if row is None:
                raise NotFound(f"session {session} has no threshold")
            return row

    def all(self) -> list[ThresholdRow]:
        with self._store.read() as db:
            return list(db.scalars(select(ThresholdRow).order_by(ThresholdRow.session)))

    def delete(self, session: str, actor: str) -> None:
        with self._store.write() as db:
            row = db.get(ThresholdRow, session)
            if row is None:
                raise NotFound(f"session {session} has no threshold")
            store.audit(db, actor, "delete", "threshold", session, _audited(row), None)
            db.delete(row)

    def evaluate(self) -> None:
        """Evaluate every objective now and store the states that changed."""
        now = datetime.now(UTC)
        for row in self.all():
            objective = objective_of(row)
            try:
                found = violations(objective, *self._recent(row.session, objective.window_blocks))
            except ResultsUnavailable as e:
                log.warning("thresholds not evaluated: %s", e)
                return
            state = "violated" if found else "ok"
            detail = "; ".join(found[:5])
            with self._store.write() as db:
                held = db.get(ThresholdRow, row.session)
                if held is None:
                    continue
                if held.state != state:
                    held.state, held.since = state, now
                    log.info("session %s: objective %s (%s)", row.session, state, detail)
                held.detail = detail

    def _recent(
        self, session: str, blocks: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        where = f'"session" = {quote(session)}'
        loss = self._influx.rows(
            f"SELECT block, loss_ratio, valid FROM loss WHERE {where} GROUP BY direction "
            f"ORDER BY time DESC LIMIT {blocks}"
        )
        delay = self._influx.rows(
            f"SELECT block, p99_ns, valid FROM delay WHERE {where} AND direction = 'two_way' "
            f"ORDER BY time DESC LIMIT {blocks}"
        )
        return loss, delay

    def start(self, every_s: float) -> None:
        def run() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.evaluate()
                except Exception:
                    log.exception("threshold evaluation failed")

        self._thread = threading.Thread(target=run, name="thresholds", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)


def _audited(row: ThresholdRow) -> dict[str, Any]:
    return objective_of(row).__dict__
