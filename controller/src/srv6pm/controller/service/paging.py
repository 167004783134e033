"""Pages of time-stamped items (events read back from InfluxDB) that never split one time."""

from __future__ import annotations

from typing import Any


def page_by_time(
    found: list[dict[str, Any]], limit: int
) -> tuple[list[dict[str, Any]], int | None]:
    """The first `limit` of `found` (sorted oldest first, at most `limit` + 1 read) and where
    the next page starts (None: no more). A page ends between two times, never inside one, so
    items at the same time are never split between pages (unless one time alone holds more
    than a page: then the page holds all of them read)."""
    if len(found) <= limit:
        return found, None
    following = found[limit]["at_ns"]
    page = [item for item in found[:limit] if item["at_ns"] < following]
    if not page:
        return [item for item in found if item["at_ns"] == following], following + 1
    return page, following
