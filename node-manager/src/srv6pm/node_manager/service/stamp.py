"""The node's STAMP Session-Reflector and Session-Senders, run on one asyncio loop thread.

Sessions are declared in the node state and reconciled like everything else: applying the same
sessions again changes nothing; a changed session is restarted. Sockets are opened inside the
router's network namespace (through the driver), so probes leave and arrive on the router
itself and follow its SR policies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from srv6pm.twamp.counters import BlockCounters
from srv6pm.twamp.error_estimate import clock_error_estimate
from srv6pm.twamp.liveness import LivenessConfig, State
from srv6pm.twamp.reflector import ReflectedFlows, ReflectorConfig, ReflectorStats
from srv6pm.twamp.reflector import Reflector as StampReflector
from srv6pm.twamp.results import DelayResult
from srv6pm.twamp.sender import SenderConfig, SenderSession, SenderStats
from srv6pm.twamp.thresholds import Metric, ThresholdConfig
from srv6pm.twamp.transport import Endpoint, open_socket

from ..adapters.metrics import SessionLiveness, SessionThresholds
from ..domain.errors import FailedPrecondition
from ..domain.model import Changes, Reflector
from ..domain.model import SenderSession as SenderSpec
from ..drivers.base import ProbeEndpoint, ProbeEndpoints
from .desired import DEFAULT_STEERING_MARK_BASE, reply_mark
from .results import LivenessListener, ResultsService, SessionResults

log = logging.getLogger(__name__)
T = TypeVar("T")
InNetns = Callable[[Callable[[], socket.socket]], socket.socket]


@dataclass
class StampPlan:
    """Changes to the STAMP sessions and reflector, with the sockets they need."""

    changes: Changes
    reflector: Reflector
    reflector_changed: bool
    stale: list[str]
    new: list[tuple[SenderSpec, socket.socket | ProbeEndpoint]] = field(default_factory=list)
    reflector_socket: socket.socket | None = None


@dataclass
class _Running:
    spec: SenderSpec
    session: SenderSession
    results: SessionResults
    endpoint: Endpoint | ProbeEndpoint
    task: asyncio.Task[None]


SSID_SPREAD = 40503  # odd, about 65536 / golden ratio: consecutive SSIDs land far apart


def loss_probe_offset_ns(period_ns: int, ssid: int) -> int:
    """When in block k + 1 a session sends the loss probe of block k: spread over [T/2, 3T/4)
    by SSID, so thousands of sessions do not all send in the same instant (block k stays
    readable until block k + 2 starts). SSIDs are mostly given out in order from 1, so they
    are scattered first (multiplication by an odd number permutes 16-bit values), and any
    run of them covers the whole window."""
    return period_ns // 2 + (ssid * SSID_SPREAD & 0xFFFF) * (period_ns // 4) // 65536


class StampService:
    def __init__(
        self,
        in_netns: InNetns,
        counters: BlockCounters,
        results: ResultsService,
        period_ns: int,
        clock_synchronised: bool,
        sequences: Callable[[str, int], int | None] | None = None,
        steering_mark_base: int = DEFAULT_STEERING_MARK_BASE,
        liveness_listener: LivenessListener | None = None,
        probe_endpoints: ProbeEndpoints | None = None,
        data_plane_reflects: bool = False,
    ) -> None:
        self._probe_endpoints = probe_endpoints  # the data plane carries senders' packets itself
        self._data_plane_reflects = data_plane_reflects  # it answers every probe: no socket here
        self._mark_base = steering_mark_base  # probe_routes(): how packets find their SID list
        # told of every liveness change, on this service's loop thread, once it is journaled
        self._liveness_listener = liveness_listener
        self._in_netns = in_netns
        self._sequences = sequences  # the in-kernel reflector's stateful counters
        self._counters = counters
        self._results = results
        self._period_ns = period_ns
        self._synced = clock_synchronised
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stamp", daemon=True)
        self._thread.start()
        self._senders: dict[str, _Running] = {}
        self._reflector_spec = Reflector()
        self._reflector: tuple[StampReflector, Endpoint] | None = None
        # Sessions of the first state applied by this process (the one restored after a
        # restart) carry on from their journaled blocks; later ones start afresh.
        self._resuming = True

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _socket(self, address: str, port: int, mark: int = 0) -> socket.socket:
        try:
            return self._in_netns(lambda: open_socket(address, port, mark=mark))
        except OSError as e:
            raise FailedPrecondition(
                f"cannot open a STAMP socket on [{address}]:{port}: {e.strerror}"
            ) from None

    # ---- reconcile ---------------------------------------------------------------------------

    def prepare(
        self, reflector: Reflector, sessions: tuple[SenderSpec, ...], dry_run: bool = False
    ) -> StampPlan:
        """What applying these sessions and reflector changes. Unless `dry_run`, the sockets
        they need are opened now, before the node changes anything: a socket that cannot be
        bound is FailedPrecondition with nothing changed (ApplyState is all or nothing)."""
        wanted = {s.name: s for s in sessions}
        stale = [n for n, r in self._senders.items() if wanted.get(n) != r.spec]
        new = [s for n, s in wanted.items() if n not in self._senders or n in stale]
        plan = StampPlan(
            Changes(len(new), len(stale), len(wanted) - len(new)),
            reflector,
            reflector != self._reflector_spec,
            stale,
        )
        if dry_run:
            return plan
        running = self._reflector_spec
        same_socket = running.enabled and (running.address, running.port) == (
            reflector.address,
            reflector.port,
        )
        try:
            for spec in new:
                plan.new.append((spec, self._sender_endpoint(spec)))
            if reflector.enabled and not same_socket and not self._data_plane_reflects:
                plan.reflector_socket = self._socket(reflector.address, reflector.port)
        except FailedPrecondition:
            self.discard(plan)
            raise
        return plan

    def _sender_endpoint(self, spec: SenderSpec) -> socket.socket | ProbeEndpoint:
        if self._probe_endpoints is None:
            return self._socket(spec.source_address or "::", 0, self._probe_mark(spec))
        return self._probe_endpoints.open(
            spec.source_address, spec.ssid, spec.reflector_address, bool(spec.hmac_key)
        )

    def _probe_mark(self, spec: SenderSpec) -> int:
        """Probes steered into their SID list carry their session's mark (probe_routes)."""
        return self._mark_base + spec.ssid if spec.direct_segments else 0

    def discard(self, plan: StampPlan) -> None:
        """Close the sockets of a plan that will not be committed."""
        for _, sock in plan.new:
            sock.close()
        if plan.reflector_socket:
            plan.reflector_socket.close()
        plan.new, plan.reflector_socket = [], None

    def commit(self, plan: StampPlan) -> None:
        """Apply a prepared plan; its sockets pass to the sessions as they start."""
        for name in plan.stale:
            self._call(self._stop_sender(self._senders.pop(name)))
        while plan.new:
            spec, sock = plan.new.pop(0)
            self._senders[spec.name] = self._call(self._start_sender(spec, sock))
        self._resuming = False
        if plan.reflector_changed:
            listening, plan.reflector_socket = plan.reflector_socket, None
            self._apply_reflector(plan.reflector, listening)

    def set_clock_synchronised(self, synchronised: bool) -> None:
        """Running sessions and the reflector tell their peers the clock's new state."""
        self._synced = synchronised
        self._call(self._set_clock_synchronised(synchronised))

    async def _set_clock_synchronised(self, synchronised: bool) -> None:
        for running in self._senders.values():
            running.session.set_clock_synchronised(synchronised)
        if self._reflector:
            self._reflector[0].config.error_estimate = clock_error_estimate(synchronised)

    async def _start_sender(
        self, spec: SenderSpec, sock: socket.socket | ProbeEndpoint
    ) -> _Running:
        config = SenderConfig(
            name=spec.name,
            ssid=spec.ssid,
            reflector=(spec.reflector_address, spec.reflector_port),
            forward_flow=spec.forward_flow,
            reverse_flow=spec.reverse_flow,
            period_ns=self._period_ns,
            delay_interval_ns=spec.delay_interval_ms * 1_000_000,
            return_segments=spec.return_segments,
            key=spec.hmac_key or None,
            clock_synchronised=self._synced,
            read_offset_ns=loss_probe_offset_ns(self._period_ns, spec.ssid),
            resume_from_block=self._results.resume_from(spec.name) if self._resuming else None,
            liveness=_liveness(spec),
            histogram_edges_ns=tuple(edge * 1000 for edge in spec.histogram_edges_us),
            burst_size=spec.burst_size,
            computation_interval_ns=spec.computation_interval_ms * 1_000_000,
            thresholds=_thresholds(spec),
        )
        endpoint = Endpoint(sock) if isinstance(sock, socket.socket) else sock
        results = self._results.session(spec, self._liveness_listener)
        session = SenderSession(
            config,
            self._counters,
            endpoint.send,
            results=results,
            t1_on_the_wire=not isinstance(endpoint, Endpoint) and endpoint.stamps_t1,
        )
        endpoint.serve(session.handle)
        task = asyncio.get_running_loop().create_task(session.run(), name=f"stamp-{spec.name}")
        log.info(
            "STAMP session %s started: ssid=%d reflector=[%s]:%d",
            spec.name,
            spec.ssid,
            spec.reflector_address,
            spec.reflector_port,
        )
        return _Running(spec, session, results, endpoint, task)

    @staticmethod
    async def _stop_sender(running: _Running) -> None:
        running.task.cancel()
        running.endpoint.close()

    def _apply_reflector(self, spec: Reflector, sock: socket.socket | None) -> None:
        """The reflector as `spec` says: on `sock` when given, else (same address and port)
        on the running one's socket, with the new settings."""
        self._reflector_spec = spec
        if self._reflector and (sock or not spec.enabled):
            self._call(self._close(self._reflector[1]))
            self._reflector = None
        if not spec.enabled or self._data_plane_reflects:
            return
        config = ReflectorConfig(
            stateful=spec.stateful,
            key=spec.hmac_key or None,
            error_estimate=clock_error_estimate(self._synced),
            period_ns=self._period_ns,
            port=spec.port,
            allowed_dscp=frozenset(spec.allowed_dscp) or None,
            reply_marks=lambda ssid: reply_mark(self._mark_base, ssid),
            # shared with the in-kernel reflector, which answers unauthenticated probes only
            sequences=None if spec.hmac_key else self._sequences,
            sessions={
                s.ssid: ReflectedFlows(
                    s.forward_flow,
                    s.reverse_flow,
                    frozenset((r.sender_address, r.segments) for r in s.return_paths),
                )
                for s in spec.sessions
            },
        )
        if sock:
            self._reflector = self._call(self._start_reflector(config, sock))
        elif self._reflector:
            self._reflector[0].config = config  # read per packet: the next probe sees it
        for warning in self.warnings():
            log.warning("%s", warning)
        log.info(
            "STAMP reflector on [%s]:%d (%s)",
            spec.address,
            spec.port,
            "stateful" if spec.stateful else "stateless",
        )

    async def _start_reflector(
        self, config: ReflectorConfig, sock: socket.socket
    ) -> tuple[StampReflector, Endpoint]:
        endpoint = Endpoint(sock)
        reflector = StampReflector(config, self._counters, endpoint.send)
        endpoint.serve(reflector.handle)
        return reflector, endpoint

    @staticmethod
    async def _close(endpoint: Endpoint) -> None:
        endpoint.close()

    # ---- reads -------------------------------------------------------------------------------

    def probes(self, session: str = "") -> tuple[list[DelayResult], dict[str, SenderStats]]:
        """The recent probes (in memory) and counters of one session or all."""

        async def collect() -> tuple[list[DelayResult], dict[str, SenderStats]]:
            chosen = {n: r for n, r in self._senders.items() if not session or n == session}
            probes = [x for r in chosen.values() for x in r.results.probes]
            stats = {
                n: dataclasses.replace(r.session.stats, results_evicted=r.results.evicted)
                for n, r in chosen.items()
            }
            return probes, stats

        return self._call(collect())

    def warnings(self) -> list[str]:
        """What an operator should act on (GetInfo)."""
        spec = self._reflector_spec
        if spec.enabled and not spec.hmac_key:
            return [
                f"the STAMP reflector on [{spec.address}]:{spec.port} is unauthenticated: it "
                "answers any host that reaches it; give it an HMAC key or filter who can"
            ]
        return []

    def specs(self) -> tuple[Reflector, tuple[SenderSpec, ...]]:
        """The reflector and sender sessions as last applied, HMAC keys left out: keys are
        written, never read back."""
        reflector = dataclasses.replace(self._reflector_spec, hmac_key=b"")
        senders = tuple(dataclasses.replace(r.spec, hmac_key=b"") for r in self._senders.values())
        return reflector, senders

    def session_names(self) -> list[str]:
        return list(self._senders)

    def sender_stats(self) -> SenderStats:
        """Every session's counters summed (metrics)."""
        total = SenderStats()
        for running in list(self._senders.values()):
            for name, value in dataclasses.asdict(running.session.stats).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def liveness(self) -> list[SessionLiveness]:
        """The liveness of every running session that has it (metrics)."""
        out = []
        for running in list(self._senders.values()):
            monitor, spec = running.session.liveness, running.spec
            if monitor is not None:
                up = None if monitor.state is None else monitor.state is State.UP
                out.append(
                    SessionLiveness(
                        spec.name, spec.policy_label, spec.segment_list, up, monitor.changes
                    )
                )
        return out

    def thresholds(self) -> list[SessionThresholds]:
        """The threshold events of every running session that has thresholds (metrics)."""
        out = []
        for running in list(self._senders.values()):
            monitor, spec = running.session.thresholds, running.spec
            if monitor is not None:
                events = {metric.value: n for metric, n in monitor.events.items()}
                out.append(
                    SessionThresholds(spec.name, spec.policy_label, spec.segment_list, events)
                )
        return out

    def reflector_stats(self) -> ReflectorStats:
        return self._reflector[0].stats if self._reflector else ReflectorStats()

    def stop(self) -> None:
        for running in self._senders.values():
            self._call(self._stop_sender(running))
        if self._reflector:
            self._call(self._close(self._reflector[1]))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def _liveness(spec: SenderSpec) -> LivenessConfig | None:
    settings = spec.liveness
    if not settings.enabled:
        return None
    return LivenessConfig(settings.down_after, settings.up_after, settings.timeout_ms * 1_000_000)


def _thresholds(spec: SenderSpec) -> ThresholdConfig | None:
    t = spec.thresholds
    if not t.enabled:
        return None
    return ThresholdConfig(
        percent=t.percent,
        absolute_ns=t.absolute_us * 1000,
        check_each_burst=t.check_each_burst,
        min_report_interval_ns=t.min_report_interval_ms * 1_000_000,
        metrics=tuple(Metric(m) for m in t.metrics) or (Metric.TWO_WAY_MEAN,),
    )
