"""Protection's rules on policies of several segment lists (the lab test shows it on a kernel:
tests/test_lab_segment_lists.py)."""

import threading

from srv6pm.node_manager.domain.model import Liveness, SegmentList, SenderSession, SrPolicy
from srv6pm.node_manager.service.protection import Protection, routed

A, B, C = (("fc00:0:2::e", "fc00:0:4::c"), ("fc00:0:3::e", "fc00:0:4::c"), ("fc00:0:5::e",))
LISTS = (SegmentList("sl0", A), SegmentList("sl1", B, 2), SegmentList("sl2", C))
POLICY = SrPolicy("p", "fd00::/64", (), segment_lists=LISTS, protection=True)


def test_down_segment_lists_leave_the_hash_but_never_the_last_ones() -> None:
    assert routed(POLICY, {"sl1"}).segment_lists == (LISTS[0], LISTS[2])
    only = routed(POLICY, {"sl0", "sl2"})
    assert only.segments == B and only.segment_lists == ()  # one left: a plain route
    assert routed(POLICY, {"sl0", "sl1", "sl2"}) == POLICY  # all down: none is better
    unprotected = SrPolicy("p", "fd00::/64", (), segment_lists=LISTS)
    assert routed(unprotected, {"sl1"}) == unprotected


class Driver:
    def __init__(self) -> None:
        self.added: list[SrPolicy] = []

    def add_policy(self, policy: SrPolicy) -> None:
        self.added.append(policy)


def session(segment_list: str) -> SenderSession:
    return SenderSession(
        f"s-{segment_list}",
        1,
        "fc00::1",
        "",
        "",
        policy="p",
        segment_list=segment_list,
        liveness=Liveness(enabled=True),
    )


def test_a_liveness_change_reroutes_and_a_list_nobody_probes_is_not_held_down() -> None:
    driver = Driver()
    protection = Protection(driver, threading.Lock())  # type: ignore[arg-type]
    sessions = [session("sl0"), session("sl1")]
    assert protection.routed([POLICY], sessions) == (POLICY,)
    protection.liveness_changed(session("sl1"), up=False)
    protection.close()  # waits for the change
    assert driver.added == [routed(POLICY, {"sl1"})]
    protection = Protection(driver, threading.Lock())  # type: ignore[arg-type]
    protection.liveness_changed(session("sl1"), up=False)
    protection.close()
    assert protection.routed([POLICY], sessions)[0].segment_lists == (LISTS[0], LISTS[2])
    # the session probing sl1 is gone: nothing says sl1 is down any more
    assert protection.routed([POLICY], sessions[:1]) == (POLICY,)
