"""The NodeManager gRPC service: thin, maps messages and errors, delegates to NodeService."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import grpc
from prometheus_client import Histogram
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

from .. import __version__
from ..domain.errors import FailedPrecondition, InvalidArgument, NodeManagerError, NotFound
from ..domain.model import Changes
from ..service.node import NodeService
from ..service.results import DEFAULT_LIMIT
from . import convert

log = logging.getLogger(__name__)
R = TypeVar("R")

_CODES = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    NotFound: grpc.StatusCode.NOT_FOUND,
}


def _changes(c: Changes) -> pb.Changes:
    return pb.Changes(added=c.added, removed=c.removed, unchanged=c.unchanged)


class NodeManagerServicer(pb_grpc.NodeManagerServicer):  # type: ignore[misc]
    def __init__(
        self,
        node_id: str,
        service: NodeService,
        desired_file: Path,
        apply_seconds: Histogram | None = None,
    ) -> None:
        self._node_id = node_id
        self._service = service
        self._desired_file = desired_file
        self._apply_seconds = apply_seconds

    def restore(self) -> bool:
        """Converge again to the last state applied before a restart: the kernel kept routes,
        flows and counters, but STAMP sessions live in this process (and a restarted VPP kept
        nothing). False if the data plane refused it (e.g. an interface not there yet)."""
        if not self._desired_file.exists():
            return True
        desired = pb.NodeState.FromString(self._desired_file.read_bytes())
        try:
            self._service.apply(convert.node_state(desired))
            log.info("restored the last applied state from %s", self._desired_file)
        except NodeManagerError as e:
            log.error("cannot restore the last applied state: %s", e)
            return False
        return True

    def _save(self, desired: pb.NodeState) -> None:
        tmp = self._desired_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold HMAC keys
        with os.fdopen(fd, "wb") as f:
            f.write(desired.SerializeToString())
        os.replace(tmp, self._desired_file)

    def _call(self, context: grpc.ServicerContext, fn: Callable[[], R]) -> R:
        try:
            return fn()
        except NodeManagerError as e:
            code = next(c for t, c in _CODES.items() if isinstance(e, t))
            log.info("refused: %s: %s", code.name, e)
            context.abort(code, str(e))
            raise  # abort raises; this keeps type checkers satisfied
        except Exception as e:
            log.exception("internal error")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
            raise

    def GetInfo(self, request: pb.GetInfoRequest, context: Any) -> pb.NodeInfo:
        caps = self._service.capabilities
        return pb.NodeInfo(
            node_id=self._node_id,
            driver=caps.driver,
            version=__version__,
            behaviours=sorted(convert.BEHAVIOUR_TO_PB[b] for b in caps.behaviours),
            encap_modes=sorted(convert.MODE_TO_PB[m] for m in caps.encap_modes),
            max_flows=caps.max_flows,
            max_segments=16,
            period_ns=self._service.blocks.period_ns,
            counter_width_bits=caps.counter_width_bits,
            safe_window_guard_ns=self._service.guard_ns,
            interfaces=sorted(self._service.interfaces()),
            warnings=self._service.stamp.warnings(),
        )

    def ApplyState(self, request: pb.ApplyStateRequest, context: Any) -> pb.ApplyStateResponse:
        def apply() -> pb.ApplyStateResponse:
            started = time.monotonic()
            result = self._service.apply(convert.node_state(request.desired), request.dry_run)
            if self._apply_seconds and not request.dry_run:
                self._apply_seconds.observe(time.monotonic() - started)
            if not request.dry_run:
                self._save(request.desired)
            return pb.ApplyStateResponse(
                policies=_changes(result.policies),
                local_sids=_changes(result.local_sids),
                flows=_changes(result.flows),
                marking_changed=result.marking_changed,
                sessions=_changes(result.sessions),
                reflector_changed=result.reflector_changed,
            )

        return self._call(context, apply)

    def GetState(self, request: pb.GetStateRequest, context: Any) -> pb.NodeState:
        return self._call(context, lambda: convert.node_state_pb(self._service.state()))

    def ReadCounters(
        self, request: pb.ReadCountersRequest, context: Any
    ) -> pb.ReadCountersResponse:
        def read() -> pb.ReadCountersResponse:
            now, counters = self._service.read_counters(request.flows)
            flows = {f.name: f for f in self._service.flows()}
            return pb.ReadCountersResponse(
                read_at_unix_ns=now,
                block=self._service.blocks.block(now),
                flows=[
                    pb.FlowCounters(
                        flow=name,
                        segments=flows[name].segments,
                        role=convert.ROLE_TO_PB[flows[name].role],
                        colours=[
                            pb.ColourCounters(packets=c.packets, bytes=c.bytes) for c in per_colour
                        ],
                    )
                    for name, per_colour in counters.items()
                ],
                stats=pb.PacketStats(**asdict(self._service.read_stats())),
            )

        return self._call(context, read)

    def ReadBlock(self, request: pb.ReadBlockRequest, context: Any) -> pb.ReadBlockResponse:
        def read() -> pb.ReadBlockResponse:
            reading = self._service.read_block(request.flows, request.block)
            roles = {f.name: f.role for f in self._service.flows()}
            return pb.ReadBlockResponse(
                block=reading.block,
                colour=reading.colour,
                flows=[
                    pb.BlockCounters(flow=n, role=convert.ROLE_TO_PB[roles[n]], packets=p, bytes=b)
                    for n, (p, b) in reading.counts.items()
                ],
            )

        return self._call(context, read)

    def ReadResults(self, request: pb.ReadResultsRequest, context: Any) -> pb.ReadResultsResponse:
        def read() -> pb.ReadResultsResponse:
            limit = request.limit or DEFAULT_LIMIT
            results = self._service.results
            loss, more_loss = results.loss(request.session, request.since_block, limit)
            delay, more_delay = results.delay(request.session, request.since_block, limit)
            liveness, more_liveness = results.liveness(request.session, request.since_block, limit)
            thresholds, more_thresholds = results.thresholds(
                request.session, request.since_block, limit
            )
            intervals, more_intervals = results.intervals(
                request.session, request.since_block, limit
            )
            probes, senders = self._service.stamp.probes(request.session)
            if request.session and not (loss or delay or liveness or thresholds or senders):
                raise NotFound(f"no STAMP session named {request.session!r} on this node")
            return pb.ReadResultsResponse(
                loss=loss,
                delay=delay,
                probes=results.probe_records(
                    x for x in probes if x.sent_ns >= request.since_unix_ns
                ),
                senders=[
                    pb.SenderStats(session=name, **asdict(st)) for name, st in senders.items()
                ],
                reflector=pb.ReflectorStats(**asdict(self._service.stamp.reflector_stats())),
                kernel_reflector=pb.KernelReflectorStats(**self._service.kernel_reflector_stats()),
                liveness=liveness,
                thresholds=thresholds,
                intervals=intervals,
                truncated=any(
                    (more_loss, more_delay, more_liveness, more_thresholds, more_intervals)
                ),
            )

        return self._call(context, read)
