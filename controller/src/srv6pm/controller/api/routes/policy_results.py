"""/v1/policies/{name}/loss|delay: a policy's results over all its segment lists, block by
block: each segment list's (its session's) result, and for loss the policy's total; and
/delay/computation-intervals, each segment list's per computation interval."""

from __future__ import annotations

from fastapi import APIRouter

from ...service.fleet import POLICY
from ...service.results import Scope
from .. import schemas
from ..deps import Reader, Svc
from .results import (
    After,
    End,
    Intervals,
    Limit,
    SegmentList,
    Start,
    next_after,
    next_start,
    window,
)

router = APIRouter(prefix="/v1/policies/{name}", tags=["results"])


@router.get("/loss", response_model=schemas.PolicyLossPage)
def loss(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Limit = 100,
    after_block: After = -1,
    segment_list: SegmentList = None,
) -> schemas.PolicyLossPage:
    """Loss per block: each segment list's, both directions, and the policy's total (the sum of
    tx and rx over the block's valid segment lists)."""
    svc.fleet.get(POLICY, name)
    scope = Scope("policy", name, segment_list)
    blocks = svc.results.policy_blocks("loss", scope, window(start, end, limit, after_block))
    items = [schemas.PolicyLossBlock.model_validate(b) for b in blocks]
    after = next_after([i.block for i in items], limit)
    return schemas.PolicyLossPage(policy=name, items=items, next_after_block=after)


@router.get("/delay", response_model=schemas.PolicyDelayPage)
def delay(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Limit = 100,
    after_block: After = -1,
    segment_list: SegmentList = None,
) -> schemas.PolicyDelayPage:
    """Delay per block, each segment list's (percentiles do not add up: no total)."""
    svc.fleet.get(POLICY, name)
    scope = Scope("policy", name, segment_list)
    blocks = svc.results.policy_blocks("delay", scope, window(start, end, limit, after_block))
    items = [schemas.PolicyDelayBlock.model_validate(b) for b in blocks]
    after = next_after([i.block for i in items], limit)
    return schemas.PolicyDelayPage(policy=name, items=items, next_after_block=after)


@router.get("/delay/computation-intervals", response_model=schemas.PolicyIntervalDelays)
def delay_intervals(
    name: str,
    svc: Svc,
    _: Reader,
    start: Start = None,
    end: End = None,
    limit: Intervals = 100,
    segment_list: SegmentList = None,
) -> schemas.PolicyIntervalDelays:
    """Delay per computation interval, each segment list's (its session's)."""
    svc.fleet.get(POLICY, name)
    scope = Scope("policy", name, segment_list)
    found = svc.delay_intervals.intervals(scope, window(start, end, limit, -1))
    items = [schemas.IntervalDelay.model_validate(i) for i in found]
    after = next_start([i.start_ns for i in items], limit)
    return schemas.PolicyIntervalDelays(policy=name, items=items, next_start=after)
