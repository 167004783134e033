"""Operators' changes to the desired state: create, update, delete nodes, local SIDs, policies,
measurement profiles and sessions. Each change is checked against the domain, given its
identifiers, recorded in the audit log (whose id becomes the object's revision) and committed in
one transaction; the reconciler is then woken to push it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session as Db
from srv6pm.common.srv6 import MarkingMode

from ..adapters.sql import store
from ..adapters.sql.store import Store
from ..adapters.sql.tables import (
    LocalSidRow,
    NodeRow,
    PolicyRow,
    ProfileRow,
    Revisioned,
    SegmentListRow,
    SessionRow,
    SessionSsidRow,
)
from ..domain.errors import Conflict, Exhausted, Invalid, NotFound
from ..domain.measured import wanted_lists
from ..domain.model import Fleet, LocalSid, Node, Policy, Probed, Profile, Session
from ..domain.paths import check_policy, check_profile, check_session, check_settings

MAX_FLOW_MON_ID = (1 << 20) - 1  # RFC 9343: a 20-bit field
MAX_SSID = 0xFFFF  # RFC 8972: 16 bits

T = TypeVar("T", Node, LocalSid, Policy, Profile, Session)
Obj = Node | LocalSid | Policy | Profile | Session


@dataclass(frozen=True)
class NodeStatus:
    applied_revision: int
    error: str
    reachable: bool | None
    attempted_at: datetime | None

    def of(self, revision: int) -> tuple[str, str]:
        """(state, message) of an object changed at `revision`, as far as this node goes."""
        if self.applied_revision >= revision:
            return "applied", ""
        return ("failed", self.error) if self.error else ("pending", "")


@dataclass(frozen=True)
class Kind(Generic[T]):
    name: str  # as in messages and the audit log
    row: type[Revisioned]
    key: str
    of: Callable[[Any], T]
    write: Callable[[Any, T], None]  # sets a row's columns (and child rows) from the object
    secret: tuple[str, ...] = ()  # never written to the audit log


def _set_columns(row: Any, obj: Node | LocalSid) -> None:
    for column, value in _plain(obj).items():
        setattr(row, column, value)


NODE = Kind[Node]("node", NodeRow, "name", store.node_of, _set_columns)
LOCAL_SID = Kind[LocalSid]("local-sid", LocalSidRow, "sid", store.sid_of, _set_columns)
POLICY = Kind[Policy]("policy", PolicyRow, "name", store.policy_of, store.write_policy)
PROFILE = Kind[Profile]("profile", ProfileRow, "name", store.profile_of, store.write_profile)
SESSION = Kind[Session](
    "session", SessionRow, "name", store.session_of, store.write_session, secret=("hmac_key",)
)


def _plain(obj: Obj) -> dict[str, Any]:
    """An object's fields as JSON values (tuples as lists, nested values as objects; enums are
    strings already)."""

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        return value

    # a node's info is the reconciler's, not the operator's
    fields = (f.name for f in dataclasses.fields(obj) if f.name != "info")
    return {name: plain(getattr(obj, name)) for name in fields}


def _audited(kind: Kind[Any], obj: Any) -> dict[str, Any]:
    out = _plain(obj)
    for name in kind.secret:
        out[name] = "(set)" if out[name] else ""
    return out


class FleetService:
    def __init__(self, db: Store, marking_mode: MarkingMode, changed: Callable[[], None]) -> None:
        self._store = db
        self.marking_mode = marking_mode
        self._changed = changed  # wakes the reconciler

    # ---- reads ---------------------------------------------------------------------------------

    def get(self, kind: Kind[T], key: str) -> tuple[T, int]:
        """The object and its revision."""
        with self._store.read() as db:
            row = db.get(kind.row, key)
            if row is None:
                raise NotFound(f"{kind.name} {key} does not exist")
            return kind.of(row), row.revision

    def page(
        self, kind: Kind[T], filters: dict[str, str], limit: int, offset: int
    ) -> tuple[list[tuple[T, int]], int]:
        """A page of objects matching every filter (column = value), and how many match."""
        query = select(kind.row).where(
            *(getattr(kind.row, column) == value for column, value in filters.items())
        )
        key = getattr(kind.row, kind.key)
        with self._store.read() as db:
            total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
            # past the end is an empty page (an offset beyond 64 bits would not reach SQL)
            rows = db.scalars(query.order_by(key).limit(limit).offset(min(offset, total)))
            return [(kind.of(r), r.revision) for r in rows], total

    def around(self, policies: Iterable[str], session: str | None = None) -> Fleet:
        """The part of the domain that shows the given policies' paths (and a session): them,
        their SIDs and every node. A response must not read the whole fleet: there may be
        10,000 sessions."""
        with self._store.read() as db:
            sessions = [row] if session and (row := db.get(SessionRow, session)) else []
            wanted = set(policies) | {p for s in sessions for p in (s.policy, s.return_policy)}
            rows = list(db.scalars(select(PolicyRow).where(PolicyRow.name.in_(wanted))))
            sids = {s for p in rows for sl in p.segment_lists for s in sl.segments}
            return store.fleet(
                db,
                self.marking_mode,
                sids=db.scalars(select(LocalSidRow).where(LocalSidRow.sid.in_(sids))),
                policies=rows,
                sessions=sessions,
            )

    def profile_users(self, name: str, limit: int = 20) -> list[str]:
        """The sessions that name a profile (the first `limit`, by name)."""
        with self._store.read() as db:
            query = select(SessionRow.name).where(SessionRow.profile == name)
            return list(db.scalars(query.order_by(SessionRow.name).limit(limit)))

    def node_status(self) -> dict[str, NodeStatus]:
        """What the reconciler last did on each node."""
        with self._store.read() as db:
            return {
                r.name: NodeStatus(r.applied_revision, r.apply_error, r.reachable, r.attempted_at)
                for r in db.scalars(select(NodeRow))
            }

    # ---- changes -------------------------------------------------------------------------------

    def create(self, kind: Kind[T], obj: T, actor: str) -> tuple[T, int]:
        key = getattr(obj, kind.key)
        with self._store.write() as db:
            if db.get(kind.row, key) is not None:
                raise Conflict(f"{kind.name} {key} already exists")
            obj = cast(T, self._allocate(db, obj))
            self._check_new(db, obj)
            revision = store.audit(db, actor, "create", kind.name, key, None, _audited(kind, obj))
            row = kind.row(**{kind.key: key}, revision=revision)
            kind.write(row, obj)
            db.add(row)
        self._changed()
        return obj, revision

    def update(self, kind: Kind[T], key: str, changes: dict[str, Any], actor: str) -> tuple[T, int]:
        with self._store.write() as db:
            row = db.get(kind.row, key)
            if row is None:
                raise NotFound(f"{kind.name} {key} does not exist")
            old = kind.of(row)
            changed: Any = dataclasses.replace(old, **changes)
            if isinstance(old, Policy):
                changed = _keep_flow_mon_ids(old, changed)
            new = cast(T, self._allocate(db, changed))
            fleet = store.fleet(db, self.marking_mode)
            _replace(fleet, new)
            resynced = _resync_ssids(db, fleet, new)
            _check_dependents(fleet, new)
            revision = store.audit(
                db, actor, "update", kind.name, key, _audited(kind, old), _audited(kind, new)
            )
            kind.write(row, new)
            row.revision = revision
            for session in resynced:
                # each changed session gets the revision: its status waits for the nodes
                held = db.get(SessionRow, session.name)
                if held is not None:
                    SESSION.write(held, session)
                    held.revision = revision
            if isinstance(new, Profile):  # its sessions measure otherwise now
                for user in db.scalars(select(SessionRow).where(SessionRow.profile == key)):
                    user.revision = revision
        self._changed()
        return new, revision

    def delete(self, kind: Kind[Any], key: str, actor: str) -> None:
        with self._store.write() as db:
            row = db.get(kind.row, key)
            if row is None:
                raise NotFound(f"{kind.name} {key} does not exist")
            users = _users(db, kind, key)
            if users:
                raise Conflict(
                    f"{kind.name} {key} is used by {', '.join(users)}: delete or change "
                    f"{'them' if len(users) > 1 else 'it'} first"
                )
            store.audit(db, actor, "delete", kind.name, key, _audited(kind, kind.of(row)), None)
            db.delete(row)
        self._changed()

    # ---- rules ---------------------------------------------------------------------------------

    def _allocate(self, db: Db, obj: Obj) -> Any:
        """Identifiers for what has none yet: a FlowMonID per new segment list, an SSID per
        segment list a session newly probes. Those kept (by name) keep theirs."""
        if isinstance(obj, Policy):
            fresh = [sl for sl in obj.segment_lists if not sl.flow_mon_id]
            column = SegmentListRow.flow_mon_id
            ids = iter(_next_free(db, column, MAX_FLOW_MON_ID, "FlowMonIDs", len(fresh)))
            lists = tuple(
                sl if sl.flow_mon_id else dataclasses.replace(sl, flow_mon_id=next(ids))
                for sl in obj.segment_lists
            )
            return dataclasses.replace(obj, segment_lists=lists)
        if isinstance(obj, Session):
            row = db.get(PolicyRow, obj.policy)
            if row is None:
                raise Invalid(f"policy {obj.policy!r} does not exist")
            return _with_ssids(db, obj, wanted_lists(obj, store.policy_of(row)))
        return obj

    def _check_new(self, db: Db, obj: Obj) -> None:
        """The checks of a new object, on the part of the domain it touches (a create must not
        read the whole fleet: 10,000 sessions are created one by one)."""
        if isinstance(obj, LocalSid):
            if db.get(NodeRow, obj.node) is None:
                raise Invalid(f"node {obj.node!r} does not exist")
        elif isinstance(obj, Policy):
            check_policy(obj, self._around_policy(db, obj))
        elif isinstance(obj, Session):
            check_session(obj, self._around_session(db, obj))
        elif isinstance(obj, Profile):
            check_profile(obj)

    def _around_policy(self, db: Db, policy: Policy) -> Fleet:
        wanted = {sid for sl in policy.segment_lists for sid in sl.segments}
        sids = list(db.scalars(select(LocalSidRow).where(LocalSidRow.sid.in_(wanted))))
        names = {policy.head_node, policy.tail_node} | {s.node for s in sids}
        keys = [store.segments_key(sl.segments) for sl in policy.segment_lists]
        same_lists = select(SegmentListRow.policy).where(SegmentListRow.segments_key.in_(keys))
        clashing = db.scalars(
            select(PolicyRow).where(
                PolicyRow.head_node == policy.head_node,
                or_(
                    (PolicyRow.prefix == policy.prefix) & (PolicyRow.table == policy.table),
                    PolicyRow.name.in_(same_lists),
                ),
            )
        )
        nodes = db.scalars(select(NodeRow).where(NodeRow.name.in_(names)))
        return store.fleet(db, self.marking_mode, nodes, sids, clashing, ())

    def _around_session(self, db: Db, session: Session) -> Fleet:
        names = (session.policy, session.return_policy)
        policies = {
            p.name: p for p in db.scalars(select(PolicyRow).where(PolicyRow.name.in_(names)))
        }
        forward = policies.get(session.policy)
        others: list[SessionRow] = []
        if forward is not None:
            # sessions with an end on either end node: one HMAC key per reflector, one
            # sender per segment list
            ends = (forward.head_node, forward.tail_node)
            touching = select(PolicyRow.name).where(
                or_(PolicyRow.head_node.in_(ends), PolicyRow.tail_node.in_(ends))
            )
            others = list(db.scalars(select(SessionRow).where(SessionRow.policy.in_(touching))))
            more = {p for o in others for p in (o.policy, o.return_policy)} - set(policies)
            policies.update(
                {p.name: p for p in db.scalars(select(PolicyRow).where(PolicyRow.name.in_(more)))}
            )
        names_of_nodes = {n for p in policies.values() for n in (p.head_node, p.tail_node)}
        nodes = db.scalars(select(NodeRow).where(NodeRow.name.in_(names_of_nodes)))
        profiles = db.scalars(select(ProfileRow).where(ProfileRow.name == session.profile))
        return store.fleet(db, self.marking_mode, nodes, (), policies.values(), others, profiles)


def _next_free(db: Db, column: Any, limit: int, what: str, count: int = 1) -> list[int]:
    """`count` values: max + 1 onwards while they fit, else the smallest free ones (O(1) until
    the space wraps)."""
    if not count:
        return []
    top = db.scalar(select(func.max(column))) or 0
    if top + count <= limit:
        return list(range(int(top) + 1, int(top) + 1 + count))
    used = set(db.scalars(select(column)))
    free = [i for i in range(1, limit + 1) if i not in used][:count]
    if len(free) < count:
        raise Exhausted(f"all {limit} {what} are in use")
    return free


def _keep_flow_mon_ids(old: Policy, new: Policy) -> Policy:
    """A segment list kept (by name) keeps its FlowMonID, even on a new path: its flow's
    counters and records go on."""
    held = {sl.name: sl.flow_mon_id for sl in old.segment_lists}
    lists = tuple(
        dataclasses.replace(sl, flow_mon_id=held.get(sl.name, 0)) for sl in new.segment_lists
    )
    return dataclasses.replace(new, segment_lists=lists)


def _with_ssids(db: Db, session: Session, wanted: tuple[str, ...]) -> Session:
    """`session` probing the segment lists `wanted`: those it probed keep their SSIDs, the
    others get new ones."""
    held = {p.segment_list: p.ssid for p in session.ssids}
    fresh = iter(
        _next_free(db, SessionSsidRow.ssid, MAX_SSID, "SSIDs", len(set(wanted) - set(held)))
    )
    ssids = tuple(Probed(name, held[name] if name in held else next(fresh)) for name in wanted)
    return dataclasses.replace(session, ssids=ssids)


def _resync_ssids(db: Db, fleet: Fleet, obj: Obj) -> list[Session]:
    """After a policy's update: its whole-policy sessions probe its segment lists as they are
    now (a new one gets an SSID, a removed one's SSID is freed). The sessions changed, also
    put in `fleet`."""
    if not isinstance(obj, Policy):
        return []
    changed = []
    for session in list(fleet.sessions.values()):
        if session.policy != obj.name or session.segment_list:
            continue
        now = _with_ssids(db, session, wanted_lists(session, obj))
        if now != session:
            fleet.sessions[now.name] = now
            changed.append(now)
    return changed


def _replace(fleet: Fleet, obj: Obj) -> None:
    if isinstance(obj, Node):
        fleet.nodes[obj.name] = obj
    elif isinstance(obj, LocalSid):
        fleet.sids[obj.sid] = obj
    elif isinstance(obj, Policy):
        fleet.policies[obj.name] = obj
    elif isinstance(obj, Profile):
        fleet.profiles[obj.name] = obj
    else:
        fleet.sessions[obj.name] = obj


def _check_dependents(fleet: Fleet, obj: Obj) -> None:
    """After an update: the object and everything resting on it still make sense."""
    if isinstance(obj, LocalSid) and obj.node not in fleet.nodes:
        raise Invalid(f"node {obj.node!r} does not exist")
    if isinstance(obj, Profile):
        check_profile(obj)
        # each session naming it, with its own overrides and its sender node's block
        for session in fleet.sessions.values():
            if session.profile == obj.name:
                check_settings(session, fleet)
        return
    policies = [
        p
        for p in fleet.policies.values()
        if obj is p
        or (isinstance(obj, Node) and obj.name in (p.head_node, p.tail_node))
        or (isinstance(obj, LocalSid) and any(obj.sid in sl.segments for sl in p.segment_lists))
    ]
    for policy in policies:
        check_policy(policy, fleet)
    touched = {p.name for p in policies}
    for session in fleet.sessions.values():
        # an updated session may name policies that do not exist: check_session says so
        if session is obj:
            check_session(session, fleet)
            continue
        if touched & {session.policy, session.return_policy}:
            try:
                check_session(session, fleet)
            except Invalid as e:
                if not isinstance(obj, Policy):
                    raise
                # the policy is fine alone, but a session names a segment list it no longer has
                raise Conflict(f"session {session.name} would break: {e}") from e
            continue
        forward = fleet.policies[session.policy]
        if isinstance(obj, Node) and obj.name in (forward.head_node, forward.tail_node):
            check_session(session, fleet)


def _users(db: Db, kind: Kind[Any], key: str) -> list[str]:
    """What would be left dangling by deleting `key`."""
    if kind is NODE:
        sids = db.scalars(select(LocalSidRow.sid).where(LocalSidRow.node == key).limit(5))
        policies = db.scalars(
            select(PolicyRow.name)
            .where(or_(PolicyRow.head_node == key, PolicyRow.tail_node == key))
            .limit(5)
        )
        return [f"local SID {s}" for s in sids] + [f"policy {p}" for p in policies]
    if kind is LOCAL_SID:
        candidates = db.scalars(
            select(SegmentListRow).where(SegmentListRow.segments_key.contains(key))
        )
        users = dict.fromkeys(sl.policy for sl in candidates if key in sl.segments)
        return [f"policy {p}" for p in users][:5]
    if kind is POLICY:
        rows = db.execute(
            select(SessionRow.name, SessionRow.policy).where(
                or_(SessionRow.policy == key, SessionRow.return_policy == key)
            )
        )
        return [
            f"session {name} ({'forward' if policy == key else 'return'})" for name, policy in rows
        ]
    if kind is PROFILE:
        query = select(SessionRow.name).where(SessionRow.profile == key)
        return [f"session {name}" for name in db.scalars(query.order_by(SessionRow.name).limit(20))]
    return []
