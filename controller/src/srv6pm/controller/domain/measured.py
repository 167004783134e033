"""What a session measures: the segment lists it probes (each with its SSID), the segment list its
replies come back on, and its measurement settings (its profile's, overridden field by field)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import Invalid
from .model import Fleet, Measurement, Policy, SegmentList, Session


@dataclass(frozen=True)
class Leg:
    """One segment list a session probes: a STAMP Session-Sender of its own."""

    segment_list: SegmentList
    ssid: int
    sender_name: str  # unique on the head-end


def wanted_lists(session: Session, policy: Policy) -> tuple[str, ...]:
    """Names of the segment lists `session` probes on `policy`: the one it names, or all."""
    if session.segment_list:
        return (session.segment_list,)
    return tuple(sl.name for sl in policy.segment_lists)


def legs(session: Session, fleet: Fleet) -> tuple[Leg, ...]:
    """A sender per probed segment list. Its name is the session's while the session probes one
    segment list (records read as they always did), else session/segment list."""
    policy = fleet.policies[session.policy]
    names = wanted_lists(session, policy)
    out = []
    for name in names:
        sl = policy.segment_list(name)
        if sl is None:
            raise Invalid(f"policy {policy.name} has no segment list {name!r}")
        sender = session.name if len(names) == 1 else f"{session.name}/{name}"
        out.append(Leg(sl, session.ssid(name), sender))
    return tuple(out)


def return_list(session: Session, fleet: Fleet) -> SegmentList:
    """The return policy's segment list the replies are steered into."""
    back = fleet.policies[session.return_policy]
    if not session.return_segment_list:
        return back.segment_lists[0]
    found = back.segment_list(session.return_segment_list)
    if found is None:
        raise Invalid(
            f"return policy {back.name} has no segment list {session.return_segment_list!r}"
        )
    return found


def measurement(session: Session, fleet: Fleet) -> Measurement:
    """The session's settings: each field its own if set, else its profile's, else the
    default."""
    base = fleet.profiles[session.profile].measurement if session.profile else Measurement()
    own = {
        f.name: getattr(session, f.name)
        for f in dataclasses.fields(Measurement)
        if getattr(session, f.name) is not None
    }
    return dataclasses.replace(base, **own)


MIN_DELAY_INTERVAL_MS = 10  # the node manager's floor


def check_measurement(m: Measurement, where: str, period_ns: int | None = None) -> None:
    """Raise Invalid for settings a node manager would refuse. With the sender node's block
    period (GetInfo), computation intervals are checked against it too; without it (the node
    not heard from yet) the node manager checks it, and the session's status says so."""
    if 0 < m.delay_interval_ms < MIN_DELAY_INTERVAL_MS:
        raise Invalid(f"{where}: delay interval below {MIN_DELAY_INTERVAL_MS} ms")
    interval = m.computation_interval_ms
    if not interval:
        return
    # each interval must hold the same number of probe ticks and lie inside one block
    if not m.delay_interval_ms:
        raise Invalid(
            f"{where}: a computation interval needs a delay interval (with one probe per "
            "block, the block is the only interval)"
        )
    if interval % m.delay_interval_ms:
        raise Invalid(
            f"{where}: computation interval {interval} ms is not a multiple of the delay "
            f"interval ({m.delay_interval_ms} ms)"
        )
    if period_ns is not None and period_ns % (interval * 1_000_000):
        raise Invalid(
            f"{where}: computation interval {interval} ms does not divide the "
            f"{period_ns / 1e6:g} ms block of its sender's node"
        )
