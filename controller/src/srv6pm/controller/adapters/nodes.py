"""gRPC clients of the node managers (the proto/ contract), over mTLS when configured."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

from ..domain.model import Behaviour, EncapMode, NodeInfo

MAX_MESSAGE = 64 * 1024 * 1024  # the node manager's own limit: 10,000+ flows in one state
_BEHAVIOURS = {getattr(pb, "BEHAVIOUR_" + b.name): b.value for b in Behaviour}
_ENCAP_MODES = {getattr(pb, "ENCAP_MODE_" + m.name): m.value for m in EncapMode}


class NodeUnavailable(Exception):
    """The node manager could not be reached, or refused the call; the message says why."""


@dataclass(frozen=True)
class Tls:
    """The controller's client identity and the CA that signs node managers' certificates."""

    ca: Path
    cert: Path
    key: Path

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca.read_bytes(),
            private_key=self.key.read_bytes(),
            certificate_chain=self.cert.read_bytes(),
        )


def info_of(reply: pb.NodeInfo) -> NodeInfo:
    return NodeInfo(
        driver=reply.driver,
        version=reply.version,
        period_ns=reply.period_ns,
        interfaces=tuple(reply.interfaces),
        behaviours=tuple(_BEHAVIOURS[b] for b in reply.behaviours if b in _BEHAVIOURS),
        encap_modes=tuple(_ENCAP_MODES[m] for m in reply.encap_modes if m in _ENCAP_MODES),
        max_flows=reply.max_flows,
        max_segments=reply.max_segments,
        warnings=tuple(reply.warnings),
    )


class NodeClients:
    """One channel per node-manager endpoint, kept while the endpoint stays the same."""

    def __init__(self, tls: Tls | None, timeout_s: float, server_name: str = "") -> None:
        self._credentials = tls.credentials() if tls else None
        self._server_name = server_name
        self._timeout = timeout_s
        self._channels: dict[str, tuple[str, grpc.Channel]] = {}
        self._lock = threading.Lock()

    def _stub(self, node: str, endpoint: str) -> pb_grpc.NodeManagerStub:
        with self._lock:
            known = self._channels.get(node)
            if known is None or known[0] != endpoint:
                if known is not None:
                    known[1].close()
                options: list[tuple[str, int | str]] = [
                    ("grpc.max_send_message_length", MAX_MESSAGE),
                    ("grpc.max_receive_message_length", MAX_MESSAGE),
                ]
                if self._server_name:
                    options.append(("grpc.ssl_target_name_override", self._server_name))
                channel = (
                    grpc.secure_channel(endpoint, self._credentials, options)
                    if self._credentials
                    else grpc.insecure_channel(endpoint, options)
                )
                self._channels[node] = known = (endpoint, channel)
            return pb_grpc.NodeManagerStub(known[1])

    def info(self, node: str, endpoint: str) -> NodeInfo:
        try:
            reply = self._stub(node, endpoint).GetInfo(pb.GetInfoRequest(), timeout=self._timeout)
        except grpc.RpcError as e:
            raise NodeUnavailable(_message(e)) from e
        return info_of(reply)

    def apply(
        self, node: str, endpoint: str, state: pb.NodeState, dry_run: bool, timeout_s: float
    ) -> pb.ApplyStateResponse:
        request = pb.ApplyStateRequest(desired=state, dry_run=dry_run)
        try:
            reply: pb.ApplyStateResponse = self._stub(node, endpoint).ApplyState(
                request, timeout=timeout_s
            )
        except grpc.RpcError as e:
            raise NodeUnavailable(_message(e)) from e
        return reply

    def forget(self, keep: set[str]) -> None:
        """Close the channels of nodes no longer in the fleet."""
        with self._lock:
            for node in set(self._channels) - keep:
                self._channels.pop(node)[1].close()

    def close(self) -> None:
        self.forget(set())


def _message(error: grpc.RpcError) -> str:
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    return f"{code.name if code else 'ERROR'}: {details}"


def changed(reply: pb.ApplyStateResponse) -> bool:
    """Does an ApplyState (dry run) reply report anything to change?"""
    parts = (reply.policies, reply.local_sids, reply.flows, reply.sessions)
    return (
        any(c.added or c.removed for c in parts) or reply.marking_changed or reply.reflector_changed
    )
