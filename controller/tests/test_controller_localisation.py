"""domain/localisation.py: per-segment loss from what each node of a path counted (RFC 9341
section 3.1)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st
from srv6pm.controller.domain.localisation import HopCount, SegmentLoss, segments


def counts(path: list[str], packets: list[int | None]) -> dict[str, HopCount]:
    return {n: HopCount(n, p) for n, p in zip(path, packets, strict=True)}


def test_each_segment_loses_what_its_start_counted_and_its_end_did_not():
    path = ["r1", "r2", "r3"]
    assert segments(path, counts(path, [100, 97, 95])) == [
        SegmentLoss("r1", "r2", 3),
        SegmentLoss("r2", "r3", 2),
    ]


def test_a_node_without_a_count_leaves_both_its_segments_unknown():
    path = ["r1", "r2", "r3", "r4"]
    found = segments(path, {**counts(path, [100, None, 90, 90])})
    assert [s.lost for s in found] == [None, None, 0]
    missing = counts(path, [100, 99, 90, 90])
    del missing["r3"]
    assert [s.lost for s in segments(path, missing)] == [1, None, None]


def test_a_path_of_one_node_has_no_segment():
    assert segments(["r1"], counts(["r1"], [5])) == []


paths = st.integers(2, 12).map(lambda n: [f"r{i}" for i in range(n)])


@given(
    paths.flatmap(
        lambda p: st.tuples(
            st.just(p), st.lists(st.integers(0, 10**12), min_size=len(p), max_size=len(p))
        )
    )
)
def test_segment_losses_sum_to_the_end_to_end_loss(case):
    path, packets = case
    found = segments(path, counts(path, packets))
    assert [(s.src, s.dst) for s in found] == list(itertools.pairwise(path))
    assert sum(s.lost for s in found) == packets[0] - packets[-1]


@given(
    paths.flatmap(
        lambda p: st.tuples(
            st.just(p),
            st.lists(st.none() | st.integers(0, 10**6), min_size=len(p), max_size=len(p)),
        )
    )
)
def test_a_segment_is_known_exactly_when_both_its_ends_counted(case):
    path, packets = case
    for i, s in enumerate(segments(path, counts(path, packets))):
        a, b = packets[i], packets[i + 1]
        assert s.lost == (None if a is None or b is None else a - b)
