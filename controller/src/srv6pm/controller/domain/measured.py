"""What a session measures: the segment lists it probes (each with its SSID), the segment list its
replies come back on, and its measurement settings (its profile's, overridden field by field)."""

from __future__ import annotations

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
    return Measurement(
        delay_interval_ms=base.delay_interval_ms
        if session.delay_interval_ms is None
        else session.delay_interval_ms,
        liveness=base.liveness if session.liveness is None else session.liveness,
        histogram_edges_us=base.histogram_edges_us
        if session.histogram_edges_us is None
        else session.histogram_edges_us,
    )
