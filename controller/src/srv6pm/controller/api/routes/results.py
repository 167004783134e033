"""/v1/sessions/{name}/loss|delay|hops: results as InfluxDB holds them."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query

from ...service.fleet import SESSION
from ...service.results import INTERVALS, Window
from .. import schemas
from ..deps import Reader, Svc

router = APIRouter(prefix="/v1/sessions/{name}", tags=["results"])

Start = Annotated[
    int | None, Query(ge=0, description="from (ns since the epoch; default: an hour ago)")
]
End = Annotated[int | None, Query(ge=0, description="until, excluded (ns; default: now)")]
Limit = Annotated[int, Query(ge=1, le=10_000, description="blocks per page")]
After = Annotated[int, Query(ge=-1, description="only blocks after this one (paging)")]
HOUR_NS = 3600 * 10**9


def _window(start: int | None, end: int | None, limit: int, after: int) -> Window:
    end = end if end is not None else time.time_ns()
    return Window(start if start is not None else end - HOUR_NS, end, limit, after)


def _next(items: list[schemas.LossBlock] | list[schemas.DelayBlock], limit: int) -> int | None:
    return items[-1].block if len(items) == limit else None


@router.get("/loss", response_model=schemas.LossPage)
def loss(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Limit = 100,
    after_block: After = -1,
) -> schemas.LossPage:
    """Loss per block, both directions (a page, oldest first)."""
    svc.fleet.get(SESSION, name)
    blocks = svc.results.blocks("loss", name, _window(start, end, limit, after_block))
    items = [schemas.LossBlock.model_validate(b) for b in blocks]
    return schemas.LossPage(session=name, items=items, next_after_block=_next(items, limit))


@router.get("/loss/intervals", response_model=schemas.LossIntervals)
def loss_intervals(
    name: str,
    svc: Svc,
    _: Reader,
    interval: Annotated[str, Query(pattern="^(" + "|".join(INTERVALS) + ")$")] = "1h",
    start: Start = None,
    end: End = None,
    limit: Limit = 1000,
) -> schemas.LossIntervals:
    """Loss summed per interval and direction."""
    svc.fleet.get(SESSION, name)
    rows = svc.results.loss_per_interval(name, _window(start, end, limit, -1), interval)
    items = [schemas.LossInterval.model_validate(r) for r in rows]
    return schemas.LossIntervals(session=name, interval=interval, items=items)


@router.get("/delay", response_model=schemas.DelayPage)
def delay(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Limit = 100,
    after_block: After = -1,
) -> schemas.DelayPage:
    """Delay per block: two-way, and one-way when the clocks are synchronised."""
    svc.fleet.get(SESSION, name)
    blocks = svc.results.blocks("delay", name, _window(start, end, limit, after_block))
    items = [schemas.DelayBlock.model_validate(b) for b in blocks]
    return schemas.DelayPage(session=name, items=items, next_after_block=_next(items, limit))


@router.get("/hops", response_model=schemas.Hops)
def hops(name: str, svc: Svc, _: Reader, block: Annotated[int, Query(ge=0)]) -> schemas.Hops:
    """For one block: what each node of both paths counted, and the loss of each segment."""
    directions = svc.results.hops(name, block, svc.fleet.around((), session=name))
    return schemas.Hops(
        session=name,
        block=block,
        directions=[
            schemas.HopDirection.model_validate(d, from_attributes=True) for d in directions
        ],
    )
