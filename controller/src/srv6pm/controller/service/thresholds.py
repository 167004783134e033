"""Service-level objectives per session (srv6pm.common.objectives), evaluated over the last
blocks InfluxDB holds with the tests the Grafana alert rules carry: the same InfluxQL query per
objective and the same comparison, run here without Grafana's time filter. The state and the
time it last changed are stored with the objective.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from srv6pm.common.objectives import Objective, queries, violations

from ..adapters.influx import InfluxResults
from ..adapters.sql import store
from ..adapters.sql.store import Store
from ..adapters.sql.tables import SessionRow, ThresholdRow
from ..domain.errors import NotFound, ResultsUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Threshold:
    """A session's objective and its evaluated state."""

    session: str
    objective: Objective
    state: str = "unknown"  # unknown (not evaluated yet), ok or violated
    since: datetime | None = None  # when the state last changed
    detail: str = ""  # why it is violated


def _objective_of(row: ThresholdRow) -> Objective:
    return Objective(
        row.loss_ratio_max, row.delay_p99_max_ms, row.invalid_blocks_max, row.window_blocks
    )


def _threshold(row: ThresholdRow) -> Threshold:
    return Threshold(row.session, _objective_of(row), row.state, row.since, row.detail)


class ThresholdService:
    def __init__(self, db: Store, influx: InfluxResults) -> None:
        self._store = db
        self._influx = influx
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set(self, session: str, objective: Objective, actor: str) -> Threshold:
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
                asdict(objective),
            )
            if row is None:
                row = ThresholdRow(session=session, revision=revision)
                db.add(row)
            for name, value in asdict(objective).items():
                setattr(row, name, value)
            row.revision, row.state, row.since, row.detail = revision, "unknown", None, ""
            return _threshold(row)

    def get(self, session: str) -> Threshold:
        with self._store.read() as db:
            row = db.get(ThresholdRow, session)
            if row is None:
                raise NotFound(f"session {session} has no threshold")
            return _threshold(row)

    def all(self) -> list[Threshold]:
        with self._store.read() as db:
            rows = db.scalars(select(ThresholdRow).order_by(ThresholdRow.session))
            return [_threshold(row) for row in rows]

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
        for threshold in self.all():
            objective, session = threshold.objective, threshold.session
            try:
                found = violations(
                    objective,
                    {
                        kind: self._influx.rows(query)
                        for kind, query in queries(objective, session, time_filter=None).items()
                    },
                )
            except ResultsUnavailable as e:
                log.warning("thresholds not evaluated: %s", e)
                return
            state = "violated" if found else "ok"
            detail = "; ".join(found[:5])
            with self._store.write() as db:
                held = db.get(ThresholdRow, session)
                if held is None:
                    continue
                if held.state != state:
                    held.state, held.since = state, now
                    log.info("session %s: objective %s (%s)", session, state, detail)
                held.detail = detail

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
    return asdict(_objective_of(row))
