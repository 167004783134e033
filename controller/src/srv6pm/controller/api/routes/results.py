"""/v1/sessions/{name}/loss|delay|hops: results as InfluxDB holds them, one item per block and
segment list (a session probes one segment list of its policy; `segment_list` picks one); and
/delay/computation-intervals, one item per computation interval and segment list."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query

from ...service.fleet import SESSION
from ...service.results import INTERVALS, Scope, Window
from .. import schemas
from ..deps import Reader, Svc

router = APIRouter(prefix="/v1/sessions/{name}", tags=["results"])

Start = Annotated[
    int | None, Query(ge=0, description="from (ns since the epoch; default: an hour ago)")
]
End = Annotated[int | None, Query(ge=0, description="until, excluded (ns; default: now)")]
Limit = Annotated[int, Query(ge=1, le=10_000, description="blocks per page")]
After = Annotated[int, Query(ge=-1, description="only blocks after this one (paging)")]
SegmentList = Annotated[
    str | None,
    Query(
        max_length=256,
        description="only this segment list ('': a policy's only one; default: every one)",
    ),
]
HOUR_NS = 3600 * 10**9


def window(start: int | None, end: int | None, limit: int, after: int) -> Window:
    end = end if end is not None else time.time_ns()
    return Window(start if start is not None else end - HOUR_NS, end, limit, after)


def next_after(blocks: list[int], limit: int) -> int | None:
    """A page holds `limit` blocks (each with all its segment lists): if full, there may be more."""
    distinct = sorted(set(blocks))
    return distinct[-1] if len(distinct) == limit else None


@router.get("/loss", response_model=schemas.LossPage)
def loss(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Limit = 100,
    after_block: After = -1,
    segment_list: SegmentList = None,
) -> schemas.LossPage:
    """Loss per block and segment list, both directions (a page of blocks, oldest first)."""
    svc.fleet.get(SESSION, name)
    scope = Scope("session", name, segment_list)
    blocks = svc.results.blocks("loss", scope, window(start, end, limit, after_block))
    items = [schemas.LossBlock.model_validate(b) for b in blocks]
    after = next_after([i.block for i in items], limit)
    return schemas.LossPage(session=name, items=items, next_after_block=after)


@router.get("/loss/intervals", response_model=schemas.LossIntervals)
def loss_intervals(
    name: str,
    svc: Svc,
    _: Reader,
    interval: Annotated[str, Query(pattern="^(" + "|".join(INTERVALS) + ")$")] = "1h",
    start: Start = None,
    end: End = None,
    limit: Limit = 1000,
    segment_list: SegmentList = None,
) -> schemas.LossIntervals:
    """Loss summed per interval and direction, over every segment list or one."""
    svc.fleet.get(SESSION, name)
    scope = Scope("session", name, segment_list)
    rows = svc.results.loss_per_interval(scope, window(start, end, limit, -1), interval)
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
    segment_list: SegmentList = None,
) -> schemas.DelayPage:
    """Delay per block and segment list: two-way, and one-way when the clocks are synchronised;
    with the replies per delay bin when the session has bin edges."""
    svc.fleet.get(SESSION, name)
    scope = Scope("session", name, segment_list)
    blocks = svc.results.blocks("delay", scope, window(start, end, limit, after_block))
    items = [schemas.DelayBlock.model_validate(b) for b in blocks]
    after = next_after([i.block for i in items], limit)
    return schemas.DelayPage(session=name, items=items, next_after_block=after)


Intervals = Annotated[int, Query(ge=1, le=10_000, description="intervals per page")]


def next_start(starts: list[int], limit: int) -> int | None:
    """A page holds `limit` interval starts: if full, the next page starts after its last."""
    distinct = sorted(set(starts))
    return distinct[-1] + 1 if len(distinct) == limit else None


@router.get("/delay/computation-intervals", response_model=schemas.SessionIntervalDelays)
def delay_intervals(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Intervals = 100,
    segment_list: SegmentList = None,
) -> schemas.SessionIntervalDelays:
    """Delay per computation interval (the session's `computation_interval_ms`) and segment
    list, as `/delay` gives it per block; none when the session has no computation interval."""
    svc.fleet.get(SESSION, name)
    scope = Scope("session", name, segment_list)
    found = svc.delay_intervals.intervals(scope, window(start, end, limit, -1))
    items = [schemas.IntervalDelay.model_validate(i) for i in found]
    after = next_start([i.start_ns for i in items], limit)
    return schemas.SessionIntervalDelays(session=name, items=items, next_start=after)


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
