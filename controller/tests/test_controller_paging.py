"""Pages of events never split one time (liveness changes, threshold events)."""

from srv6pm.controller.service.paging import page_by_time


def items(*times: int) -> list[dict[str, int]]:
    return [{"at_ns": t} for t in times]


def test_a_page_ends_between_two_times() -> None:
    assert page_by_time(items(1, 2), 2) == (items(1, 2), None)
    # the third read says there is more: the page stops before the time it would split
    assert page_by_time(items(1, 2, 2), 2) == (items(1), 2)
    assert page_by_time(items(1, 2, 3), 2) == (items(1, 2), 3)


def test_one_time_holding_more_than_a_page_is_given_whole() -> None:
    assert page_by_time(items(5, 5, 5), 2) == (items(5, 5, 5), 6)
